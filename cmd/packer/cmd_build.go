package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/packer-dev/packer/internal/fileutil"
	"github.com/packer-dev/packer/internal/humanize"
	"github.com/packer-dev/packer/internal/progress"
	"github.com/packer-dev/packer/output"
	"github.com/packer-dev/packer/pipeline"
	"github.com/packer-dev/packer/shard"
	"github.com/packer-dev/packer/source"
	"github.com/packer-dev/packer/source/coco"
	"github.com/packer-dev/packer/source/pairs"
	"github.com/packer-dev/packer/storage/s3"
	"github.com/packer-dev/packer/transforms"
)

type buildOptions struct {
	IO *iostreams

	Source      string
	SourceCache string            // --source-cache: the kept local copy of an s3:// SRC
	srcPath     string            // the local path the source is read from (a copy or view of an s3:// SRC), if not Source
	files       source.Files      // serves the bytes of the view of an s3:// SRC (streamSource), or nil
	sides       map[string]string // the views of s3:// --images and --masks folders, by location (viewSides)
	Out         string
	From        string
	Format      string
	Split       string
	Resize      int
	Size        string
	MaxSize     int
	Crop        string
	Filter      string
	Layout      string
	DType       string
	Mean        string
	Std         string
	Fast        bool
	ExifOrien   bool
	Workers     int
	Device      string
	OnError     string
	MaxErrors   int
	ShardSize   string
	CheckBlock  string
	CutArg      string // --cut-inputs: K, auto, or empty/0 for none
	CutInputs   int64  // --cut-inputs K, resolved (auto: cutAuto, then resolveCut): a shard also ends at every K-th input (0: none)
	cutAuto     bool   // --cut-inputs auto: K from the record size and --shard-size (resolveCut)
	Force       bool

	// video
	FPS        float64
	ClipLen    int
	ClipStride int
	ShortClip  string
	Timeout    time.Duration

	Classes   string
	MaxPixels int64

	ImageKey string // --image-key (tfrecord)
	LabelKey string // --label-key (tfrecord)

	Fields string // --fields: further members, columns or keys to carry (comma separated)
	Images string // --images (coco)
	Masks  string // --masks (pairs)

	JSON    bool // --json: the final summary as JSON
	Verbose bool // -v: details in the summary (why --device auto chose the CPU)

	Part   string // --part I/N or auto
	Parts  int    // --parts N, with --part auto (or PACKER_PARTS): the part count
	Resume bool   // --resume: go on from an interrupted build's last checkpoint
	// InPlace: --in-place, the part's shards written under their final names below the
	// dataset's s3:// prefix OUT, for merge --in-place (inplace.go)
	InPlace bool

	CheckpointEvery time.Duration // --checkpoint-every

	Shuffle bool   // --shuffle: write the records in a seeded permutation of the inputs
	Seed    uint64 // --seed, with --shuffle

	transform transforms.Compiled // set by validate: the one parse and check of the transform flags
	output    output.Entry        // the --format entry of the outputs table, set by validate
	shardSize int64
	classes   []string
	part      *pipeline.Part       // set by validate from --part
	flags     *pflag.FlagSet       // the command's flags, for a plan (usePlan)
	plan      *pipeline.PlanHeader // SOURCE is this plan file's (usePlan)

	checkBlock int64 // --checksum-block in bytes; 0: the format's default

	store      output.FileStore     // an object-store OUT's uploads as the shards are finished (runStreamBuild)
	uploadBusy func() time.Duration // the time those uploads ran, for the summary's upload time
	// saveCheckpoint keeps each checkpoint of a build to an object-store OUT in the bucket too
	// (s3.StreamStage.SaveCheckpoint).
	saveCheckpoint func(journal []byte) error
}

