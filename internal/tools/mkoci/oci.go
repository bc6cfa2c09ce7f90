package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Media types of the OCI image specification (v1.1).
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// entry is one path of the image's file system: a regular file copied from the host (src), a
// folder (dir) or a symbolic link (link).
type entry struct {
	path string // in the image, absolute
	mode int64  // permission bits (and sticky bit); never taken from the host
	src  string // host file whose bytes the image file holds
	data []byte // or the bytes themselves
	dir  bool
	link string
}

// image is everything that decides the image's bytes.
type image struct {
	entries    []entry
	created    time.Time // every timestamp: files, config, history
	arch, os   string
	entrypoint []string
	env        []string
	user       string
	workdir    string
	labels     map[string]string
	tag        string
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// layout is a written image: the manifest's digest names the image.
type layout struct {
	manifest descriptor
	layer    descriptor
	diffID   string
}

// write writes img as an OCI image layout in dir (which must not exist): oci-layout,
// index.json and blobs/sha256/ (one gzip-compressed layer, the config, the manifest).
func (img *image) write(dir string) (layout, error) {
	var out layout
	if _, err := os.Lstat(dir); err == nil {
		return out, fmt.Errorf("%s: exists; give a new folder", dir)
	}
	blobs := filepath.Join(dir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return out, err
	}
	tarBytes, err := img.layerTar()
	if err != nil {
		return out, err
	}
	out.diffID = digest(tarBytes)
	gz, err := gzipBytes(tarBytes)
	if err != nil {
		return out, err
	}
	out.layer = descriptor{MediaType: mediaLayerGz, Digest: digest(gz), Size: int64(len(gz))}
	created := img.created.UTC().Format(time.RFC3339)
	config := map[string]any{
		"created":      created,
		"architecture": img.arch,
		"os":           img.os,
		"config": map[string]any{
			"User":       img.user,
			"Env":        img.env,
			"Entrypoint": img.entrypoint,
			"WorkingDir": img.workdir,
			"Labels":     img.labels,
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{out.diffID}},
		"history": []map[string]string{{"created": created, "created_by": "scripts/build-oci.sh"}},
	}
	configBytes, err := json.Marshal(config)
	if err != nil {
		return out, err
	}
	manifest := map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaManifest,
		"config":        descriptor{MediaType: mediaConfig, Digest: digest(configBytes), Size: int64(len(configBytes))},
		"layers":        []descriptor{out.layer},
		"annotations":   img.labels,
	}
	manifestBytes, err := json.Marshal(manifest)
	if err != nil {
		return out, err
	}
	out.manifest = descriptor{
		MediaType: mediaManifest, Digest: digest(manifestBytes), Size: int64(len(manifestBytes)),
		Platform: &platform{Architecture: img.arch, OS: img.os},
	}
	if img.tag != "" {
		out.manifest.Annotations = map[string]string{"org.opencontainers.image.ref.name": img.tag}
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     mediaIndex,
		"manifests":     []descriptor{out.manifest},
	})
	if err != nil {
		return out, err
	}
	for _, b := range [][]byte{gz, configBytes, manifestBytes} {
		if err := os.WriteFile(filepath.Join(blobs, strings.TrimPrefix(digest(b), "sha256:")), b, 0o644); err != nil {
			return out, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		return out, err
	}
	return out, os.WriteFile(filepath.Join(dir, "index.json"), index, 0o644)
}

// layerTar returns the layer: every entry and every parent folder not given, sorted by path,
// owned by 0:0, with the image's time and no host-dependent field.
func (img *image) layerTar() ([]byte, error) {
	byPath := map[string]entry{}
	for _, e := range img.entries {
		p := path.Clean("/" + e.path)
		if p == "/" {
			return nil, fmt.Errorf("%q: not a path in the image", e.path)
		}
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("%s: given twice", p)
		}
		e.path = p
		byPath[p] = e
	}
	for p := range byPath {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if old, ok := byPath[d]; ok {
				if !old.dir {
					return nil, fmt.Errorf("%s: is a folder of %s and not given as one", d, p)
				}
				continue
			}
			byPath[d] = entry{path: d, dir: true, mode: 0o755}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := byPath[p]
		h := &tar.Header{
			Name:    strings.TrimPrefix(p, "/"),
			Mode:    e.mode,
			ModTime: img.created,
		}
		var data []byte
		switch {
		case e.dir:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case e.link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.link, 0o777
		default:
			h.Typeflag = tar.TypeReg
			data = e.data
			if e.src != "" {
				var err error
				if data, err = readRegular(e.src); err != nil {
					return nil, err
				}
			}
			h.Size = int64(len(data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// readRegular reads a host file, following links, refusing anything but a regular file.
func readRegular(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	return io.ReadAll(f)
}

// gzipBytes compresses b with no name and no time in the gzip header: the same bytes in give
// the same bytes out (for one version of Go's compress/flate).
func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}
