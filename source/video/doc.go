// Package video reads video datasets for packer build: folders of extracted frames
// (--from frames, FramesSource) and video files decoded by ffmpeg (--from video, Source), and
// cuts each video into fixed-size clip records.
//
// # Layouts
//
// Frames (OpenFrames): SRC/class/video_id/frame images, UCF-101 and Kinetics style. Every
// non-hidden subfolder of SRC is a class (labels in sorted name order); every non-hidden
// subfolder of a class is one video, in name order; its frames are its image files (the
// image-folder extensions, imagedir.Extensions) in natural order (NaturalLess: "frame_2"
// before "frame_10"; equal numbers with different zero padding by plain byte order). Frames
// are decoded exactly as images are (transforms.DecodeFile: Pillow-exact RGB). Files lying
// directly in a class folder are ignored. A folder reached twice through a symbolic link (a
// class folder linking to another class, a video folder linking to another video folder) is
// refused when the source is opened, naming both paths: its videos would be packed twice. The
// video-file layout refuses a class folder linking to another class the same way.
//
// Videos (Open): SRC/class/*.{mp4,mkv,avi,webm,mov} (VideoExtensions, any case), classes and
// files sorted by name, not recursive. Each video is decoded as this command line decodes it
// (the pipe decoder runs exactly it, after
// `ffprobe -of json -show_format -show_streams -count_packets` has checked the file):
//
//	ffmpeg -nostdin -loglevel repeat+level+info -filter_threads 1 -threads 1 -i file:FILE
//	       -map 0:V -an -sn -dn -vf [fps=F,]showinfo=checksum=0 -fps_mode passthrough
//	       -autoscale 0 -flush_packets 1 -f rawvideo -pix_fmt rgb24 pipe:1
//
// V is the first video stream that is not a cover picture. The pixels are ffmpeg's own rgb24
// conversion, as `ffmpeg -i FILE -f rawvideo -pix_fmt rgb24` gives them, including ffmpeg's
// default autorotation from the display matrix; the sample aspect ratio is not applied.
// Both sources then hand frames to the pipeline, which applies the build's transforms
// (--resize, --crop, --filter, --dtype, --layout) to every frame exactly as to an image.
//
// # Decoders
//
// Two decoders give the same frames, times, records and skip decisions:
//
//   - libav (in process, the default): libavformat, libavcodec, libavfilter and libavutil of
//     ffmpeg 5.1 (Debian bookworm: libavformat59, libavcodec59, libavfilter8, libavutil57),
//     opened with dlopen at Open (never linked: the release binary stays glibc-only) and driven
//     from C (libav.c), one call per frame. It follows fftools/ffmpeg.c 5.1 for the command line
//     above: the same timestamp bookkeeping, the same filter graph (buffer source, the
//     autorotation filters, [fps], format=rgb24, buffer sink; filter threads = Threads; no
//     scale_sws_opts, as ffmpeg 5.1's default is none: the auto-inserted scaler runs with
//     flags 0), the same graph rebuild when frames change size or pixel format, and the same
//     order of asking the graph for output before reading input, so -fps resampling ends
//     where ffmpeg's does. Each frame is copied once, from the filter's rgb24 frame into the
//     packed buffer the pipeline gets. The probe reads the facts ffprobe prints (the same
//     checks follow), and libav's warnings and errors are captured per calling thread
//     (av_log_set_callback) in the command line's form, so the same first error ends a video
//     with the same reason (ffprobe's "exit status 1" is not in a reason, and lines only the
//     command line itself logs, as its muxer's harmless complaint about timestamps, could only
//     appear among the pipe's). Tested against the pipe decoder on every codec, container,
//     pixel format, rotation, timestamp layout and damaged file of the tests
//     (TestLibavMatchesFFmpeg).
//   - ffmpeg (the pipe): ffprobe and one ffmpeg process per video, frames read from its stdout
//     (never from temporary files).
//
// Options.Decoder, or the environment variable PACKER_VIDEO_DECODER (ffmpeg, libav or auto),
// picks one. auto (the default) uses libav unless the libraries cannot be loaded (missing,
// another major version than the headers packer was built with, a build without cgo),
// Options.Threads is above 1 (decoder threads would log on threads packer does not follow), or
// Options.FFmpeg or FFprobe names a program (then that program is wanted), or its self-test
// at Open fails; the pipe is used then. libav fails Open when it cannot be used. The choice does not change the output, so it
// is not recorded in the manifest.
//
// The first line of `ffmpeg -version` is recorded in the manifest's source spec ("ffmpeg"),
// since decoders can differ between versions; libav records the same line when the ffmpeg on
// PATH is the same build as the libraries (same av_version_info), else
// "ffmpeg version V (libavcodec X.Y.Z, in process)". Open also decodes a tiny video through
// the whole path (a synthetic testsrc for the pipe, an embedded two-frame H.264 mp4 for
// libav), so a decoder packer cannot drive fails the build at once with one clear error. Files
// are named through ffmpeg's file: protocol, so no file name is read as a protocol or an
// option.
//
// # Inputs that are not regular files
//
// Symbolic links to class folders, video folders, frames and video files are followed. Every
// entry of a class folder with a video extension that is not a folder is an input (video):
// a dangling symlink, a symlink loop, a FIFO or a device is skipped with its reason
// ("dangling symlink", "not a regular file: FIFO"; source/internal/fsentry) and never opened, so ffprobe
// never blocks on it. For frames, a symbolic link that does not resolve where a video folder
// would be is skipped with its reason, and a video folder holding a frame that is not a
// readable regular file is skipped whole, naming the frame (every frame is checked before any
// is decoded). Class, video and frame names are escaped with fsentry.Name (bytes that are not
// UTF-8 as \xHH, a backslash as \\), in the skipped list and in the records' metadata.
//
// # Sampling
//
// Without Options.FPS every decoded frame is used, once (-fps_mode passthrough: ffmpeg neither
// duplicates nor drops frames to a constant rate). With FPS, ffmpeg's fps filter resamples the
// timeline to that rate (nearest frame) and frame indexes count the resampled frames. FPS does
// not apply to frame folders, which have no timeline.
//
// # Clips
//
// With ClipLen T > 0 each record is T consecutive frames, shape [T, H, W, C] (layout "thwc")
// or [T, C, H, W] ("tchw"); clips start every ClipStride S frames (default T): frames 0..T-1,
// S..S+T-1, and so on. S < T overlaps clips, S > T leaves frames out. Frames after the last
// complete clip are not packed. With ClipLen 0 every frame is its own record ([H, W, C]).
//
// A video with fewer than T frames is skipped with the reason "video has N frames, fewer than
// --clip-len T" (Short "skip", the default; it wraps ErrShort), or packed as one clip whose
// last frame is repeated to T frames (Short "pad"; the record's metadata says "padded": the
// number of repeated frames). Padding applies only to videos shorter than one clip.
//
// Decoding streams: frames are read one at a time and each clip is emitted as soon as its
// last frame is decoded. A worker holds at most T frames in its clip window plus 3 being read
// or queued (a reader goroutine reads up to 2 frames ahead, so ffmpeg decodes while the worker
// transforms), plus ffmpeg's pipe: build memory is bounded by workers × clip size whatever
// the video's length.
//
// # Metadata
//
// Every record carries compact JSON with sorted keys (shard per-record metadata: packer inspect
// --records N, shard.Reader.RecordMeta, packer_reader's ds.meta(i)):
//
//	{"frame":8,"frames":4,"label":2,"time":0.333667,"video":"class/clip.mp4"}
//
// video is the path relative to SRC (a folder for frames), label the class index, frame the
// index of the record's first frame in the (resampled) frame sequence, frames the number of
// frames in the record (T, or 1), time the first frame's presentation time in seconds. The
// time is the frame's pts as ffmpeg decodes it (pts × time base, as reported by the showinfo
// filter after the fps filter, on ffmpeg's timeline that starts the file at 0), rounded to the
// microsecond; when a frame has no pts it is frame / fps (the --fps rate, or the stream's
// average rate). Frame folders have no time; their records carry "file", the first frame's
// file name, instead. "padded" appears only on padded records.
//
// # Robustness
//
// Every bad video becomes a *source.InputError naming it by its relative path, with a
// precise, host-independent reason (no absolute paths, no pointer addresses; ffmpeg's last
// warnings and errors, bounded, are quoted), which the build skips or fails on as --on-error
// says. Checked before decoding, so that nothing of the video is packed:
//   - zero-length files (transforms.ErrEmpty);
//   - files ffprobe cannot open: random bytes, an mp4 truncated before its index ("moov atom
//     not found") (ErrProbe);
//   - no video stream, for example audio only; a codec this ffmpeg has no decoder for; no
//     frame size; frames over the pixel cap; a container whose index lists more frames than
//     there are readable packets, as an mp4 truncated after its index (FormatError);
//   - any error ffprobe reports while reading every packet (-count_packets), though it exits
//     with status 0: a Matroska file cut short, H.264 data its parser cannot split
//     (ErrDamaged).
//
// Found while decoding, for damage only a decoder notices (the pipeline keeps the clips
// emitted before, and says how many in the reason):
//   - damaged data: packer follows ffmpeg's log and stops at the first error-level message
//     (a decoder or demuxer error; the rawvideo muxer's complaint about timestamps is
//     harmless and ignored), before any frame ffmpeg outputs after it, and fails the video
//     (ErrDecode, quoting the messages) instead of packing concealed, damaged frames. The
//     policy is strict: a stream that starts without its parameter sets or mid-GOP fails too.
//     (ffmpeg -xerror is not used: when it aborts, how many already filtered frames reach the
//     pipe depends on timing.) A non-zero exit status fails the video as well;
//   - frames that change size mid-stream: ffmpeg would silently rescale them to the first
//     size; packer turns that off (-autoscale 0) and reads each frame's size from the showinfo
//     line ffmpeg logs before writing the frame, so each frame is read at its own size. A
//     size change is not a reason to skip a video: with one record per frame (ClipLen 0)
//     each frame keeps its size, and clips whose transform gives every frame one size (a
//     crop, an exact size) are packed. Only clips that cannot be one array (frames of one
//     video that transform to different sizes) fail the video, before the frame's bytes are
//     read (ErrSizeChange, naming the frame, both sizes and the options that fix it);
//   - a hung decoder: Options.Timeout (--decode-timeout, default 5 minutes) bounds ffprobe and
//     every wait for ffmpeg's next frame (time spent in the pipeline does not count, so long
//     videos are not cut short); then the tool's whole process group is killed (ErrTimeout).
//     libav: the probe and every wait for the next frame are bounded the same way; then reads
//     are interrupted (AVIOInterruptCB) and the video fails with ErrTimeout at once. A decoder
//     stuck inside libavcodec cannot be interrupted: its goroutine and thread are abandoned
//     (the decoder is freed if it ever returns). The pipe decoder, which kills a process,
//     stays for that reason.
//
// Frame folders fail on an undecodable frame (naming it) and, under the same rule as videos, on
// frames that would not fit one clip record (ErrSizeChange); a folder without frame images is
// skipped.
//
// # Determinism
//
// Classes, videos and frames are enumerated in sorted order and the pipeline writes records in
// source order, so the output is byte-identical for any worker count. ffmpeg decoders are
// bit-exact; each ffmpeg runs single-threaded (Options.Threads, recorded in the manifest), which
// also keeps the outcome of damaged streams independent of the worker count. Only timeouts
// depend on the machine.
//
// # Concurrency
//
// Info and Enumerate are called from one goroutine; Decode is safe for concurrent use and runs
// one decoder per call (libav in process, or one ffmpeg and before it one ffprobe). The frames in a Clip are valid until emit
// returns.
//
// # Requirements
//
// Debian bookworm's ffmpeg 5.1 libraries (libavformat59, libavcodec59, libavfilter8,
// libavutil57: the ffmpeg package installs them) for the in-process decoder, and their headers
// to build packer (libavformat-dev, libavcodec-dev, libavfilter-dev, libavutil-dev). Else
// ffmpeg and ffprobe 5.1 or newer (for -fps_mode) on PATH, or named by Options.FFmpeg and
// Options.FFprobe.
package video