func newBuildCommand(io *iostreams, runF func(context.Context, *buildOptions) error) *cobra.Command {
	opts := &buildOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "build SOURCE -o OUT [flags]",
		Short: "Pack a dataset into shards, NumPy or HDF5 files",
		Long: `Build reads the dataset at SOURCE, decodes and transforms every sample in parallel, and
writes the records in source order to OUT, with OUT/manifest.json written last.

Sources (--from; detected from SOURCE when omitted):
  cifar10, cifar100  the official binary layout: the extracted folder or the .tar.gz
  idx                MNIST-family IDX files (gzip or raw): a folder holding
                     {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
  folder             class subfolders of images (torchvision ImageFolder layout)
  list               a CSV (path,label) or JSONL ({"path":..,"label":..}) file
  frames             SRC/class/video_id/frame images
  video              SRC/class/*.{mp4,mkv,avi,webm,mov}, decoded by ffmpeg
  webdataset         WebDataset tar shards (KEY.jpg + KEY.cls members): a folder of
                     .tar/.tar.gz/.tgz files or one
  tfrecord           TFRecord files of tf.train.Example (image/encoded, image/class/label):
                     a folder of *.tfrecord* or *-of-* files, or one
  parquet            Parquet files (Hugging Face layout: image {bytes, path} or binary,
                     label int or string): a folder of *.parquet files, or one
  coco               (--from coco) a COCO detection annotation file; each image a record
                     with fields boxes, category, iscrowd, area (--images DIR: where the
                     images are, default the file's folder)
  pairs              (--from pairs) an images folder and --masks DIR matched by file stem
                     (VOC, ADE20K, Cityscapes); each image a record with field mask
Detection refuses a folder it could misread (the parent of train/ and val/, train2017/ and
val2017/, train_set/ and test_set/, ...; one folder wrapping the class folders, images beside
class folders, a single class folder, images mixed with videos) with exit status 2, saying
what it saw and which folder or --from to give.

SOURCE may also be a plan file written by packer plan: the build then reads the source the
plan records, with the plan's source options and listing (see packer plan --help).

The build writes into OUT` + pipeline.StagingSuffix + ` and renames it to OUT when complete, so an
interrupted build never leaves an OUT that looks complete. An existing, non-empty OUT is
refused unless --force is given; then it is replaced atomically when the new build completes.

OUT must not overlap the source: a build refuses, with exit status 2 and before it creates
or removes anything, an OUT that is the source, contains it or lies inside it (compared by
device and inode, so links are seen through), whatever --force says; the same holds for
the names kept beside OUT (OUT` + pipeline.StagingSuffix + `, OUT` + pipeline.OldSuffix + `, OUT` + pipeline.LockSuffix + `,
OUT` + pipeline.TrashSuffix + `) and for every input as it is enumerated (a listed file, or a
link in the source that points into OUT).
An OUT that is a mount point is refused too (exit 2): give -o a subdirectory of it.
A build holds an exclusive lock on OUT` + pipeline.LockSuffix + ` (the file is left in place); a second
build into the same OUT fails at once (exit 1), naming the pid of the build that holds it.

Bad inputs (corrupt, truncated, unsupported files) are skipped and listed with their
reason in the manifest's "skipped" (--on-error skip, the default), or stop the build
with an error naming the file (--on-error fail).

Record shape: --crop or --size gives every record one shape. Without them (a shorter-side
--resize N, or no resize) each image keeps its own height and width: --format shards stores
it at its own shape (shape [-1, -1, 3]); npy and hdf5 hold one rectangular array and refuse
such a build before decoding anything (exit 2). A shape is never a reason to skip an image.

Order: records are written in source order (a folder build is in class order), unless
--shuffle --seed S is given: then record i is the input the source lists at position
P(i), where P is the keyed permutation of shard/ORDER.md version 2 (step 1) for N inputs,
seed S and epoch 2^64-1 (docs/decisions.md). The same seed gives the same bytes with any
--workers, built in parts and merged, resumed, or written to s3://. The manifest's source
records it as "shuffle": {"seed": S}. The inputs are listed whole before the first is
written (their names and labels, and CIFAR's and IDX's record bytes, in memory). A video
or frames source permutes whole videos: the clips of one video stay together. webdataset,
tfrecord and parquet sources read each input's bytes from a stream as they list it, so
--shuffle refuses them (exit 2).
` + exitStatusHelp,
		Example: `  packer build /usr/share/datasets/fashion-mnist -o fmnist
  packer build cifar-10-binary.tar.gz --split test -o cifar-test --format npy
  packer build ~/imagenet/train -o in224 --resize 256 --crop 224
  packer build ~/imagenet/val -o in224f --resize 256 --crop 224 --dtype float16 \
      --mean 0.485,0.456,0.406 --std 0.229,0.224,0.225 --layout chw`,
		Args: argsUsage(cobra.ExactArgs(1)),
		PreRunE: func(c *cobra.Command, args []string) error {
			if err := opts.validate(); err != nil {
				return usagef(err)
			}
			return opts.usePlan(c.Flags(), args[0])
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Source = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runBuild(c.Context(), opts)
		},
	}
	opts.addFlags(cmd.Flags())
	var formats, kinds []string
	for _, e := range outputs {
		formats = append(formats, e.Name)
	}
	for _, e := range sources {
		kinds = append(kinds, e.Kind)
	}
	for flag, values := range map[string][]string{
		"format": formats, "from": kinds, "device": {"auto", "cpu", "gpu"},
		"dtype": {"uint8", "float16", "float32"}, "layout": {"hwc", "chw"},
		"filter":   {"nearest", "box", "bilinear", "hamming", "bicubic", "lanczos"},
		"on-error": {pipeline.OnErrorSkip, pipeline.OnErrorFail}, "short": {"skip", "pad"},
		"split": {"train", "test"},
	} {
		_ = cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
	}
	return cmd
}

