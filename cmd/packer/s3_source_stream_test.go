package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/packer-dev/packer/internal/testfix"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// writeNoisePNGs writes n PNGs of random pixels (about 48 KiB each, as PNG cannot compress
// noise) into each of two class folders below root.
func writeNoisePNGs(t *testing.T, root string, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	for _, cls := range []string{"cat", "dog"} {
		if err := os.MkdirAll(filepath.Join(root, cls), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			im := image.NewRGBA(image.Rect(0, 0, 112, 112))
			for j := range im.Pix {
				im.Pix[j] = byte(rng.Uint32())
				if j%4 == 3 {
					im.Pix[j] = 255
				}
			}
			var b bytes.Buffer
			if err := png.Encode(&b, im); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, cls, fmt.Sprintf("%03d.png", i)), b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// writeShardTars packs the images of the folder imgs (as writeNoisePNGs writes them) into
// WebDataset shards in dir, per images per shard: members KEY.png and KEY.cls (0 for cat, 1
// for dog).
func writeShardTars(t *testing.T, imgs, dir string, per int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, cls := range []string{"cat", "dog"} {
		m, _ := filepath.Glob(filepath.Join(imgs, cls, "*.png"))
		names = append(names, m...)
	}
	for s := 0; s*per < len(names); s++ {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for i, p := range names[s*per : min(len(names), (s+1)*per)] {
			key := fmt.Sprintf("s%02d-%03d", s, i)
			label := "0"
			if strings.Contains(p, "dog") {
				label = "1"
			}
			for _, m := range [][2]string{{key + ".png", string(readFile(t, p))}, {key + ".cls", label}} {
				tw.WriteHeader(&tar.Header{Name: m[0], Mode: 0o644, Size: int64(len(m[1])), Typeflag: tar.TypeReg})
				tw.Write([]byte(m[1]))
			}
		}
		tw.Close()
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("shard-%03d.tar", s)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeTFRecordFiles writes the images of imgs (as writeNoisePNGs writes them) as TFRecord
// files in dir, per records a file: tf.train.Examples of image/encoded and image/class/label
// (0 for cat, 1 for dog), the label a packed int64 list.
func writeTFRecordFiles(t *testing.T, imgs, dir string, per int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	table := crc32.MakeTable(crc32.Castagnoli)
	mask := func(b []byte) uint32 { c := crc32.Checksum(b, table); return (c>>15 | c<<17) + 0xa282ead8 }
	// field is a length-delimited protobuf field: its tag, its length, its bytes.
	field := func(num protowire.Number, b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), b)
	}
	// feature is an entry of the feature map: the key, and a Feature holding a list (kind 1:
	// bytes_list, 3: int64_list) whose field 1 is value.
	feature := func(key string, kind protowire.Number, value []byte) []byte {
		return field(1, append(field(1, []byte(key)), field(2, field(kind, field(1, value)))...))
	}
	var names []string
	for _, cls := range []string{"cat", "dog"} {
		m, _ := filepath.Glob(filepath.Join(imgs, cls, "*.png"))
		names = append(names, m...)
	}
	for f := 0; f*per < len(names); f++ {
		var out []byte
		for _, p := range names[f*per : min(len(names), (f+1)*per)] {
			label := uint64(0)
			if strings.Contains(p, "dog") {
				label = 1
			}
			ex := field(1, append(feature("image/encoded", 1, readFile(t, p)), feature("image/class/label", 3, protowire.AppendVarint(nil, label))...))
			n := binary.LittleEndian.AppendUint64(nil, uint64(len(ex)))
			out = binary.LittleEndian.AppendUint32(append(out, n...), mask(n))
			out = binary.LittleEndian.AppendUint32(append(out, ex...), mask(ex))
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("train-%05d-of-%05d", f, (len(names)+per-1)/per)), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// diskWatch samples the bytes allocated on disk below root (st_blocks, so a sparse file counts
// for what it holds) until stop, and returns the most it saw.
func diskWatch(root string) (stop func() int64) {
	var most atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			var n int64
			filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					if fi, err := d.Info(); err == nil {
						if st, ok := fi.Sys().(*syscall.Stat_t); ok {
							n += st.Blocks * 512
						}
					}
				}
				return nil
			})
			if n > most.Load() {
				most.Store(n)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() int64 { close(done); wg.Wait(); return most.Load() }
}

// getCounter is a fault plan that injects nothing and counts the object GETs by path.
type getCounter struct {
	mu   sync.Mutex
	gets map[string]int
}

func (g *getCounter) plan(r *http.Request, _, _ int) s3test.Fault {
	if q := r.URL.Query(); r.Method == http.MethodGet && (len(q) == 0 || q.Get("x-id") == "GetObject") {
		g.mu.Lock()
		g.gets[r.URL.Path]++
		g.mu.Unlock()
	}
	return s3test.None
}

func (g *getCounter) take() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.gets
	g.gets = map[string]int{}
	return m
}

// TestS3SourceStreamed: a build from a bucket reads the objects where they are, never a copy
// of the prefix: an image folder, an image list, WebDataset shards, TFRecord and Parquet files built from s3:// (whole,
// and in 3 parts merged; from a plan of the bucket too) give the bytes of the same builds from
// the local files; a part of an image folder GETs only its own images; nothing the build
// writes to $TMPDIR holds more than a few KiB, where the images are near 1 MiB (and a copy made
// with --source-cache there is seen whole, so the watch can fail); through a proxy that cuts
// bodies and answers 500 and 503, the bytes are the same; an object replaced after the plan is
// refused by the part that reads it, naming it, while the other parts still build; one deleted
// since is a skipped input.
func TestS3SourceStreamed(t *testing.T) {
	srv := s3Setup(t, "raw")
	counter := &getCounter{gets: map[string]int{}}
	px := s3test.StartFaultProxy(t, srv, counter.plan)
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	root := t.TempDir()
	imgs, wds := filepath.Join(root, "imgs"), filepath.Join(root, "wds")
	writeNoisePNGs(t, imgs, 12)
	// The images as Parquet files too, written by pyarrow (scripts/make_record_sources.py).
	rec := filepath.Join(root, "rec")
	withParquet := os.Getenv("PACKER_NO_FIXTURE_PYTHON") != "1"
	if withParquet {
		script, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "make_record_sources.py"))
		if out, err := exec.Command(testfix.FixturePython(), script, imgs, rec).CombinedOutput(); err != nil {
			t.Fatalf("make_record_sources.py (run scripts/setup.sh, or PACKER_NO_FIXTURE_PYTHON=1 to leave Parquet out): %v\n%s", err, out)
		}
		putTree(t, srv, "raw", "pq", filepath.Join(rec, "parquet"))
	}
	if err := os.WriteFile(filepath.Join(imgs, "train.csv"), []byte("path,label\ncat/001.png,3\ndog/004.png,1\ncat/000.png,0\ndog/011.png,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeShardTars(t, imgs, wds, 5)
	tfr := filepath.Join(root, "tfr")
	writeTFRecordFiles(t, imgs, tfr, 7)
	putTree(t, srv, "raw", "photos", imgs)
	putTree(t, srv, "raw", "wds", wds)
	putTree(t, srv, "raw", "tfr", tfr)
	tmp := filepath.Join(root, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	counter.take()

	build := func(args ...string) {
		t.Helper()
		stop := diskWatch(tmp)
		mustRun(t, args...)
		most := stop()
		t.Logf("packer %s: at most %d bytes on disk below $TMPDIR", strings.Join(args, " "), most)
		if most > 64<<10 {
			t.Errorf("packer %s: %d bytes on disk below $TMPDIR at most; want under 64 KiB", strings.Join(args, " "), most)
		}
	}
	for _, c := range []struct {
		name, src, local string
		args             []string
		records          int64
	}{
		{"folder", "s3://raw/photos", imgs, []string{"--resize", "20", "--crop", "16"}, 24},
		{"list", "s3://raw/photos/train.csv", filepath.Join(imgs, "train.csv"), []string{"--crop", "16"}, 4},
		{"webdataset", "s3://raw/wds", wds, []string{"--crop", "16", "--classes", "cat,dog"}, 24},
		{"tfrecord", "s3://raw/tfr", tfr, []string{"--crop", "16", "--classes", "cat,dog"}, 24},
		{"parquet", "s3://raw/pq", filepath.Join(rec, "parquet"), []string{"--crop", "16", "--classes", "cat,dog"}, 24},
	} {
		if c.name == "parquet" && !withParquet {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(root, c.name)
			whole := filepath.Join(dir, "local")
			mustRun(t, append([]string{"build", c.local, "-o", whole, "--shard-size", "2KiB"}, c.args...)...)
			if m, err := shard.ReadManifest(whole); err != nil || m.Count != c.records || len(m.Skipped) != 0 {
				t.Fatalf("the local build: %v; want %d records, none skipped", err, c.records)
			}
			build(append([]string{"build", c.src, "-o", filepath.Join(dir, "s3"), "--shard-size", "2KiB"}, c.args...)...)
			sameTree(t, whole, filepath.Join(dir, "s3"))
			counter.take()
			var parts []string
			for i := range 3 {
				p := filepath.Join(dir, fmt.Sprintf("p%d", i))
				build(append([]string{"build", c.src, "-o", p, "--part", fmt.Sprintf("%d/3", i), "--shard-size", "2KiB"}, c.args...)...)
				parts = append(parts, p)
				gets := counter.take()
				if c.name == "folder" {
					// 24 images, 8 a part: only the part's own are fetched, once each (and the
					// list train.csv, which the view holds whole as lists are read at open).
					n := 0
					for path, k := range gets {
						if strings.HasSuffix(path, ".csv") {
							continue
						}
						n += k
						if k != 1 || !strings.HasSuffix(path, ".png") {
							t.Errorf("part %d: %d GETs of %s", i, k, path)
						}
					}
					if n != 8 {
						t.Errorf("part %d fetched %d images, want its 8: %v", i, n, gets)
					}
				}
			}
			merged := filepath.Join(dir, "merged")
			mustRun(t, append([]string{"merge", "-o", merged}, parts...)...)
			sameTree(t, whole, merged)
		})
	}

	// The watch sees a copy: a build with --source-cache in $TMPDIR holds the prefix whole.
	stop := diskWatch(tmp)
	mustRun(t, "build", "s3://raw/photos", "--from", "folder", "--source-cache", filepath.Join(tmp, "cache"), "-o", filepath.Join(root, "cached"))
	if most := stop(); most < 512<<10 {
		t.Errorf("a copy of the prefix in $TMPDIR was seen at %d bytes at most; the watch misses files", most)
	}
	os.RemoveAll(filepath.Join(tmp, "cache"))

	// Through bodies cut short and bursts of 500 and 503: the same bytes.
	// (Copies of the objects, whose requests the proxy has not seen yet.)
	putTree(t, srv, "raw", "f/photos", imgs)
	putTree(t, srv, "raw", "f/wds", wds)
	faulty := [][2]string{{"s3://raw/f/photos", "folder"}, {"s3://raw/f/wds", "webdataset"}}
	if withParquet {
		putTree(t, srv, "raw", "f/pq", filepath.Join(rec, "parquet"))
		faulty = append(faulty, [2]string{"s3://raw/f/pq", "parquet"})
	}
	px.SetPlan(s3test.Bursts)
	for _, c := range faulty {
		out := filepath.Join(root, c[1], "faults")
		args := []string{"--crop", "16", "--classes", "cat,dog"}
		if c[1] == "folder" {
			args = []string{"--resize", "20", "--crop", "16"}
		}
		mustRun(t, append([]string{"build", c[0], "-o", out, "--shard-size", "2KiB"}, args...)...)
		sameTree(t, filepath.Join(root, c[1], "local"), out)
	}
	t.Logf("faults injected: %s", px.Summary())
	px.SetPlan(counter.plan)

	// A plan of the bucket: its parts read the planned objects (by URL and ETag) and merge
	// into the local build; an object replaced since is refused by the part that reads it.
	plan := filepath.Join(root, "photos.plan")
	out := mustRun(t, "plan", "s3://raw/photos", "-o", plan)
	if !strings.Contains(out, "planned 24 inputs of s3://raw/photos (folder)") {
		t.Errorf("plan: %q", out)
	}
	if data := string(readFile(t, plan)); !strings.Contains(data, `"path":"s3://raw/photos/cat/001.png"`) || !strings.Contains(data, `"etag":`) {
		t.Errorf("the plan does not name the objects by URL with their ETags:\n%.600s", data)
	}
	var parts []string
	for i := range 3 {
		p := filepath.Join(root, "planned", fmt.Sprintf("p%d", i))
		build("build", plan, "-o", p, "--part", fmt.Sprintf("%d/3", i), "--shard-size", "2KiB", "--resize", "20", "--crop", "16")
		parts = append(parts, p)
	}
	mustRun(t, append([]string{"merge", "-o", filepath.Join(root, "planned", "merged")}, parts...)...)
	sameTree(t, filepath.Join(root, "folder", "local"), filepath.Join(root, "planned", "merged"))

	if _, err := srv.Client("").PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String("raw"), Key: aws.String("photos/cat/001.png"),
		Body: bytes.NewReader(readFile(t, filepath.Join(imgs, "cat", "002.png")))}); err != nil {
		t.Fatal(err)
	}
	_, errs, code := run(t, "build", plan, "-o", filepath.Join(root, "planned", "q0"), "--part", "0/3", "--shard-size", "2KiB", "--resize", "20", "--crop", "16")
	t.Logf("a part with an object replaced since the plan: %s", errs)
	if code == 0 || !strings.Contains(errs, "s3://raw/photos/cat/001.png") || !strings.Contains(errs, "changed") {
		t.Errorf("a part with an object replaced since the plan: exit %d, want a failure naming it:\n%s", code, errs)
	}
	if exists(filepath.Join(root, "planned", "q0", "manifest.json")) {
		t.Error("the refused part published a dataset")
	}
	mustRun(t, "build", plan, "-o", filepath.Join(root, "planned", "q2"), "--part", "2/3", "--shard-size", "2KiB", "--resize", "20", "--crop", "16")
	sameTree(t, parts[2], filepath.Join(root, "planned", "q2"))
	// An object deleted since the plan is a missing input, skipped as a file gone from a folder.
	if _, err := srv.Client("").DeleteObject(context.Background(), &awss3.DeleteObjectInput{Bucket: aws.String("raw"), Key: aws.String("photos/dog/000.png")}); err != nil {
		t.Fatal(err)
	}
	q1 := filepath.Join(root, "planned", "q1")
	mustRun(t, "build", plan, "-o", q1, "--part", "1/3", "--shard-size", "2KiB", "--resize", "20", "--crop", "16")
	if m, err := shard.ReadManifest(q1); err != nil || m.Count != 7 || len(m.Skipped) != 1 || m.Skipped[0].Input != "dog/000.png" {
		t.Errorf("a part with an object deleted since the plan: %v, %+v; want 7 records and dog/000.png skipped", err, m)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("$TMPDIR holds %d entries after the builds", len(ents))
	}
}
