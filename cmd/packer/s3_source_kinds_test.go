package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source/cifar"
	"github.com/packer-dev/packer/source/idx"
	"github.com/packer-dev/packer/storage/s3/s3test"
)

// s3KindCase is one source kind TestS3SourceKinds builds from a bucket.
type s3KindCase struct {
	name       string
	src, local string   // the s3:// SRC, and the same source's local path
	args       []string // the flags of both builds
	s3Args     []string // the s3:// build's own (--images, --masks as s3:// locations)
	localArgs  []string // the local build's own
	records    int64
	// data says which GETs (by request path) fetch an input's bytes; each part must send
	// perPart of them, at most maxGets (0: 1) for one object.
	data    func(path string) bool
	perPart int
	maxGets int
	// diskMax bounds the bytes on disk below $TMPDIR during a build; 0 is 64 KiB.
	diskMax int64
	plan    bool // also plan the bucket (args[:2], --from KIND) and build the 3 parts from it (args[2:])
}

// writeCOCOFor writes a COCO annotation file at ann naming the images below imgs (as
// writeNoisePNGs writes them: 112x112), one box each.
func writeCOCOFor(t *testing.T, imgs, ann string) {
	t.Helper()
	var images, anns []map[string]any
	for _, cls := range []string{"cat", "dog"} {
		m, _ := filepath.Glob(filepath.Join(imgs, cls, "*.png"))
		for _, p := range m {
			id := len(images) + 1
			images = append(images, map[string]any{"id": id, "file_name": cls + "/" + filepath.Base(p), "width": 112, "height": 112})
			anns = append(anns, map[string]any{"id": 100 + id, "image_id": id, "bbox": []float64{float64(id), 2, 30, 40}, "category_id": 1 + id%2, "iscrowd": 0, "area": 1200})
		}
	}
	b, err := json.Marshal(map[string]any{"images": images, "annotations": anns, "categories": []map[string]any{{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(ann), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ann, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestS3SourceKinds: the kinds beyond TestS3SourceStreamed's (COCO, its images in the
// annotation file's folder or in another prefix given by --images s3://...; pairs, its masks
// given by --masks s3://...; frames) built from a bucket give the bytes of the same builds from local
// files, whole and in 3 parts merged; each part GETs only its own inputs (each once), where a
// copy of the prefix would GET every object in every part; nothing the builds write below an
// empty $TMPDIR holds more than 64 KiB, where the inputs are near 1 MiB. The parts of frames
// merge because every view of one listing gives a video's folder the same time. A plan of
// frames in a bucket is refused.
func TestS3SourceKinds(t *testing.T) {
	srv := s3Setup(t, "raw")
	counter := &getCounter{gets: map[string]int{}}
	px := s3test.StartFaultProxy(t, srv, counter.plan)
	t.Setenv("AWS_ENDPOINT_URL", px.Endpoint)
	root := t.TempDir()
	png := func(p string) bool { return strings.HasSuffix(p, ".png") }

	// COCO: the annotation file beside its images, and one whose images are elsewhere.
	coco := filepath.Join(root, "coco")
	writeNoisePNGs(t, coco, 12)
	writeCOCOFor(t, coco, filepath.Join(coco, "instances.json"))
	putTree(t, srv, "raw", "coco", coco)
	cocoAnn := filepath.Join(root, "cocoann", "instances.json")
	writeCOCOFor(t, coco, cocoAnn)
	putTree(t, srv, "raw", "cocoann", filepath.Dir(cocoAnn))

	// pairs: the same images, and a mask for each.
	pairImgs, masks := filepath.Join(root, "pairs", "img"), filepath.Join(root, "pairs", "masks")
	writeNoisePNGs(t, pairImgs, 12)
	for _, cls := range []string{"cat", "dog"} {
		if err := os.MkdirAll(filepath.Join(masks, cls), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := range 12 {
			writeMask(t, filepath.Join(masks, cls, fmt.Sprintf("%03d.png", i)), 112, 112, i)
		}
	}
	putTree(t, srv, "raw", "pairs", filepath.Join(root, "pairs"))

	// frames: the images again, 4 frames to a video folder, 3 videos to a class.
	frames := filepath.Join(root, "frames")
	writeNoisePNGs(t, frames, 12)
	for _, cls := range []string{"cat", "dog"} {
		for i := range 12 {
			v := filepath.Join(frames, cls, fmt.Sprintf("v%d", i/4))
			if err := os.MkdirAll(v, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(frames, cls, fmt.Sprintf("%03d.png", i)), filepath.Join(v, fmt.Sprintf("f%d.png", i%4))); err != nil {
				t.Fatal(err)
			}
		}
	}
	putTree(t, srv, "raw", "frames", frames)

	// video: 12 videos of 4 frames of noise (lossless, about 200 KB each), 6 to a class.
	videos := filepath.Join(root, "video")
	var videoMax int64
	_, noFFmpeg := exec.LookPath("ffmpeg")
	for i := range 12 {
		if noFFmpeg != nil {
			break
		}
		p := filepath.Join(videos, []string{"cat", "dog"}[i%2], fmt.Sprintf("v%02d.mkv", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		src := fmt.Sprintf("nullsrc=s=224x224:r=10,geq=lum='random(%d)*255':cb=128:cr=128", i+1)
		if out, err := exec.Command("ffmpeg", "-nostdin", "-loglevel", "error", "-y", "-f", "lavfi", "-i", src, "-frames:v", "4", "-c:v", "ffv1", p).CombinedOutput(); err != nil {
			t.Fatalf("ffmpeg: %v\n%s", err, out)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		videoMax = max(videoMax, fi.Size())
	}
	if noFFmpeg == nil {
		putTree(t, srv, "raw", "video", videos)
	}

	// IDX: 300 random 28x28 images with their labels, uncompressed and gzipped.
	idxRaw, idxGz := filepath.Join(root, "idx", "raw"), filepath.Join(root, "idx", "gz")
	rng := rand.New(rand.NewPCG(3, 4))
	pix, labels := make([]byte, 300*28*28), make([]int64, 300)
	for i := range pix {
		pix[i] = byte(rng.Uint32())
	}
	for i := range labels {
		labels[i] = int64(rng.IntN(10))
	}
	lb, err := idx.EncodeLabels(idx.TypeUbyte, labels)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct{ dir, ext string }{{idxRaw, ""}, {idxGz, ".gz"}} {
		if err := os.MkdirAll(d.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := idx.WriteFile(filepath.Join(d.dir, "t10k-images-idx3-ubyte"+d.ext), idx.TypeUbyte, []int{300, 28, 28}, pix); err != nil {
			t.Fatal(err)
		}
		if err := idx.WriteFile(filepath.Join(d.dir, "t10k-labels-idx1-ubyte"+d.ext), idx.TypeUbyte, []int{300}, lb); err != nil {
			t.Fatal(err)
		}
	}
	putTree(t, srv, "raw", "idx", filepath.Join(root, "idx"))

	// CIFAR-10: 5 batch files of 40 records (600 KB), as a folder and as the official archive.
	cifarDir, err := cifar.WriteTestDataset(filepath.Join(root, "cifar", "dir"), cifar.Kind10, 40)
	if err != nil {
		t.Fatal(err)
	}
	cifarTgz := filepath.Join(root, "cifar", "tgz")
	if err := os.MkdirAll(cifarTgz, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := cifar.WriteTestArchive(filepath.Join(cifarTgz, cifar.Archive10), cifar.Kind10, 40); err != nil {
		t.Fatal(err)
	}
	putTree(t, srv, "raw", "cifar", filepath.Join(root, "cifar"))

	tmp := filepath.Join(root, "tmp")
	if err := os.Mkdir(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)

	cases := []s3KindCase{
		{name: "coco", src: "s3://raw/coco/instances.json", local: filepath.Join(coco, "instances.json"),
			args: []string{"--from", "coco", "--resize", "20", "--crop", "16"}, records: 24, data: png, perPart: 8},
		{name: "coco-images", src: "s3://raw/cocoann/instances.json", local: cocoAnn,
			args: []string{"--from", "coco", "--resize", "20", "--crop", "16"}, s3Args: []string{"--images", "s3://raw/coco"},
			localArgs: []string{"--images", coco}, records: 24, data: png, perPart: 8, plan: true},
		{name: "pairs", src: "s3://raw/pairs/img", local: pairImgs,
			args: []string{"--from", "pairs", "--resize", "20", "--crop", "16"}, s3Args: []string{"--masks", "s3://raw/pairs/masks"},
			localArgs: []string{"--masks", masks}, records: 24, data: png, perPart: 16, plan: true},
		// A part reads both files whole, as streams (its listing reads every record): the
		// images file twice (its header at open, then its records), the labels file twice.
		{name: "idx", src: "s3://raw/idx/raw", local: idxRaw, args: []string{"--split", "test", "--resize", "20"},
			records: 300, data: func(p string) bool { return strings.Contains(p, "-idx") }, perPart: 4, maxGets: 2, plan: true},
		{name: "idx-gz", src: "s3://raw/idx/gz", local: idxGz, args: []string{"--split", "test", "--resize", "20"},
			records: 300, data: func(p string) bool { return strings.Contains(p, "-idx") }, perPart: 4, maxGets: 2},
		// A part reads every batch file once, as a stream; the archive twice (listed at open,
		// then read for its records).
		{name: "cifar", src: "s3://raw/cifar/dir/cifar-10-batches-bin", local: cifarDir, args: []string{"--from", "cifar10", "--resize", "20"},
			records: 200, data: func(p string) bool { return strings.HasSuffix(p, ".bin") }, perPart: 5, plan: true},
		{name: "cifar-tgz", src: "s3://raw/cifar/tgz", local: cifarTgz, args: []string{"--from", "cifar10", "--resize", "20"},
			records: 200, data: func(p string) bool { return strings.HasSuffix(p, ".tar.gz") }, perPart: 2, maxGets: 2},
		{name: "frames", src: "s3://raw/frames", local: frames,
			args: []string{"--from", "frames", "--resize", "20", "--crop", "16"}, records: 24, data: png, perPart: 8},
	}
	if noFFmpeg == nil {
		// Two workers, so at most two videos fetched at once: the disk holds two at most, where
		// a copy of the prefix holds twelve.
		cases = append(cases, s3KindCase{name: "video", src: "s3://raw/video", local: videos,
			args: []string{"--from", "video", "--resize", "20", "--crop", "16", "--workers", "2"}, records: 48,
			data: func(p string) bool { return strings.HasSuffix(p, ".mkv") }, perPart: 4, diskMax: 2*videoMax + 64<<10, plan: true})
	} else {
		t.Log("ffmpeg is missing: the video case is left out")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { s3KindBuilds(t, c, root, tmp, counter) })
	}
	if videoPlan := filepath.Join(root, "out", "video", "plan"); exists(videoPlan) {
		// A video replaced since the plan (of the video case): the part that reads it fails
		// naming its URL, and publishes nothing.
		v := filepath.Join(videos, "cat", "v00.mkv")
		if _, err := srv.Client("").PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String("raw"), Key: aws.String("video/cat/v00.mkv"),
			Body: bytes.NewReader(append(readFile(t, v), 0))}); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(root, "out", "video", "replaced")
		_, errs, code := run(t, "build", videoPlan, "-o", out, "--part", "0/3", "--resize", "20", "--crop", "16")
		if code == 0 || !strings.Contains(errs, "s3://raw/video/cat/v00.mkv") || !strings.Contains(errs, "changed") {
			t.Errorf("a part with a video replaced since the plan: exit %d, want a failure naming it:\n%s", code, errs)
		}
		if exists(filepath.Join(out, "manifest.json")) {
			t.Error("the refused part published a dataset")
		}
	}
	// A plan cannot name a frames video (a folder) by an object's URL: refused, saying how.
	_, errs, code := run(t, "plan", "s3://raw/frames", "--from", "frames", "-o", filepath.Join(root, "frames.plan"))
	if code != 2 || !strings.Contains(errs, "build the parts from s3://raw/frames") {
		t.Errorf("plan of an s3:// frames source: exit %d, want 2 and a refusal saying how:\n%s", code, errs)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("$TMPDIR holds %d entries after the builds", len(ents))
	}
}

// s3KindBuilds builds c from its local files, from the bucket whole, and from the bucket in 3
// parts merged, and checks the bytes, each part's GETs and the disk used below tmp.
func s3KindBuilds(t *testing.T, c s3KindCase, root, tmp string, counter *getCounter) {
	dir := filepath.Join(root, "out", c.name)
	limit := c.diskMax
	if limit == 0 {
		limit = 64 << 10
	}
	build := func(args ...string) {
		t.Helper()
		stop := diskWatch(tmp)
		mustRun(t, args...)
		most := stop()
		t.Logf("packer %s: at most %d bytes on disk below $TMPDIR", strings.Join(args, " "), most)
		if most > limit {
			t.Errorf("packer %s: %d bytes on disk below $TMPDIR at most; want at most %d", strings.Join(args, " "), most, limit)
		}
	}
	whole := filepath.Join(dir, "local")
	mustRun(t, append(append([]string{"build", c.local, "-o", whole, "--shard-size", "2KiB"}, c.args...), c.localArgs...)...)
	if m, err := shard.ReadManifest(whole); err != nil || m.Count != c.records || len(m.Skipped) != 0 {
		t.Fatalf("the local build: %v; want %d records, none skipped", err, c.records)
	}
	s3args := append(append([]string{"--shard-size", "2KiB"}, c.args...), c.s3Args...)
	build(append([]string{"build", c.src, "-o", filepath.Join(dir, "s3")}, s3args...)...)
	sameTree(t, whole, filepath.Join(dir, "s3"))
	counter.take()
	var parts []string
	for i := range 3 {
		p := filepath.Join(dir, fmt.Sprintf("p%d", i))
		build(append([]string{"build", c.src, "-o", p, "--part", fmt.Sprintf("%d/3", i)}, s3args...)...)
		parts = append(parts, p)
		n := 0
		for path, k := range counter.take() {
			if !c.data(path) {
				continue
			}
			n += k
			if k > max(c.maxGets, 1) {
				t.Errorf("part %d: %d GETs of %s", i, k, path)
			}
		}
		t.Logf("part %d: %d GETs of its inputs' objects", i, n)
		if n != c.perPart {
			t.Errorf("part %d fetched %d of the inputs' objects, want its own %d", i, n, c.perPart)
		}
	}
	merged := filepath.Join(dir, "merged")
	mustRun(t, append([]string{"merge", "-o", merged}, parts...)...)
	sameTree(t, whole, merged)
	if !c.plan {
		return
	}
	plan := filepath.Join(dir, "plan")
	mustRun(t, append([]string{"plan", c.src, "-o", plan}, append(c.args[:2:2], c.s3Args...)...)...)
	parts = parts[:0]
	for i := range 3 {
		p := filepath.Join(dir, fmt.Sprintf("planned%d", i))
		build(append([]string{"build", plan, "-o", p, "--part", fmt.Sprintf("%d/3", i), "--shard-size", "2KiB"}, c.args[2:]...)...)
		parts = append(parts, p)
	}
	mustRun(t, append([]string{"merge", "-o", filepath.Join(dir, "planned")}, parts...)...)
	sameTree(t, whole, filepath.Join(dir, "planned"))
}