func (o *buildOptions) addFlags(f *pflag.FlagSet) {
	f.StringVarP(&o.Out, "out", "o", "", "output directory, or s3://bucket/prefix (shards uploaded as they are finished, the manifest last; see docs/storage.md) (required)")
	f.StringVar(&o.SourceCache, "source-cache", "", "for an s3://bucket/prefix SRC: copy its objects to this local folder and keep them, so that later builds fetch only what changed (default: an image folder or list, WebDataset, TFRecord or Parquet SRC is read from the bucket without a copy, fetching only the inputs built; other kinds are copied to a temporary folder under $TMPDIR, removed after the build)")
	f.StringVar(&o.From, "from", "", "source kind: folder|list|cifar10|cifar100|idx|frames|video|webdataset|tfrecord|parquet|coco|pairs (default: detect)")
	f.StringVar(&o.Format, "format", outputs[0].Name, formatHelp())
	f.StringVar(&o.Split, "split", "train", "split for sources that have them (cifar, idx): train|test")
	f.IntVar(&o.Resize, "resize", 0, "resize the shorter side to N (torchvision Resize(N))")
	f.StringVar(&o.Size, "size", "", "resize to exactly WxH")
	f.IntVar(&o.MaxSize, "max-size", 0, "with --resize, cap the longer side (torchvision max_size)")
	f.StringVar(&o.Crop, "crop", "", "centre crop N or WxH (torchvision CenterCrop, zero padding when smaller)")
	f.StringVar(&o.Filter, "filter", "bilinear", "resampling filter: nearest|box|bilinear|hamming|bicubic|lanczos (Pillow)")
	f.StringVar(&o.Layout, "layout", "hwc", "sample layout: hwc|chw")
	f.StringVar(&o.DType, "dtype", "uint8", "sample type: uint8|float16|float32")
	f.StringVar(&o.Mean, "mean", "", "per-channel mean r,g,b on the 0..1 scale (float dtypes)")
	f.StringVar(&o.Std, "std", "", "per-channel std r,g,b (float dtypes)")
	f.BoolVar(&o.Fast, "fast", false, "decode JPEGs at a reduced DCT scale when the target is much smaller (not byte-identical to Pillow)")
	f.BoolVar(&o.ExifOrien, "exif-orient", false, "apply EXIF orientation (Pillow and torchvision ignore it)")
	f.IntVar(&o.Workers, "workers", runtime.GOMAXPROCS(0), "decode/transform workers")
	f.StringVar(&o.Device, "device", "auto", "where to resize: auto|cpu|gpu")
	f.StringVar(&o.OnError, "on-error", "skip", "bad input policy: skip (list in manifest) | fail")
	f.IntVar(&o.MaxErrors, "max-errors", 0, "abort when more than this many inputs are skipped (0: no limit)")
	f.StringVar(&o.ShardSize, "shard-size", "256MiB", "byte budget of one shard (e.g. 64MiB, 1GiB)")
	f.StringVar(&o.CheckBlock, "checksum-block", defaultChecksumBlock, "shards: byte size aimed for per CRC-32C checksum block (e.g. 4KiB for shuffled reads from a cold disk or a bucket with the check on)")
	f.StringVar(&o.CutArg, "cut-inputs", "0", "shards: end a shard at every K-th input of the source order too, and split --part at multiples of K, so that merge moves the parts' shards into place instead of writing them anew (0: shards end at --shard-size only; auto: K = shard size / record size, for records of one fixed size; docs/cluster.md)")
	f.Int64Var(&o.MaxPixels, "max-pixels", 0, "reject images with more pixels than this before decoding (0: where Pillow raises DecompressionBombError, 178956970; -1: no limit)")
	f.StringVar(&o.Classes, "classes", "", "class names, comma separated, or @FILE with one per line, for sources that lack them (idx, lists labelled by integers, webdataset, tfrecord, parquet)")
	f.BoolVar(&o.Force, "force", false, "replace an existing non-empty OUT (atomically, when the build completes)")
	f.Float64Var(&o.FPS, "fps", 0, "video: resample the timeline to F frames per second (0: every frame)")
	f.IntVar(&o.ClipLen, "clip-len", 0, "video/frames: frames per clip record (0: one record per frame)")
	f.IntVar(&o.ClipStride, "clip-stride", 0, "video/frames: frames between clip starts (default: clip length)")
	f.StringVar(&o.ShortClip, "short", "skip", "video/frames shorter than one clip: skip|pad")
	f.DurationVar(&o.Timeout, "decode-timeout", 5*time.Minute, "video: skip a file when its decoder makes no progress for this long")
	f.StringVar(&o.ImageKey, "image-key", "", "tfrecord: the bytes feature holding the image (default image/encoded); webdataset: image member extensions, by preference (default jpg,jpeg,png,...)")
	f.StringVar(&o.LabelKey, "label-key", "", "tfrecord: the int64 feature holding the label (default image/class/label); webdataset: a field of the .json member (default: the .cls member)")
	f.StringVar(&o.ImageKey, "image-column", "", "parquet: the image column, binary or {bytes, path} (default image, else img)")
	f.StringVar(&o.Fields, "fields", "", "further members (webdataset: extensions), columns (parquet) or keys (jsonl/csv lists) to carry with each sample, comma separated")
	f.StringVar(&o.Images, "images", "", "coco: the folder the annotation file's image file names are relative to (default: the file's folder)")
	f.StringVar(&o.Masks, "masks", "", "pairs: the folder of the masks, matched to the images by file stem")
	f.StringVar(&o.LabelKey, "label-column", "", "parquet: the label column, integer or string (default label)")
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "say more in the summary (why --device auto chose the CPU)")
	f.BoolVar(&o.JSON, "json", false, "print the final summary as JSON on stdout (progress still goes to stderr)")
	f.StringVar(&o.Part, "part", "", "build only part I of N (I/N, from 0; or auto in a Slurm array or Kubernetes Indexed Job), for packer merge")
	f.BoolVar(&o.InPlace, "in-place", false, "with --part and --cut-inputs, an s3:// OUT naming the dataset's prefix: write the part's shards there under their final names (one shard per chunk), its part record under OUT/.packer-parts/, for packer merge --in-place, which writes only the manifest (docs/cluster.md)")
	f.IntVar(&o.Parts, "parts", 0, "with --part auto: the number of parts (or PACKER_PARTS; one of them is required: the array task id is only the index)")
	f.DurationVar(&o.CheckpointEvery, "checkpoint-every", 10*time.Second, "the least time between two checkpoints of the build (taken when a shard is complete; 0: at every shard): at most about this much work is redone by --resume after an interruption")
	f.BoolVar(&o.Shuffle, "shuffle", false, "write the records in a seeded permutation of the inputs instead of source order (recorded in the manifest's source as \"shuffle\": {\"seed\": S}; not for webdataset, tfrecord or parquet sources)")
	f.Uint64Var(&o.Seed, "seed", 0, "with --shuffle: the permutation's seed (0 to 2^64-1); the same seed gives the same order, with any --workers, in parts or resumed")
	f.BoolVar(&o.Resume, "resume", false, "go on from the last checkpoint of an interrupted build of the same OUT (same source folder and options; the checkpoint and every shard it kept are checked, SHA-256 included, and a resume is refused when one fails), or start from the beginning when there is none")
}

