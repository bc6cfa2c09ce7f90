#ifndef PACKER_VIDEO_LIBAV_H
#define PACKER_VIDEO_LIBAV_H

#include <stddef.h>
#include <stdint.h>

// The in-process decoder (libav.c): libavformat, libavcodec, libavfilter and libavutil opened
// with dlopen, never linked. See libav.go.

// pkv_load opens the libraries and resolves every function; 0 on success, else -1 with the
// reason in err. It checks that each library's major version is the one compiled against.
int pkv_load(char *err, size_t n);

// pkv_version_info writes av_version_info() and libavcodec's version ("59.37.100").
void pkv_version_info(char *info, size_t n, char *codec, size_t m);

// pkv_decoders writes the names of the video decoders and of their codecs, one per line
// (truncated at n bytes).
void pkv_decoders(char *buf, size_t n);

// pkv_log is the log of one probe or decode: the warning and error lines libav writes while
// it runs on the calling thread, in the CLI's "[ctx @ 0x..] [level] message" form.
typedef struct pkv_log {
	char *buf;        // lines, each ending in a newline; the caller reads and empties it
	size_t len, cap;
	char part[1024];  // a line being written in pieces
	size_t plen;
	int part_level;
	int print_prefix;
	int errors;       // error-level lines seen (fatal, panic and error)
	const char *benign; // an error-level message that does not count as an error
} pkv_log;

// pkv_probe opens url as ffprobe -show_format -show_streams -count_packets does and writes
// the part of ffprobe's JSON that parseProbe reads to json. It returns 0, or a negative
// AVERROR when the file cannot be opened (the log says why). cancel, when set, interrupts it.
int pkv_probe(const char *url, char *json, size_t n, pkv_log *lg, volatile int *cancel);

typedef struct pkv_dec pkv_dec;

// pkv_frame describes the frame pkv_next returned.
typedef struct pkv_frame {
	int w, h;
	int64_t pts;    // in tb; INT64_MIN when none
	int tb_num, tb_den;
} pkv_frame;

enum { PKV_FRAME = 1, PKV_END = 0, PKV_LOGGED_ERROR = -1, PKV_FAIL = -2, PKV_INTERRUPTED = -3 };

// pkv_open opens url for decoding its stream index as the ffmpeg command line does; fps is the
// fps filter's argument or "" for none. It returns NULL with the reason in err on failure.
// cancel (C memory, set from any thread) interrupts reads and ends pkv_next with
// PKV_INTERRUPTED; it must outlive the decoder.
pkv_dec *pkv_open(const char *url, int stream, const char *fps, int threads, volatile int *cancel, char *err, size_t n);
// pkv_next decodes until the next output frame (PKV_FRAME, described by f and held until
// pkv_copy or the next call), the end (PKV_END), or an error: an error-level log line
// (PKV_LOGGED_ERROR), a failed call (PKV_FAIL: the log holds the CLI's message), or cancel
// (PKV_INTERRUPTED).
int pkv_next(pkv_dec *d, pkv_frame *f);
// pkv_copy writes the held frame's rgb24 pixels to dst, packed (w*3 bytes a row).
void pkv_copy(pkv_dec *d, uint8_t *dst);
pkv_log *pkv_dec_log(pkv_dec *d);
void pkv_close(pkv_dec *d);

pkv_log *pkv_log_new(const char *benign);
void pkv_log_free(pkv_log *lg);

#endif
