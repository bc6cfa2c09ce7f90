package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	pq "github.com/parquet-go/parquet-go"

	"github.com/packer-dev/packer/storage/s3/s3test"
)

// recordRow is a row of the Parquet files of these tests: the image bytes and an integer label.
type recordRow struct {
	Image []byte `parquet:"image"`
	Label int64  `parquet:"label"`
}

// writeParquetFiles writes the images below imgs (cat/*.png, dog/*.png) as Parquet files of per
// rows each, in row groups of group rows.
func writeParquetFiles(t *testing.T, imgs, dir string, per, group int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var rows []recordRow
	for _, cls := range []string{"cat", "dog"} {
		m, _ := filepath.Glob(filepath.Join(imgs, cls, "*.png"))
		for _, p := range m {
			label := int64(0)
			if cls == "dog" {
				label = 1
			}
			rows = append(rows, recordRow{Image: readFile(t, p), Label: label})
		}
	}
	for f := 0; f*per < len(rows); f++ {
		var b bytes.Buffer
		// No min and max of the image column in the footer (pyarrow leaves out large values too).
		w := pq.NewGenericWriter[recordRow](&b, pq.MaxRowsPerRowGroup(int64(group)), pq.SkipPageBounds("image"))
		if _, err := w.Write(rows[f*per : min(len(rows), (f+1)*per)]); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("train-%05d.parquet", f)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// planFile is a file line of a plan.
type planFile struct {
	Path  string  `json:"path"`
	Size  int64   `json:"size"`
	Items int64   `json:"items"`
	Group []int64 `json:"groups"`
}

// planFiles reads the file lines of the plan at p (none: t fails).
func planFiles(t *testing.T, p string) []planFile {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	sc.Scan()
	var files []planFile
	for sc.Scan() {
		var pf planFile
		if err := json.Unmarshal(sc.Bytes(), &pf); err != nil || pf.Path == "" {
			t.Fatalf("%s: not a file line: %s (%v)", p, sc.Bytes(), err)
		}
		files = append(files, pf)
	}
	if len(files) == 0 {
		t.Fatalf("%s has no file lines", p)
	}
	return files
}

// ownFiles are the files of a plan that hold inputs of [lo, hi).
func ownFiles(files []planFile, lo, hi int64) map[string]bool {
	own := map[string]bool{}
	var at int64
	for _, f := range files {
		if f.Items > 0 && at < hi && at+f.Items > lo {
			own[f.Path] = true
		}
		at += f.Items
	}
	return own
}

// recordCorpus writes 24 noise images as WebDataset shards, TFRecord files and Parquet files
// (row groups of 2 rows), 4 inputs a file, and returns their folders by kind.
func recordCorpus(t *testing.T, root string) (imgs string, dirs map[string]string) {
	imgs = filepath.Join(root, "imgs")
	writeNoisePNGs(t, imgs, 12)
	dirs = map[string]string{"webdataset": filepath.Join(root, "wds"), "tfrecord": filepath.Join(root, "tfr"), "parquet": filepath.Join(root, "pq")}
	writeShardTars(t, imgs, dirs["webdataset"], 4)
	writeTFRecordFiles(t, imgs, dirs["tfrecord"], 4)
	writeParquetFiles(t, imgs, dirs["parquet"], 4, 2)
	return imgs, dirs
}

// TestPlanRecordPartsOwnFiles: the parts of a plan of a local WebDataset, TFRecord or Parquet
// folder read only the files that hold their inputs. Once the plan is made, every other file
// is overwritten with other bytes of its size and given back its modification time (a part
// that read it would fail, or list other inputs); the parts still build and merge into the
// one-machine build. A file whose size or time changed since the plan fails every part, naming
// the file.
func TestPlanRecordPartsOwnFiles(t *testing.T) {
	root := t.TempDir()
	_, dirs := recordCorpus(t, root)
	args := []string{"--crop", "16", "--classes", "cat,dog", "--shard-size", "2KiB"}
	for _, kind := range []string{"webdataset", "tfrecord", "parquet"} {
		t.Run(kind, func(t *testing.T) {
			src, dir := dirs[kind], filepath.Join(root, "out-"+kind)
			full := filepath.Join(dir, "full")
			mustRun(t, append([]string{"build", src, "-o", full}, args...)...)
			plan := filepath.Join(dir, "src.plan")
			mustRun(t, "plan", src, "-o", plan, "--classes", "cat,dog")
			files := planFiles(t, plan)
			var parts []string
			for i := range 3 {
				// Copies of the source whose files outside the part's share are garbage of the
				// planned size and time.
				own := ownFiles(files, int64(i)*24/3, int64(i+1)*24/3)
				if len(own) == 0 || len(own) == len(files) {
					t.Fatalf("part %d/3 holds inputs of %d of %d files", i, len(own), len(files))
				}
				keep := maps.Clone(own)
				if kind == "parquet" {
					keep[files[0].Path] = true // its schema is read when the source opens
				}
				restore := garble(t, src, files, keep)
				p := filepath.Join(dir, fmt.Sprintf("p%d", i))
				mustRun(t, "build", plan, "-o", p, "--part", fmt.Sprintf("%d/3", i), "--crop", "16", "--shard-size", "2KiB")
				parts = append(parts, p)
				restore()
			}
			merged := filepath.Join(dir, "merged")
			mustRun(t, append([]string{"merge", "-o", merged}, parts...)...)
			sameTree(t, full, merged)

			// A file touched since the plan (same bytes, another time) fails every part, naming it.
			last := filepath.Join(src, files[len(files)-1].Path)
			later := time.Now().Add(time.Hour)
			if err := os.Chtimes(last, later, later); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := run(t, "build", plan, "-o", filepath.Join(dir, "q0"), "--part", "0/3")
			if code == 0 || !strings.Contains(stderr, last) || !strings.Contains(stderr, "make a new plan") {
				t.Errorf("a part of a plan whose file %s changed: exit %d, want a refusal naming it:\n%s", last, code, stderr)
			}
		})
	}
}

// garble overwrites every planned file of src not in keep with bytes of its size, and gives it
// back its modification time: what a plan records of it is unchanged. restore puts the files back.
func garble(t *testing.T, src string, files []planFile, keep map[string]bool) (restore func()) {
	t.Helper()
	var undo []func()
	restore = func() {
		for _, u := range undo {
			u()
		}
	}
	for _, f := range files {
		if keep[f.Path] {
			continue
		}
		p := filepath.Join(src, f.Path)
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		orig := readFile(t, p)
		undo = append(undo, func() {
			if err := os.WriteFile(p, orig, 0o644); err != nil {
				t.Error(err)
			}
			if err := os.Chtimes(p, st.ModTime(), st.ModTime()); err != nil {
				t.Error(err)
			}
		})
		if err := os.WriteFile(p, bytes.Repeat([]byte{0xa5}, int(st.Size())), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, st.ModTime(), st.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	return restore
}

// byteProxy is a proxy in front of the test server that counts the bytes of the object GETs'
// bodies it passes on, by path.
type byteProxy struct {
	Endpoint string
	mu       sync.Mutex
	bytes    map[string]int64
}

func startByteProxy(t *testing.T, srv *s3test.Server) *byteProxy {
	t.Helper()
	target, err := url.Parse(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	p := &byteProxy{bytes: map[string]int64{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme, pr.Out.URL.Host = target.Scheme, target.Host
			pr.Out.Host = pr.In.Host // the request was signed for the proxy's host
		},
		ModifyResponse: func(resp *http.Response) error {
			if q := resp.Request.URL.Query(); resp.Request.Method == http.MethodGet && (len(q) == 0 || q.Get("x-id") == "GetObject") {
				resp.Body = &countedBody{ReadCloser: resp.Body, p: p, path: resp.Request.URL.Path}
			}
			return nil
		},
	}
	s := httptest.NewServer(rp)
	t.Cleanup(s.Close)
	p.Endpoint = s.URL
	return p
}

type countedBody struct {
	io.ReadCloser
	p    *byteProxy
	path string
}

func (b *countedBody) Read(buf []byte) (int, error) {
	n, err := b.ReadCloser.Read(buf)
	b.p.mu.Lock()
	b.p.bytes[b.path] += int64(n)
	b.p.mu.Unlock()
	return n, err
}

// take returns the bytes counted since the last take, by object key below prefix (the path
// /bucket/prefix/key).
func (p *byteProxy) take(prefix string) map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[string]int64{}
	for k, n := range p.bytes {
		if rel, ok := strings.CutPrefix(k, prefix+"/"); ok {
			m[rel] += n
		}
	}
	p.bytes = map[string]int64{}
	return m
}

// TestS3RecordPartsOwnShare: the 3 parts of a plan of a WebDataset, TFRecord or Parquet prefix
// (6 files of 4 inputs; Parquet in row groups of 2 rows) GET only the objects that hold their
// inputs (and the first Parquet file's footer), at most their bytes plus one file's (every
// object of the prefix is read by a part without a plan);
// their merge is the local one-machine build. An object replaced since the plan fails a part,
// naming its URL.
func TestS3RecordPartsOwnShare(t *testing.T) {
	srv := s3Setup(t, "raw")
	px := startByteProxy(t, srv)
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	root := t.TempDir()
	_, dirs := recordCorpus(t, root)
	args := []string{"--crop", "16", "--classes", "cat,dog"}
	var table []string
	for _, kind := range []string{"webdataset", "tfrecord", "parquet"} {
		t.Run(kind, func(t *testing.T) {
			putTree(t, srv, "raw", kind, dirs[kind])
			prefix := "/raw/" + kind
			url := "s3:/" + prefix
			dir := filepath.Join(root, "s3-"+kind)
			full := filepath.Join(dir, "local")
			mustRun(t, append([]string{"build", dirs[kind], "-o", full, "--shard-size", "2KiB"}, args...)...)
			plan := filepath.Join(dir, "src.plan")
			mustRun(t, "plan", url, "-o", plan, "--classes", "cat,dog")
			files := planFiles(t, plan)
			var whole, largest int64
			for _, f := range files {
				whole += f.Size
				largest = max(largest, f.Size)
			}
			px.take(prefix)
			var parts []string
			for i := range 3 {
				// Without a plan, for comparison: the part reads every object.
				mustRun(t, append([]string{"build", url, "-o", filepath.Join(dir, fmt.Sprintf("direct%d", i)), "--part", fmt.Sprintf("%d/3", i), "--shard-size", "2KiB"}, args...)...)
				before := sum(px.take(prefix))
				p := filepath.Join(dir, fmt.Sprintf("p%d", i))
				mustRun(t, "build", plan, "-o", p, "--part", fmt.Sprintf("%d/3", i), "--shard-size", "2KiB", "--crop", "16")
				parts = append(parts, p)
				got := px.take(prefix)
				own := ownFiles(files, int64(i)*24/3, int64(i+1)*24/3)
				var ownBytes int64
				for _, f := range files {
					if own[f.Path] {
						ownBytes += f.Size
					}
				}
				for key, n := range got {
					// (The first Parquet file's footer is read for the schema when the source opens.)
					if !own[key] && !(kind == "parquet" && key == files[0].Path && n <= 2<<10) {
						t.Errorf("part %d/3 GET %d bytes of %s, which holds none of its inputs (its files: %v)", i, n, key, keys(own))
					}
				}
				if n := sum(got); n > ownBytes+largest {
					t.Errorf("part %d/3 GET %d bytes; its files hold %d, one file %d at most", i, n, ownBytes, largest)
				}
				table = append(table, fmt.Sprintf("%-10s part %d/3: %6d bytes GET from a plan (its %d files: %d bytes), %6d without a plan; the prefix %d bytes", kind, i, sum(got), len(own), ownBytes, before, whole))
			}
			merged := filepath.Join(dir, "merged")
			mustRun(t, append([]string{"merge", "-o", merged}, parts...)...)
			sameTree(t, full, merged)

			// An object replaced since the plan: refused, naming it.
			last := files[len(files)-1].Path
			if _, err := srv.Client("").PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String("raw"), Key: aws.String(kind + "/" + last),
				Body: bytes.NewReader(readFile(t, filepath.Join(dirs[kind], files[0].Path)))}); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := run(t, "build", plan, "-o", filepath.Join(dir, "q0"), "--part", "0/3", "--crop", "16")
			if code == 0 || !strings.Contains(stderr, url+"/"+last) {
				t.Errorf("a part of a plan whose object %s was replaced: exit %d, want a refusal naming it:\n%s", last, code, stderr)
			}
		})
	}
	for _, l := range table {
		t.Log(l)
	}
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func keys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// TestPlanFileLinesRefused: a plan whose file lines are damaged, cut or edited is refused by a
// part, naming the plan (and the line, where one is at fault), and the part writes nothing. A
// plan of format 2 (the header alone) still builds parts that merge into the one-machine build.
func TestPlanFileLinesRefused(t *testing.T) {
	root := t.TempDir()
	_, dirs := recordCorpus(t, root)
	plan := filepath.Join(root, "tfr.plan")
	mustRun(t, "plan", dirs["tfrecord"], "-o", plan)
	good := string(readFile(t, plan))
	lines := strings.SplitAfter(good, "\n")
	if len(lines) != 8 || !strings.Contains(lines[0], `"files":6`) { // header, 6 files, "" after the last newline
		t.Fatalf("plan of 6 TFRecord files: %d lines:\n%s", len(lines), good)
	}
	join := func(ls ...string) string { return strings.Join(ls, "") }
	for _, c := range []struct{ name, data, want string }{
		{"truncated", join(lines[:6]...), ": truncated: 5 file lines, the header says 6"},
		{"not-json", join(lines[:3]...) + "{\"path\":\n" + join(lines[4:]...), ":4: "},
		{"unknown-field", join(lines[:2]...) + strings.Replace(lines[2], `{"path"`, `{"x":1,"path"`, 1) + join(lines[3:]...), ":3: "},
		{"other-count", join(lines[:2]...) + strings.Replace(lines[2], `"items":4`, `"items":5`, 1) + join(lines[3:]...), ": the file lines do not match the header's files_sha256"},
		{"extra-line", good + lines[6], ":8: more file lines"},
	} {
		bad := filepath.Join(root, c.name+".plan")
		if err := os.WriteFile(bad, []byte(c.data), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(root, "out-"+c.name)
		_, stderr, code := run(t, "build", bad, "-o", out, "--part", "1/3")
		if code == 0 || !strings.Contains(stderr, bad+c.want) || strings.Contains(stderr, "panic") {
			t.Errorf("%s: exit %d, want a refusal with %q:\n%s", c.name, code, bad+c.want, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: the refused part wrote %s", c.name, out)
		}
	}

	// Format 2: no file lines; each part reads the whole source and checks its digests.
	head := regexp.MustCompile(`,"files":6,"files_sha256":"[0-9a-f]{64}"`).ReplaceAllString(lines[0], "")
	old := filepath.Join(root, "format2.plan")
	if err := os.WriteFile(old, []byte(strings.Replace(head, `{"packer_plan":3`, `{"packer_plan":2`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(root, "full")
	mustRun(t, "build", dirs["tfrecord"], "-o", full, "--crop", "16")
	sameTree(t, full, buildPartsFrom(t, old, filepath.Join(root, "format2"), 3, "--crop", "16"))
}