// validate checks the flags and sets what the build takes from them (the output entry, the
// part, the transform, the shard size, the class names), one concern at a time; the first
// error found is returned.
func (o *buildOptions) validate() error {
	for _, check := range []func() error{
		o.validateOutput,    // -o, --format
		o.validatePart,      // --part, --parts, --resume, --shuffle, --seed
		o.validateRun,       // --split, --device, --workers, the counts
		o.validateTransform, // --resize, --size, --max-size, --crop, --filter, --layout, --dtype, --mean, --std, --fast
		o.validateShardSize, // --shard-size, --checksum-block
		o.validateInputs,    // --classes, --on-error, --short
		o.validateInPlace,   // --in-place
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// validateOutput checks that there is an OUT and sets the --format entry of the outputs table.
func (o *buildOptions) validateOutput() error {
	if o.Out == "" {
		return errors.New("--out (-o) is required")
	}
	out, err := outputFor(o.Format)
	if err != nil {
		return err
	}
	o.output = out
	return nil
}

// validatePart sets the part of a build in parts (--part, --parts) and checks what goes with
// it: a resume needs checkpoints (a part, or a format that writes them), a seed needs
// --shuffle, and --shuffle a source that can list its inputs before writing them.
func (o *buildOptions) validatePart() error {
	if o.Part != "" {
		i, n, err := parsePart(o.Part, o.Parts, os.Getenv)
		if err != nil {
			return err
		}
		o.part = &pipeline.Part{Index: i, Count: n, Final: o.output}
	} else if o.Parts != 0 {
		return errors.New("--parts is for --part auto")
	}
	if o.Resume && o.part == nil && o.output.Resume == nil {
		return fmt.Errorf("--resume: --format %s writes no checkpoints, so an interrupted build of it starts over; use --format %s, or build in parts (--part, then packer merge), which resume whatever the final format",
			o.Format, shard.FormatShards)
	}
	if o.Seed != 0 && !o.Shuffle {
		return errors.New("--seed is for --shuffle")
	}
	if o.Shuffle && o.From != "" {
		if e, ok := sourceEntry(o.From); ok {
			if err := shuffleRefused(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// validateRun checks the choices of how the build runs and that no count is negative.
func (o *buildOptions) validateRun() error {
	if err := oneOf("split", o.Split, "train", "test"); err != nil {
		return err
	}
	if err := oneOf("device", o.Device, "auto", "cpu", "gpu"); err != nil {
		return err
	}
	if o.Workers < 1 {
		return fmt.Errorf("--workers must be at least 1, got %d", o.Workers)
	}
	if o.Resize < 0 || o.MaxSize < 0 || o.MaxErrors < 0 || o.ClipLen < 0 || o.ClipStride < 0 {
		return errors.New("--resize, --max-size, --max-errors, --clip-len and --clip-stride must not be negative")
	}
	return nil
}

// validateTransform parses the transform flags and sets the transform, checked by the engine's
// own check here too, so that a bad flag is reported before the source is listed.
func (o *buildOptions) validateTransform() error {
	if o.Resize > 0 && o.Size != "" {
		return errors.New("give --resize or --size, not both")
	}
	var err error
	o.transform, err = o.compileTransform()
	return err
}

// defaultChecksumBlock is --checksum-block's default, the format's shard.BlockTarget.
const defaultChecksumBlock = "1MiB"

// validateShardSize sets the shard byte budget and the checksum block target.
func (o *buildOptions) validateShardSize() error {
	var err error
	if o.shardSize, err = parseBytes(o.ShardSize); err != nil {
		return fmt.Errorf("--shard-size: %w", err)
	}
	// --checksum-block means something to shards only: a value other than the default is
	// refused for the other formats, as is one that is not a size.
	if o.CheckBlock != defaultChecksumBlock && o.Format != shard.FormatShards {
		return fmt.Errorf("--checksum-block: only --format shards has checksum blocks, not --format %s", o.Format)
	}
	n, err := parseBytes(o.CheckBlock)
	if err != nil {
		return fmt.Errorf("--checksum-block: %w", err)
	}
	if n != shard.BlockTarget {
		o.checkBlock = n
	}
	o.CutInputs, o.cutAuto = 0, o.CutArg == "auto"
	if !o.cutAuto {
		if o.CutInputs, err = strconv.ParseInt(o.CutArg, 10, 64); err != nil {
			return fmt.Errorf("--cut-inputs %q: want a positive input count, auto, or 0 for none", o.CutArg)
		}
	}
	switch {
	case o.CutInputs < 0:
		return fmt.Errorf("--cut-inputs %d: want a positive input count, auto, or 0 for none", o.CutInputs)
	case (o.CutInputs > 0 || o.cutAuto) && o.Format != shard.FormatShards:
		return fmt.Errorf("--cut-inputs: only --format shards is cut into shards, not --format %s (its merge writes one file anyway)", o.Format)
	}
	return nil
}

// validateInputs sets the class names (--classes) and checks what becomes of a bad input
// (--on-error) and of a video shorter than a clip (--short).
func (o *buildOptions) validateInputs() error {
	if o.Classes != "" {
		names, err := parseClasses(o.Classes)
		if err != nil {
			return fmt.Errorf("--classes: %w", err)
		}
		o.classes = append(o.classes, names...)
	}
	if err := oneOf("on-error", o.OnError, pipeline.OnErrorSkip, pipeline.OnErrorFail); err != nil {
		return err
	}
	if err := o.validateKindFlags(); err != nil {
		return err
	}
	return oneOf("short", o.ShortClip, "skip", "pad")
}

// validateKindFlags refuses, where --from names the kind, the flags of another source kind:
// --images is coco's and --masks pairs'; and for coco and pairs, whose fields are fixed and
// whose boxes and masks are in the stored pixels' coordinates, --fields and --exif-orient (an
// EXIF rotation would turn the image away from them).
func (o *buildOptions) validateKindFlags() error {
	switch {
	case o.From == "":
		return nil
	case o.Images != "" && o.From != coco.Kind:
		return fmt.Errorf("--images is for --from %s", coco.Kind)
	case o.Masks != "" && o.From != pairs.Kind:
		return fmt.Errorf("--masks is for --from %s", pairs.Kind)
	case o.From != coco.Kind && o.From != pairs.Kind:
		return nil
	case o.Fields != "":
		return fmt.Errorf("--fields does not apply to --from %s: its records' fields are always the same (docs/fields.md)", o.From)
	case o.ExifOrien:
		return fmt.Errorf("--exif-orient does not apply to --from %s: its annotations are in the stored pixels' coordinates, which an EXIF rotation would turn the image away from", o.From)
	}
	return nil
}

// parseClasses parses --classes: names separated by commas, or @FILE, a file with one name per
// line (label i on line i+1, blank lines ignored). The names must be distinct and not empty;
// spaces around them are dropped.
func parseClasses(s string) ([]string, error) {
	names, what := strings.Split(s, ","), fmt.Sprintf("%q", s)
	if file, ok := strings.CutPrefix(s, "@"); ok {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		names, what = nil, file
		for _, line := range strings.Split(string(data), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				names = append(names, line)
			}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%s names no class", file)
		}
	}
	seen := map[string]bool{}
	classes := make([]string, 0, len(names))
	for _, c := range names {
		c = strings.TrimSpace(c)
		if c == "" || seen[c] {
			return nil, fmt.Errorf("class names must be distinct and not empty, got %s (%q)", what, c)
		}
		seen[c] = true
		classes = append(classes, c)
	}
	return classes, nil
}

// oneOf returns nil when the value of --flag is one of want, and otherwise the error that names
// the choices.
func oneOf(flag, value string, want ...string) error {
	if slices.Contains(want, value) {
		return nil
	}
	choices := want[len(want)-1]
	if len(want) > 1 {
		choices = strings.Join(want[:len(want)-1], ", ") + " or " + choices
	}
	return fmt.Errorf("unknown --%s %q (want %s)", flag, value, choices)
}

// compileTransform parses the transform flags (the names by the typed values' UnmarshalText)
// and compiles the spec: the one parse and check of a build's transform, made before the
// source is listed so that a bad flag is reported first; the engine and the GPU path take the
// compiled transform as it is.
func (o *buildOptions) compileTransform() (transforms.Compiled, error) {
	t := transforms.Spec{Resize: o.Resize, MaxSize: o.MaxSize, Fast: o.Fast}
	if err := t.Filter.UnmarshalText([]byte(o.Filter)); err != nil {
		return transforms.Compiled{}, fmt.Errorf("--filter: %w", err)
	}
	if err := t.Layout.UnmarshalText([]byte(o.Layout)); err != nil {
		return transforms.Compiled{}, fmt.Errorf("--layout: %w", err)
	}
	if err := t.DType.UnmarshalText([]byte(o.DType)); err != nil {
		return transforms.Compiled{}, fmt.Errorf("--dtype: %w", err)
	}
	if o.Size != "" {
		w, h, err := parseWxH(o.Size)
		if err != nil {
			return transforms.Compiled{}, fmt.Errorf("--size: %w", err)
		}
		t.Width, t.Height = w, h
	}
	if o.Crop != "" {
		w, h, err := parseWxH(o.Crop)
		if err != nil {
			return transforms.Compiled{}, fmt.Errorf("--crop: %w", err)
		}
		t.CropW, t.CropH = w, h
	}
	var err error
	if t.Mean, err = parseFloats(o.Mean); err != nil {
		return transforms.Compiled{}, fmt.Errorf("--mean: %w", err)
	}
	if t.Std, err = parseFloats(o.Std); err != nil {
		return transforms.Compiled{}, fmt.Errorf("--std: %w", err)
	}
	if o.Resize == 0 && o.Size == "" {
		t.Filter = 0 // the manifest records a filter only for a transform that resizes
	}
	return t.Compile()
}

// parseWxH parses "N" (square) or "WxH".
func parseWxH(s string) (w, h int, err error) {
	a, b, ok := strings.Cut(strings.ToLower(s), "x")
	if w, err = strconv.Atoi(a); err != nil || w <= 0 {
		return 0, 0, fmt.Errorf("%q is not N or WxH with positive integers", s)
	}
	if !ok {
		return w, w, nil
	}
	if h, err = strconv.Atoi(b); err != nil || h <= 0 {
		return 0, 0, fmt.Errorf("%q is not N or WxH with positive integers", s)
	}
	return w, h, nil
}

func parseFloats(s string) ([]float64, error) {
	if s == "" {
		return nil, nil
	}
	var out []float64
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a comma-separated list of numbers", s)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseBytes parses a size flag or setting: 256MiB, 1GiB, 64M, 100MB, or a number of bytes.
func parseBytes(s string) (int64, error) { return humanize.ParseSize(s, 1) }

func runBuild(ctx context.Context, o *buildOptions) (err error) {
	if locations.Overlap(o.Out, o.Source) {
		return usagef(fmt.Errorf("build %s: %w: %s is the source, or lies in or around it", o.Source, pipeline.ErrOutputOverlap, o.Out))
	}
	if remote(o.Source) {
		var p string
		var rename func(error) error
		var cleanup func()
		var merr error
		if o.SourceCache == "" && !o.sideLocal() {
			var files *viewFiles
			if p, files, rename, cleanup, merr = streamSource(ctx, o.Source, o.From, o.IO.Err); files != nil {
				o.files = files
				rename, cleanup, merr = o.viewSides(ctx, files, rename, cleanup)
			}
		}
		if merr == nil && o.files == nil {
			p, rename, cleanup, merr = mirrorSource(ctx, o.Source, o.SourceCache, o.IO.Err)
		}
		if merr != nil {
			return merr
		}
		defer cleanup()
		o.srcPath = p
		defer func() {
			if errors.Is(err, pipeline.ErrOutputOverlap) {
				// About OUT and the copy, both local: name the copy for what it is.
				err = fmt.Errorf("%w (%s is the local copy of %s)", err, p, o.Source)
			} else {
				err = rename(err)
			}
		}()
	} else if o.SourceCache != "" {
		return usagef(errors.New("--source-cache is for an s3://bucket/prefix SRC; a local SRC is read in place"))
	} else if o.plan != nil && remote(o.plan.Source) {
		p, files, rename, cleanup, verr := plannedView(ctx, o.plan.Source, o.plan.Kind, o.plan.Items, o.IO.Err)
		if verr == nil {
			rename, cleanup, verr = o.viewSides(ctx, files, rename, cleanup)
		}
		if verr != nil {
			return verr
		}
		defer cleanup()
		o.srcPath, o.files = p, files
		defer func() { err = rename(err) }()
	}
	if o.InPlace {
		return runInPlaceBuild(ctx, o)
	}
	if remote(o.Out) && (o.part != nil || o.Format == shard.FormatShards) {
		return runStreamBuild(ctx, o)
	}
	if o.Resume && remote(o.Out) {
		return usagef(fmt.Errorf("--resume to an object store is for --format %s (its shards are uploaded as they are finished, and the checkpoint kept with their record); a --format %s build is uploaded once complete: build again without --resume", shard.FormatShards, o.Format))
	}
	dir, publish, done, err := openTarget(ctx, "build", o.Out, o.Force, o.part, o.IO.Err)
	if err != nil {
		return err
	}
	defer done()
	return runBuildTo(ctx, o, dir, publish)
}

// runStreamBuild builds to an object-store OUT uploading each shard as it is finished
// (openStreamTarget). Each checkpoint is kept in the bucket too, so that a resume on a machine
// without the local folder (or with an older checkpoint in it) goes on from the bucket's: its
// journal is put where the build reads it. A resumed build whose checkpoint names an object
// that is missing or damaged in the store (s3.ErrStoredDamaged) starts over, saying so: the
// shards are built again, and those the store holds intact are not uploaded again.
func runStreamBuild(ctx context.Context, o *buildOptions) (err error) {
	t, err := openStreamTarget(ctx, o.Out, o.Force, o.Resume, o.part, o.IO.Err)
	if err != nil {
		return err
	}
	defer func() { err = t.done(err) }()
	// A dataset the build committed locally is there only when a build was killed while it
	// published it: built again (its shards in the bucket are not uploaded again).
	if err := os.RemoveAll(t.dir); err != nil {
		return err
	}
	if j := t.stage.TakenJournal(); o.Resume && j != nil {
		staging := t.dir + pipeline.StagingSuffix
		if err := os.MkdirAll(staging, 0o755); err != nil {
			return err
		}
		if err := fileutil.WriteFileAtomic(filepath.Join(staging, pipeline.JournalName), j); err != nil {
			return err
		}
		fmt.Fprintf(o.IO.Err, "packer: resuming from the checkpoint kept in %s\n", o.Out)
	}
	o.store, o.uploadBusy, o.saveCheckpoint = t.store, t.stage.Busy, t.stage.SaveCheckpoint
	err = runBuildTo(ctx, o, t.dir, t.publish)
	var damaged *s3.StoredDamagedError
	if o.Resume && errors.As(err, &damaged) {
		staging := t.dir + pipeline.StagingSuffix
		entry, eerr := outputFor(shard.FormatShards) // a streamed build writes shards
		if eerr != nil {
			return errors.Join(err, eerr)
		}
		kept, cerr := pipeline.CutJournal(staging, entry, damaged.Records)
		if cerr != nil {
			return errors.Join(err, cerr)
		}
		if kept != nil {
			fmt.Fprintf(o.IO.Err, "packer: %v\npacker: the build goes on from its checkpoint before that shard (%d inputs, %d records kept); the shards from there are built and uploaded again\n", err, kept.Inputs, kept.Records)
		} else {
			fmt.Fprintf(o.IO.Err, "packer: %v\npacker: the build starts over; the shards the store holds intact are not uploaded again\n", err)
			if rerr := os.Remove(filepath.Join(staging, pipeline.JournalName)); rerr != nil {
				return errors.Join(err, rerr)
			}
		}
		err = runBuildTo(ctx, o, t.dir, t.publish)
	}
	return err
}

// runBuildTo builds into the local folder out; where publish is set (an object-store OUT) it
// publishes the built dataset before the summary, which names o.Out.
func runBuildTo(ctx context.Context, o *buildOptions, out string, publish func(dir string) error) error {
	src, kind, err := openSource(o)
	if err != nil {
		return err
	}
	if o.Shuffle {
		if e, ok := sourceEntry(kind); ok {
			if err := shuffleRefused(e); err != nil {
				return usagef(err)
			}
		}
	}
	// npy and HDF5 hold one array of one shape: refuse a variable shape before decoding.
	if err := o.output.CheckSpec(pipeline.DatasetSpec(src, o.transform)); err != nil {
		return usagef(err)
	}
	// An output that cannot hold a field of the source's is refused before decoding too.
	if err := o.output.CheckFields(src.Info().Fields); err != nil {
		return usagef(fmt.Errorf("build %s: %w", o.Source, err))
	}
	if err := o.resolveCut(src); err != nil {
		return usagef(fmt.Errorf("build %s: %w", o.Source, err))
	}
	resizer, device, release, err := openDevice(o.Device, o.transform, o.Verbose)
	if err != nil {
		return err
	}
	defer release()
	info := src.Info()
	// A part is written as shards, lossless, whatever --format is: the merge writes the format.
	outEntry, what := o.output, o.Format
	if o.part != nil {
		o.part.FinalShardSize = o.shardSize
		o.part.Source = o.partSource()
		if outEntry, err = outputFor(shard.FormatShards); err != nil {
			return err
		}
		what = fmt.Sprintf("part %d/%d, for --format %s", o.part.Index, o.part.Count, o.Format)
	}
	bar := progress.New(o.IO.Err, "packing "+kind, progressUnit(kind), info.Count)
	firstProgress := true
	// The workers spend most of their time in C (libjpeg-turbo, the AVX2 resize, libav), and a
	// goroutine in a C call keeps its P as one in a system call does (raiseProcs): with a P per
	// worker, the ordered writer and the shards' hashing goroutines waited for a P while a core
	// could run them. Two more Ps (the worker count is fixed first, as it defaults to the Ps):
	// --workers 2 went from 0.81 to 0.95 of two independent one-worker builds at once on the
	// 2-core machine (docs/benchmarks.md).
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	defer raiseProcs(2)()
	sum, err := pipeline.Build(ctx, pipeline.Options{
		Source:          src,
		Files:           o.files,
		Transform:       o.transform,
		Output:          outEntry,
		Part:            o.part,
		Out:             out,
		Inputs:          o.inputs(),
		Force:           o.Force,
		Formats:         outputNames(false),
		Resume:          o.Resume,
		CheckpointEvery: o.CheckpointEvery,
		Shuffle:         o.shuffle(),
		Store:           o.store,
		SaveCheckpoint:  o.saveCheckpoint,
		Workers:         o.Workers,
		OnError:         o.OnError,
		MaxErrors:       o.MaxErrors,
		ShardSize:       o.shardSize,
		ChecksumBlock:   o.checkBlock,
		CutInputs:       o.CutInputs,
		Device:          device,
		Resizer:         resizer,
		Prefetch:        o.prefetch(ctx),
		Progress: func(items, total, records, bytes int64) {
			if firstProgress {
				// A resumed build starts past the inputs its checkpoint covers.
				firstProgress = false
				if items > 1 {
					bar.Resume(items - 1)
				}
			}
			bar.Set(items)
		},
	})
	bar.Finish()
	if err != nil {
		err = fmt.Errorf("build %s: %w", o.Source, err)
		if errors.Is(err, pipeline.ErrOutputOverlap) || errors.Is(err, pipeline.ErrOutputMount) || errors.Is(err, pipeline.ErrFieldsClips) {
			return usagef(err) // fix the command line: exit 2
		}
		return err
	}
	var uploadSecs float64
	if publish != nil {
		start := time.Now()
		if err := publish(sum.Out); err != nil {
			return fmt.Errorf("build %s: %w", o.Source, err)
		}
		uploadSecs = time.Since(start).Seconds()
		if o.uploadBusy != nil {
			uploadSecs += o.uploadBusy().Seconds()
		}
		sum.Out = o.Out
	}
	secs := sum.Elapsed.Seconds()
	if o.JSON {
		s := buildSummary{
			Out: sum.Out, Source: kind, Format: sum.Manifest.Format, Records: sum.Records, Inputs: sum.Items,
			Skipped: sum.Skipped, Reasons: sum.Reasons, Files: len(sum.Manifest.Files), FileBytes: sum.FileBytes,
			RecordBytes: sum.Bytes, Seconds: secs, RecordsPerSecond: float64(sum.Records) / secs,
			Device: device, Workers: o.Workers, Resumed: sum.Resumed, UploadSeconds: uploadSecs,
		}
		if o.part != nil {
			s.Part = fmt.Sprintf("%d/%d", o.part.Index, o.part.Count)
		}
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	if r := sum.Resumed; r != nil {
		fmt.Fprintf(o.IO.Out, "resumed: kept %s of %s from the interrupted build's last checkpoint\n", humanize.Count(r.Records, "record"), humanize.Count(r.Inputs, "input"))
	} else if o.Resume {
		fmt.Fprintf(o.IO.Out, "resume: no checkpoint of an interrupted build of %s; built from the beginning\n", o.Out)
	}
	fmt.Fprintf(o.IO.Out, "packed %s from %s (%s) into %s [%s, %s, %s]\n",
		humanize.Count(sum.Records, "record"), humanize.Count(sum.Items, "input"), kind, sum.Out, what,
		humanize.Count(len(sum.Manifest.Files), "file"), humanize.Bytes(sum.FileBytes))
	fmt.Fprintf(o.IO.Out, "device: %s; %s; %.2fs; %.0f records/s; %s\n",
		device, humanize.Count(o.Workers, "worker"), secs, float64(sum.Records)/secs, humanize.Rate(float64(sum.Bytes)/secs))
	if sum.Skipped > 0 {
		fmt.Fprintf(o.IO.Out, "skipped %s (listed in %s/manifest.json):\n", humanize.Count(sum.Skipped, "input"), o.Out)
		for _, k := range pipeline.SortedKeys(sum.Reasons) {
			fmt.Fprintf(o.IO.Out, "  %6d  %s\n", sum.Reasons[k], k)
		}
	}
	return nil
}

// resolveCut sets the K of --cut-inputs auto (pipeline.AutoCutInputs: from the source's info,
// the transform and --shard-size, before anything is decoded) and says which K it chose.
func (o *buildOptions) resolveCut(src source.Source) error {
	if !o.cutAuto {
		return nil
	}
	k, err := pipeline.AutoCutInputs(src, o.transform, o.shardSize)
	if err != nil {
		return err
	}
	o.CutInputs = k
	spec := pipeline.DatasetSpec(src, o.transform)
	fmt.Fprintf(o.IO.Err, "packer: --cut-inputs auto: K = %d (a shard of %s holds %s of %s)\n",
		k, humanize.Bytes(o.shardSize), humanize.Count(k, "record"), humanize.Bytes(spec.Size()))
	return nil
}

// progressUnit is what build's progress counts for a source kind: its inputs, videos for the
// video sources (a folder of frames is one video), images for the others.
func progressUnit(kind string) string {
	switch kind {
	case "video", "frames":
		return "videos"
	}
	return "images"
}

// buildSummary is build's --json output.
type buildSummary struct {
	Out              string         `json:"out"`
	Source           string         `json:"source"`
	Format           string         `json:"format"`
	Part             string         `json:"part,omitempty"`
	Records          int64          `json:"records"`
	Inputs           int64          `json:"inputs"`
	Skipped          int64          `json:"skipped"`
	Reasons          map[string]int `json:"skip_reasons"`
	Files            int            `json:"files"`
	FileBytes        int64          `json:"file_bytes"`
	RecordBytes      int64          `json:"record_bytes"`
	Seconds          float64        `json:"seconds"`
	RecordsPerSecond float64        `json:"records_per_second"`
	Device           string         `json:"device"`
	Workers          int            `json:"workers"`
	// Resumed is set when the build went on from an interrupted build's checkpoint.
	Resumed *pipeline.ResumeInfo `json:"resumed,omitempty"`
	// UploadSeconds is the time publishing to object storage took (uploads, their checks
	// and the manifest), after the build's own Seconds; 0 for a local OUT. Where the shards
	// are uploaded as they are finished, it is the time during which an upload ran (within
	// Seconds, overlapping the build) plus the manifest's publish.
	UploadSeconds float64 `json:"upload_seconds,omitempty"`
}

// shuffle is the build's pipeline.Shuffle: nil without --shuffle.
func (o *buildOptions) shuffle() *pipeline.Shuffle {
	if !o.Shuffle {
		return nil
	}
	return &pipeline.Shuffle{Seed: o.Seed}
}

// shuffleRefused is the usage error of --shuffle for a source kind whose inputs cannot be
// permuted (source.Entry.NoShuffle), or nil.
func shuffleRefused(e source.Entry) error {
	if e.NoShuffle == "" {
		return nil
	}
	return fmt.Errorf("--shuffle does not apply to --from %s: %s; shuffle when reading (the readers' shuffle=True, ORDER.md version 2), or build without --shuffle", e.Kind, e.NoShuffle)
}
