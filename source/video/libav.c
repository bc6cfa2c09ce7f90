//go:build cgo

#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavfilter/avfilter.h>
#include <libavfilter/buffersink.h>
#include <libavfilter/buffersrc.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
#include <libavutil/display.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>

#include "libav.h"

// The libav libraries are not linked: pkv_load opens them with dlopen the first time a video
// is decoded in process, so the program starts (and decodes through the ffmpeg command) without
// them. The headers are used for types and struct layouts only; every function is called
// through a pointer filled by dlsym (the #defines below), as output/hdf5's shim does. Static
// inline helpers of the headers that call into the libraries (av_err2str) are not used.
#define PKV_UTIL(X) \
	X(avutil_version) X(av_version_info) X(av_log_set_callback) X(av_log_set_flags) X(av_log_format_line2) \
	X(av_log) X(av_strerror) X(av_frame_alloc) X(av_frame_free) X(av_frame_unref) X(av_frame_move_ref) \
	X(av_frame_get_side_data) X(av_dict_set) X(av_dict_free) X(av_rescale_q) X(av_rescale_q_rnd) \
	X(av_display_rotation_get) X(av_pix_fmt_desc_get) X(av_opt_set) X(av_get_media_type_string) \
	X(av_malloc) X(av_free) X(av_memdup) X(av_freep)
#define PKV_CODEC(X) \
	X(avcodec_version) X(avcodec_find_decoder) X(avcodec_alloc_context3) X(avcodec_free_context) \
	X(avcodec_parameters_to_context) X(avcodec_open2) X(avcodec_send_packet) X(avcodec_receive_frame) \
	X(av_packet_alloc) X(av_packet_free) X(av_packet_unref) X(av_packet_ref) X(av_packet_get_side_data) \
	X(av_packet_new_side_data) X(av_codec_iterate) X(av_codec_is_decoder) X(avcodec_descriptor_get)
#define PKV_FORMAT(X) \
	X(avformat_version) X(avformat_open_input) X(avformat_find_stream_info) X(avformat_close_input) \
	X(av_read_frame) X(av_guess_frame_rate) X(av_stream_get_side_data) X(av_stream_get_parser) \
	X(avformat_alloc_context)
#define PKV_FILTER(X) \
	X(avfilter_version) X(avfilter_graph_alloc) X(avfilter_graph_free) X(avfilter_get_by_name) \
	X(avfilter_graph_create_filter) X(avfilter_link) X(avfilter_graph_config) \
	X(av_buffersrc_add_frame_flags) X(av_buffersrc_close) X(av_buffersink_get_frame_flags) \
	X(av_buffersink_get_time_base) X(avfilter_graph_request_oldest)

#define PKV_PTR(f) static __typeof__(f) *pkp_##f;
PKV_UTIL(PKV_PTR)
PKV_CODEC(PKV_PTR)
PKV_FORMAT(PKV_PTR)
PKV_FILTER(PKV_PTR)

#define avutil_version (*pkp_avutil_version)
#define av_version_info (*pkp_av_version_info)
#define av_log_set_callback (*pkp_av_log_set_callback)
#define av_log_set_flags (*pkp_av_log_set_flags)
#define av_log_format_line2 (*pkp_av_log_format_line2)
#define av_log (*pkp_av_log)
#define av_strerror (*pkp_av_strerror)
#define av_frame_alloc (*pkp_av_frame_alloc)
#define av_frame_free (*pkp_av_frame_free)
#define av_frame_unref (*pkp_av_frame_unref)
#define av_frame_move_ref (*pkp_av_frame_move_ref)
#define av_frame_get_side_data (*pkp_av_frame_get_side_data)
#define av_dict_set (*pkp_av_dict_set)
#define av_dict_free (*pkp_av_dict_free)
#define av_rescale_q (*pkp_av_rescale_q)
#define av_rescale_q_rnd (*pkp_av_rescale_q_rnd)
#define av_display_rotation_get (*pkp_av_display_rotation_get)
#define av_pix_fmt_desc_get (*pkp_av_pix_fmt_desc_get)
#define av_opt_set (*pkp_av_opt_set)
#define av_get_media_type_string (*pkp_av_get_media_type_string)
#define av_malloc (*pkp_av_malloc)
#define av_free (*pkp_av_free)
#define av_memdup (*pkp_av_memdup)
#define av_freep (*pkp_av_freep)
#define avcodec_version (*pkp_avcodec_version)
#define avcodec_find_decoder (*pkp_avcodec_find_decoder)
#define avcodec_alloc_context3 (*pkp_avcodec_alloc_context3)
#define avcodec_free_context (*pkp_avcodec_free_context)
#define avcodec_parameters_to_context (*pkp_avcodec_parameters_to_context)
#define avcodec_open2 (*pkp_avcodec_open2)
#define avcodec_send_packet (*pkp_avcodec_send_packet)
#define avcodec_receive_frame (*pkp_avcodec_receive_frame)
#define av_packet_alloc (*pkp_av_packet_alloc)
#define av_packet_free (*pkp_av_packet_free)
#define av_packet_unref (*pkp_av_packet_unref)
#define av_packet_ref (*pkp_av_packet_ref)
#define av_packet_get_side_data (*pkp_av_packet_get_side_data)
#define av_packet_new_side_data (*pkp_av_packet_new_side_data)
#define av_codec_iterate (*pkp_av_codec_iterate)
#define av_codec_is_decoder (*pkp_av_codec_is_decoder)
#define avcodec_descriptor_get (*pkp_avcodec_descriptor_get)
#define avformat_version (*pkp_avformat_version)
#define avformat_open_input (*pkp_avformat_open_input)
#define avformat_find_stream_info (*pkp_avformat_find_stream_info)
#define avformat_close_input (*pkp_avformat_close_input)
#define av_read_frame (*pkp_av_read_frame)
#define av_guess_frame_rate (*pkp_av_guess_frame_rate)
#define av_stream_get_side_data (*pkp_av_stream_get_side_data)
#define av_stream_get_parser (*pkp_av_stream_get_parser)
#define avformat_alloc_context (*pkp_avformat_alloc_context)
#define avfilter_version (*pkp_avfilter_version)
#define avfilter_graph_alloc (*pkp_avfilter_graph_alloc)
#define avfilter_graph_free (*pkp_avfilter_graph_free)
#define avfilter_get_by_name (*pkp_avfilter_get_by_name)
#define avfilter_graph_create_filter (*pkp_avfilter_graph_create_filter)
#define avfilter_link (*pkp_avfilter_link)
#define avfilter_graph_config (*pkp_avfilter_graph_config)
#define av_buffersrc_add_frame_flags (*pkp_av_buffersrc_add_frame_flags)
#define av_buffersrc_close (*pkp_av_buffersrc_close)
#define av_buffersink_get_frame_flags (*pkp_av_buffersink_get_frame_flags)
#define av_buffersink_get_time_base (*pkp_av_buffersink_get_time_base)
#define avfilter_graph_request_oldest (*pkp_avfilter_graph_request_oldest)

static const AVRational pkv_tbq = {1, AV_TIME_BASE};

// The log of the libav call running on this thread (NULL: none of packer's; dropped).
static __thread pkv_log *pkv_cur;

static void pkv_log_append(pkv_log *lg, const char *s, size_t n) {
	if (lg->len + n + 1 > lg->cap) {
		size_t c = lg->cap ? lg->cap * 2 : 1024;
		char *b;
		while (c < lg->len + n + 1) {
			c *= 2;
		}
		b = realloc(lg->buf, c);
		if (b == NULL) {
			return;
		}
		lg->buf = b;
		lg->cap = c;
	}
	memcpy(lg->buf + lg->len, s, n);
	lg->len += n;
}

// pkv_log_line ends the line being written: kept when its first piece was a warning or worse.
static void pkv_log_end(pkv_log *lg) {
	if (lg->plen == 0) {
		return;
	}
	if (lg->part_level <= AV_LOG_WARNING) {
		lg->part[lg->plen] = 0;
		if (lg->part_level <= AV_LOG_ERROR && (lg->benign == NULL || strstr(lg->part, lg->benign) == NULL)) {
			lg->errors++;
		}
		pkv_log_append(lg, lg->part, lg->plen);
		pkv_log_append(lg, "\n", 1);
	}
	lg->plen = 0;
}

// pkv_log_cb formats what libav logs as the ffmpeg command line does with -loglevel
// repeat+level+info: every message up to info level, "[ctx @ 0x...] [level] " before each line.
static void pkv_log_cb(void *avcl, int level, const char *fmt, va_list vl) {
	pkv_log *lg = pkv_cur;
	char line[1024];
	size_t n;
	int start;
	if (lg == NULL || level > AV_LOG_INFO) {
		return;
	}
	start = lg->print_prefix;
	av_log_format_line2(avcl, level, fmt, vl, line, sizeof line, &lg->print_prefix);
	n = strlen(line);
	if (start || lg->plen == 0) {
		pkv_log_end(lg);
		lg->part_level = level;
	}
	while (n > 0) {
		char *nl = memchr(line, '\n', n);
		size_t k = nl != NULL ? (size_t)(nl - line) : n;
		size_t room = sizeof lg->part - 1 - lg->plen;
		memcpy(lg->part + lg->plen, line, k < room ? k : room);
		lg->plen += k < room ? k : room;
		if (nl == NULL) {
			break;
		}
		if (lg->plen == 0) {
			lg->part[lg->plen++] = ' ';
		}
		pkv_log_end(lg);
		memmove(line, nl + 1, n - k - 1);
		n -= k + 1;
	}
}

pkv_log *pkv_log_new(const char *benign) {
	pkv_log *lg = calloc(1, sizeof *lg);
	if (lg != NULL) {
		lg->print_prefix = 1;
		lg->benign = benign;
	}
	return lg;
}

void pkv_log_free(pkv_log *lg) {
	if (lg != NULL) {
		free(lg->buf);
		free(lg);
	}
}

static void pkv_errstr(int err, char *buf, size_t n) {
	if (av_strerror(err, buf, n) < 0) {
		snprintf(buf, n, "Error number %d occurred", err);
	}
}

static void *pkv_open_lib(const char *name, char *err, size_t n) {
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *e = dlerror();
		snprintf(err, n, "%s", e != NULL ? e : name);
	}
	return h;
}

int pkv_load(char *err, size_t n) {
	void *hu, *hc, *hf, *hl, *sym;
	const char *missing = NULL, *lib = NULL;
	char name[64];
	if (n > 0) {
		err[0] = 0;
	}
	snprintf(name, sizeof name, "libavutil.so.%d", LIBAVUTIL_VERSION_MAJOR);
	if ((hu = pkv_open_lib(name, err, n)) == NULL) {
		return -1;
	}
	snprintf(name, sizeof name, "libavcodec.so.%d", LIBAVCODEC_VERSION_MAJOR);
	if ((hc = pkv_open_lib(name, err, n)) == NULL) {
		return -1;
	}
	snprintf(name, sizeof name, "libavformat.so.%d", LIBAVFORMAT_VERSION_MAJOR);
	if ((hf = pkv_open_lib(name, err, n)) == NULL) {
		return -1;
	}
	snprintf(name, sizeof name, "libavfilter.so.%d", LIBAVFILTER_VERSION_MAJOR);
	if ((hl = pkv_open_lib(name, err, n)) == NULL) {
		return -1;
	}
#define PKV_SYM_U(f) if (missing == NULL) { sym = dlsym(hu, #f); if (sym == NULL) { missing = #f; lib = "libavutil"; } pkp_##f = (__typeof__(pkp_##f))sym; }
#define PKV_SYM_C(f) if (missing == NULL) { sym = dlsym(hc, #f); if (sym == NULL) { missing = #f; lib = "libavcodec"; } pkp_##f = (__typeof__(pkp_##f))sym; }
#define PKV_SYM_F(f) if (missing == NULL) { sym = dlsym(hf, #f); if (sym == NULL) { missing = #f; lib = "libavformat"; } pkp_##f = (__typeof__(pkp_##f))sym; }
#define PKV_SYM_L(f) if (missing == NULL) { sym = dlsym(hl, #f); if (sym == NULL) { missing = #f; lib = "libavfilter"; } pkp_##f = (__typeof__(pkp_##f))sym; }
	PKV_UTIL(PKV_SYM_U)
	PKV_CODEC(PKV_SYM_C)
	PKV_FORMAT(PKV_SYM_F)
	PKV_FILTER(PKV_SYM_L)
	if (missing != NULL) {
		snprintf(err, n, "%s: no symbol %s", lib, missing);
		return -1;
	}
	// The struct layouts compiled in hold only for the major versions of the headers.
	if (AV_VERSION_MAJOR(avutil_version()) != LIBAVUTIL_VERSION_MAJOR ||
	    AV_VERSION_MAJOR(avcodec_version()) != LIBAVCODEC_VERSION_MAJOR ||
	    AV_VERSION_MAJOR(avformat_version()) != LIBAVFORMAT_VERSION_MAJOR ||
	    AV_VERSION_MAJOR(avfilter_version()) != LIBAVFILTER_VERSION_MAJOR) {
		snprintf(err, n, "library versions %u/%u/%u/%u (avutil/avcodec/avformat/avfilter) are not the %d/%d/%d/%d packer was built for",
			 AV_VERSION_MAJOR(avutil_version()), AV_VERSION_MAJOR(avcodec_version()),
			 AV_VERSION_MAJOR(avformat_version()), AV_VERSION_MAJOR(avfilter_version()),
			 LIBAVUTIL_VERSION_MAJOR, LIBAVCODEC_VERSION_MAJOR, LIBAVFORMAT_VERSION_MAJOR, LIBAVFILTER_VERSION_MAJOR);
		return -1;
	}
	av_log_set_flags(AV_LOG_PRINT_LEVEL);
	av_log_set_callback(pkv_log_cb);
	return 0;
}

void pkv_version_info(char *info, size_t n, char *codec, size_t m) {
	unsigned v = avcodec_version();
	snprintf(info, n, "%s", av_version_info());
	snprintf(codec, m, "%u.%u.%u", AV_VERSION_MAJOR(v), AV_VERSION_MINOR(v), AV_VERSION_MICRO(v));
}

void pkv_decoders(char *buf, size_t n) {
	void *it = NULL;
	const AVCodec *c;
	size_t len = 0;
	if (n == 0) {
		return;
	}
	buf[0] = 0;
	while ((c = av_codec_iterate(&it)) != NULL) {
		const AVCodecDescriptor *d;
		int k;
		if (c->type != AVMEDIA_TYPE_VIDEO || !av_codec_is_decoder(c)) {
			continue;
		}
		d = avcodec_descriptor_get(c->id);
		k = snprintf(buf + len, n - len, "%s\n%s\n", c->name, d != NULL ? d->name : c->name);
		if (k < 0 || (size_t)k >= n - len) {
			buf[len] = 0;
			return;
		}
		len += k;
	}
}

static int pkv_interrupt_cb(void *p) { return p != NULL && __atomic_load_n((volatile int *)p, __ATOMIC_RELAXED) != 0; }

// pkv_open_input opens url as both tools do (scan_all_pmts set), interruptible by cancel.
static int pkv_open_input(AVFormatContext **ic, const char *url, volatile int *cancel) {
	AVDictionary *opts = NULL;
	int ret;
	*ic = avformat_alloc_context();
	if (*ic == NULL) {
		return AVERROR(ENOMEM);
	}
	(*ic)->interrupt_callback.callback = pkv_interrupt_cb;
	(*ic)->interrupt_callback.opaque = (void *)cancel;
	av_dict_set(&opts, "scan_all_pmts", "1", AV_DICT_DONT_OVERWRITE);
	ret = avformat_open_input(ic, url, NULL, &opts); // frees *ic on failure
	av_dict_free(&opts);
	return ret;
}

// print_error, as the tools log a failed open or read.
static void pkv_print_error(const char *url, int err) {
	char msg[256];
	pkv_errstr(err, msg, sizeof msg);
	av_log(NULL, AV_LOG_ERROR, "%s: %s\n", url, msg);
}

typedef struct {
	char *buf;
	size_t n, len;
} pkv_out;

static void pkv_printf(pkv_out *o, const char *fmt, ...) {
	va_list ap;
	int k;
	if (o->len >= o->n) {
		return;
	}
	va_start(ap, fmt);
	k = vsnprintf(o->buf + o->len, o->n - o->len, fmt, ap);
	va_end(ap);
	if (k > 0) {
		o->len += (size_t)k;
		if (o->len >= o->n) {
			o->len = o->n;
		}
	}
}

int pkv_probe(const char *url, char *json, size_t n, pkv_log *lg, volatile int *cancel) {
	AVFormatContext *ic = NULL;
	AVPacket *pkt = NULL;
	int64_t *counts = NULL;
	unsigned i;
	int ret;
	pkv_out o = {json, n, 0};
	pkv_cur = lg;
	if ((ret = pkv_open_input(&ic, url, cancel)) < 0) {
		pkv_print_error(url, ret);
		goto done;
	}
	if ((ret = avformat_find_stream_info(ic, NULL)) < 0) {
		pkv_print_error(url, ret);
		goto done;
	}
	// ffprobe opens a decoder for every stream (show_streams reads their parameters).
	for (i = 0; i < ic->nb_streams; i++) {
		const AVCodec *c = avcodec_find_decoder(ic->streams[i]->codecpar->codec_id);
		AVCodecContext *cc;
		if (c == NULL) {
			continue;
		}
		cc = avcodec_alloc_context3(c);
		if (cc == NULL) {
			ret = AVERROR(ENOMEM);
			goto done;
		}
		if (avcodec_parameters_to_context(cc, ic->streams[i]->codecpar) >= 0) {
			cc->pkt_timebase = ic->streams[i]->time_base;
			cc->framerate = ic->streams[i]->avg_frame_rate;
			if (avcodec_open2(cc, c, NULL) < 0) {
				av_log(NULL, AV_LOG_WARNING, "Could not open codec for input stream %d\n", i);
			}
		}
		avcodec_free_context(&cc);
	}
	counts = calloc(ic->nb_streams + 1, sizeof *counts);
	pkt = av_packet_alloc();
	if (counts == NULL || pkt == NULL) {
		ret = AVERROR(ENOMEM);
		goto done;
	}
	// The interrupt callback is only asked on input; a demuxer looping over data it has
	// already read is stopped here.
	while ((cancel == NULL || !__atomic_load_n(cancel, __ATOMIC_RELAXED)) && av_read_frame(ic, pkt) >= 0) {
		if (pkt->stream_index >= 0 && (unsigned)pkt->stream_index < ic->nb_streams) {
			counts[pkt->stream_index]++;
		}
		av_packet_unref(pkt);
	}
	if (cancel != NULL && __atomic_load_n(cancel, __ATOMIC_RELAXED)) {
		ret = AVERROR_EXIT;
		goto done;
	}
	pkv_printf(&o, "{\"streams\":[");
	for (i = 0; i < ic->nb_streams; i++) {
		AVStream *st = ic->streams[i];
		AVCodecParameters *par = st->codecpar;
		const AVCodecDescriptor *cd = avcodec_descriptor_get(par->codec_id);
		const char *type = av_get_media_type_string(par->codec_type);
		pkv_printf(&o, "%s{\"index\":%d,\"codec_name\":\"%s\",\"codec_type\":\"%s\"", i ? "," : "", st->index,
			   cd != NULL ? cd->name : "unknown", type != NULL ? type : "unknown");
		if (par->codec_type == AVMEDIA_TYPE_VIDEO) {
			pkv_printf(&o, ",\"width\":%d,\"height\":%d", par->width, par->height);
		}
		pkv_printf(&o, ",\"r_frame_rate\":\"%d/%d\",\"avg_frame_rate\":\"%d/%d\"", st->r_frame_rate.num,
			   st->r_frame_rate.den, st->avg_frame_rate.num, st->avg_frame_rate.den);
		if (st->nb_frames) {
			pkv_printf(&o, ",\"nb_frames\":\"%" PRId64 "\"", st->nb_frames);
		}
		if (counts[i]) {
			pkv_printf(&o, ",\"nb_read_packets\":\"%" PRId64 "\"", counts[i]);
		}
		if (st->duration != AV_NOPTS_VALUE) {
			pkv_printf(&o, ",\"duration\":\"%f\"", st->duration * av_q2d(st->time_base));
		}
		pkv_printf(&o, ",\"disposition\":{\"attached_pic\":%d}}", (st->disposition & AV_DISPOSITION_ATTACHED_PIC) ? 1 : 0);
	}
	pkv_printf(&o, "],\"format\":{\"format_name\":\"%s\"", ic->iformat->name);
	if (ic->duration != AV_NOPTS_VALUE) {
		pkv_printf(&o, ",\"duration\":\"%f\"", ic->duration / (double)AV_TIME_BASE);
	}
	pkv_printf(&o, "}}");
	ret = 0;
done:
	if (o.len >= n && ret == 0) {
		ret = AVERROR(ENOMEM);
	}
	if (o.len < n) {
		json[o.len] = 0;
	}
	free(counts);
	av_packet_free(&pkt);
	avformat_close_input(&ic);
	pkv_log_end(lg);
	pkv_cur = NULL;
	return ret;
}

// A frame the graph output, waiting for pkv_next.
typedef struct {
	AVFrame *f;
	AVRational tb;
} pkv_qframe;

// pkv_dec follows fftools/ffmpeg.c (5.1) for one input file with one decoded video stream and
// a simple filter graph: its InputStream and InputFile timestamp bookkeeping (process_input,
// process_input_packet, decode_video), and its InputFilter reconfiguration (ifilter_send_frame).
struct pkv_dec {
	char *url;
	AVFormatContext *ic;
	AVStream *st;
	AVCodecContext *dec;
	AVPacket *pkt, *ipkt;
	AVFrame *frame;
	AVFilterGraph *graph;
	AVFilterContext *src, *sink;
	char fps[64];
	int threads;
	volatile int *cancel;
	pkv_log *log;

	// InputFilter
	int if_format, if_w, if_h;
	AVRational if_sar;
	int32_t *if_dm;

	// InputFile / InputStream
	int64_t ts_offset, last_ts;
	int wrap_done, saw_first_ts;
	int64_t dts, next_dts, pts, next_pts, nb_packets;
	int64_t *dts_buffer;
	int nb_dts_buffer;
	int demux_eof, finished, failed, out_eof;

	pkv_qframe *q;
	int qhead, qlen, qcap;
	AVFrame *held;
};

static int pkv_queue(pkv_dec *d, AVFrame *f, AVRational tb) {
	if (d->qhead + d->qlen == d->qcap) {
		if (d->qhead > 0) {
			memmove(d->q, d->q + d->qhead, d->qlen * sizeof *d->q);
			d->qhead = 0;
		} else {
			int c = d->qcap ? d->qcap * 2 : 8;
			pkv_qframe *q = realloc(d->q, c * sizeof *q);
			if (q == NULL) {
				return AVERROR(ENOMEM);
			}
			d->q = q;
			d->qcap = c;
		}
	}
	d->q[d->qhead + d->qlen].f = f;
	d->q[d->qhead + d->qlen].tb = tb;
	d->qlen++;
	return 0;
}

// pkv_reap moves every frame the sink holds to the queue (reap_filters).
static int pkv_reap(pkv_dec *d) {
	int ret;
	if (d->sink == NULL) {
		return 0;
	}
	for (;;) {
		AVFrame *f = av_frame_alloc();
		if (f == NULL) {
			return AVERROR(ENOMEM);
		}
		ret = av_buffersink_get_frame_flags(d->sink, f, AV_BUFFERSINK_FLAG_NO_REQUEST);
		if (ret < 0) {
			av_frame_free(&f);
			return ret == AVERROR(EAGAIN) || ret == AVERROR_EOF ? 0 : ret;
		}
		if ((ret = pkv_queue(d, f, av_buffersink_get_time_base(d->sink))) < 0) {
			av_frame_free(&f);
			return ret;
		}
	}
}

static double pkv_rotation(const int32_t *dm) {
	double theta = 0;
	if (dm != NULL) {
		theta = -round(av_display_rotation_get(dm));
	}
	theta -= 360 * floor(theta / 360 + 0.9 / 360);
	if (fabs(theta - 90 * round(theta / 90)) > 2) {
		av_log(NULL, AV_LOG_WARNING, "Odd rotation angle.\n"
					     "If you want to help, upload a sample "
					     "of this file to https://streams.videolan.org/upload/ "
					     "and contact the ffmpeg-devel mailing list. (ffmpeg-devel@ffmpeg.org)");
	}
	return theta;
}

static int pkv_insert(pkv_dec *d, AVFilterContext **last, const char *name, const char *args) {
	AVFilterContext *ctx;
	int ret = avfilter_graph_create_filter(&ctx, avfilter_get_by_name(name), name, args, NULL, d->graph);
	if (ret < 0) {
		return ret;
	}
	if ((ret = avfilter_link(*last, 0, ctx, 0)) < 0) {
		return ret;
	}
	*last = ctx;
	return 0;
}

// pkv_configure builds the graph the command line builds for
// -vf [fps=F,]showinfo -autoscale 0 -pix_fmt rgb24 (configure_filtergraph): buffer, the
// autorotation filters, [fps], format=rgb24, buffersink; graph threads = -filter_threads; no
// scale_sws_opts (ffmpeg 5.1's default sws_dict is empty). showinfo only logs.
static int pkv_configure(pkv_dec *d) {
	char args[512], name[128], th[16];
	AVFilterContext *last;
	AVRational tb = d->st->time_base, fr, sar;
	const int32_t *dm;
	const AVPixFmtDescriptor *desc;
	int ret;

	avfilter_graph_free(&d->graph);
	d->src = d->sink = NULL;
	if ((d->graph = avfilter_graph_alloc()) == NULL) {
		return AVERROR(ENOMEM);
	}
	snprintf(th, sizeof th, "%d", d->threads);
	if ((ret = av_opt_set(d->graph, "threads", th, 0)) < 0) {
		return ret;
	}
	fr = av_guess_frame_rate(d->ic, d->st, NULL);
	sar = d->if_sar;
	if (!sar.den) {
		sar = (AVRational){0, 1};
	}
	snprintf(args, sizeof args, "video_size=%dx%d:pix_fmt=%d:time_base=%d/%d:pixel_aspect=%d/%d", d->if_w, d->if_h,
		 d->if_format, tb.num, tb.den, sar.num, sar.den);
	if (fr.num && fr.den) {
		size_t l = strlen(args);
		snprintf(args + l, sizeof args - l, ":frame_rate=%d/%d", fr.num, fr.den);
	}
	snprintf(name, sizeof name, "graph 0 input from stream 0:%d", d->st->index);
	if ((ret = avfilter_graph_create_filter(&d->src, avfilter_get_by_name("buffer"), name, args, NULL, d->graph)) < 0) {
		return ret;
	}
	last = d->src;
	desc = av_pix_fmt_desc_get(d->if_format);
	if (desc != NULL && !(desc->flags & AV_PIX_FMT_FLAG_HWACCEL)) {
		double theta;
		dm = d->if_dm;
		if (dm == NULL) {
			dm = (const int32_t *)av_stream_get_side_data(d->st, AV_PKT_DATA_DISPLAYMATRIX, NULL);
		}
		theta = pkv_rotation(dm);
		ret = 0;
		if (fabs(theta - 90) < 1.0) {
			ret = pkv_insert(d, &last, "transpose", dm[3] > 0 ? "cclock_flip" : "clock");
		} else if (fabs(theta - 180) < 1.0) {
			if (dm[0] < 0) {
				ret = pkv_insert(d, &last, "hflip", NULL);
			}
			if (ret >= 0 && dm[4] < 0) {
				ret = pkv_insert(d, &last, "vflip", NULL);
			}
		} else if (fabs(theta - 270) < 1.0) {
			ret = pkv_insert(d, &last, "transpose", dm[3] < 0 ? "clock_flip" : "cclock");
		} else if (fabs(theta) > 1.0) {
			char rot[64];
			snprintf(rot, sizeof rot, "%f*PI/180", theta);
			ret = pkv_insert(d, &last, "rotate", rot);
		} else if (fabs(theta) < 1.0) {
			if (dm != NULL && dm[4] < 0) {
				ret = pkv_insert(d, &last, "vflip", NULL);
			}
		}
		if (ret < 0) {
			return ret;
		}
	}
	if (d->fps[0] != 0) {
		AVFilterContext *f;
		if ((ret = avfilter_graph_create_filter(&f, avfilter_get_by_name("fps"), "Parsed_fps_0", d->fps, NULL, d->graph)) < 0) {
			return ret;
		}
		if ((ret = avfilter_link(last, 0, f, 0)) < 0) {
			return ret;
		}
		last = f;
	}
	if ((ret = avfilter_graph_create_filter(&d->sink, avfilter_get_by_name("buffersink"), "out_0_0", NULL, NULL, d->graph)) < 0) {
		return ret;
	}
	if ((ret = pkv_insert(d, &last, "format", "rgb24")) < 0) {
		return ret;
	}
	if ((ret = avfilter_link(last, 0, d->sink, 0)) < 0) {
		return ret;
	}
	return avfilter_graph_config(d->graph, NULL);
}

// pkv_send_frame is ifilter_send_frame (one filter, no hardware frames). A frame decoded after
// an error-level message is not filtered: the command line's reader would stop before it.
static int pkv_send_frame(pkv_dec *d, AVFrame *frame) {
	AVFrameSideData *sd;
	int need_reinit, ret;
	if (d->log->errors > 0) {
		return 0;
	}
	need_reinit = d->if_format != frame->format || d->if_w != frame->width || d->if_h != frame->height;
	if ((sd = av_frame_get_side_data(frame, AV_FRAME_DATA_DISPLAYMATRIX)) != NULL) {
		if (d->if_dm == NULL || memcmp(sd->data, d->if_dm, sizeof(int32_t) * 9)) {
			need_reinit = 1;
		}
	} else if (d->if_dm != NULL) {
		need_reinit = 1;
	}
	if (need_reinit) {
		d->if_format = frame->format;
		d->if_w = frame->width;
		d->if_h = frame->height;
		d->if_sar = frame->sample_aspect_ratio;
		av_freep(&d->if_dm);
		if (sd != NULL) {
			d->if_dm = av_memdup(sd->data, sizeof(int32_t) * 9);
		}
	}
	if (need_reinit || d->graph == NULL) {
		char msg[256];
		if ((ret = pkv_reap(d)) < 0) {
			pkv_errstr(ret, msg, sizeof msg);
			av_log(NULL, AV_LOG_ERROR, "Error while filtering: %s\n", msg);
			return ret;
		}
		if ((ret = pkv_configure(d)) < 0) {
			av_log(NULL, AV_LOG_ERROR, "Error reinitializing filters!\n");
			return ret;
		}
	}
	ret = av_buffersrc_add_frame_flags(d->src, frame, AV_BUFFERSRC_FLAG_PUSH);
	if (ret < 0) {
		if (ret != AVERROR_EOF) {
			char msg[256];
			pkv_errstr(ret, msg, sizeof msg);
			av_log(NULL, AV_LOG_ERROR, "Error while filtering: %s\n", msg);
		}
		return ret;
	}
	return pkv_reap(d);
}

// pkv_decode_video is decode_video: one decode call with the command line's dts on the packet.
static int pkv_decode_video(pkv_dec *d, AVPacket *pkt, int *got_output, int64_t *duration_pts, int eof, int *decode_failed) {
	AVFrame *fr = d->frame;
	int ret = 0, err = 0;
	int64_t best, dts = AV_NOPTS_VALUE;

	*got_output = 0;
	if (!eof && pkt != NULL && pkt->size == 0) {
		return 0;
	}
	if (d->dts != AV_NOPTS_VALUE) {
		dts = av_rescale_q(d->dts, pkv_tbq, d->st->time_base);
	}
	if (pkt != NULL) {
		pkt->dts = dts;
	}
	if (eof) {
		int64_t *b = realloc(d->dts_buffer, (d->nb_dts_buffer + 1) * sizeof *b);
		if (b == NULL) {
			return AVERROR(ENOMEM);
		}
		d->dts_buffer = b;
		d->dts_buffer[d->nb_dts_buffer++] = dts;
	}
	// decode()
	if (pkt != NULL) {
		ret = avcodec_send_packet(d->dec, pkt);
		if (ret < 0 && ret != AVERROR_EOF) {
			*decode_failed = 1;
			return ret;
		}
	}
	ret = avcodec_receive_frame(d->dec, fr);
	if (ret < 0 && ret != AVERROR(EAGAIN)) {
		*decode_failed = 1;
		return ret;
	}
	if (ret >= 0) {
		*got_output = 1;
	}
	ret = ret == AVERROR(EAGAIN) ? 0 : ret;

	if (d->st->codecpar->video_delay < d->dec->has_b_frames) {
		if (d->dec->codec_id == AV_CODEC_ID_H264) {
			d->st->codecpar->video_delay = d->dec->has_b_frames;
		} else {
			av_log(d->dec, AV_LOG_WARNING,
			       "video_delay is larger in decoder than demuxer %d > %d.\n"
			       "If you want to help, upload a sample "
			       "of this file to https://streams.videolan.org/upload/ "
			       "and contact the ffmpeg-devel mailing list. (ffmpeg-devel@ffmpeg.org)\n",
			       d->dec->has_b_frames, d->st->codecpar->video_delay);
		}
	}
	// check_decode_result
	if (*got_output && (fr->decode_error_flags || (fr->flags & AV_FRAME_FLAG_CORRUPT))) {
		av_log(NULL, AV_LOG_WARNING, "%s: corrupt decoded frame in stream %d\n", d->url, d->st->index);
	}
	if (!*got_output || ret < 0) {
		return ret;
	}
	best = fr->best_effort_timestamp;
	*duration_pts = fr->pkt_duration;
	if (eof && best == AV_NOPTS_VALUE && d->nb_dts_buffer > 0) {
		best = d->dts_buffer[0];
		memmove(d->dts_buffer, d->dts_buffer + 1, (d->nb_dts_buffer - 1) * sizeof *d->dts_buffer);
		d->nb_dts_buffer--;
	}
	if (best != AV_NOPTS_VALUE) {
		int64_t ts = av_rescale_q(fr->pts = best, d->st->time_base, pkv_tbq);
		if (ts != AV_NOPTS_VALUE) {
			d->next_pts = d->pts = ts;
		}
	}
	if (d->st->sample_aspect_ratio.num) {
		fr->sample_aspect_ratio = d->st->sample_aspect_ratio;
	}
	err = pkv_send_frame(d, fr);
	if (err == AVERROR_EOF) {
		err = 0;
	}
	if (err < 0) {
		char msg[256];
		pkv_errstr(err, msg, sizeof msg);
		av_log(NULL, AV_LOG_ERROR, "Failed to inject frame into filter network: %s\n", msg);
	}
	av_frame_unref(fr);
	return err < 0 ? err : ret;
}

// pkv_process_packet is process_input_packet for the decoded video stream; pkt NULL drains.
static int pkv_process_packet(pkv_dec *d, const AVPacket *pkt) {
	int ret = 0, repeating = 0, eof_reached = 0;
	AVPacket *avpkt = d->ipkt;
	AVStream *st = d->st;

	if (!d->saw_first_ts) {
		d->dts = st->avg_frame_rate.num ? -d->dec->has_b_frames * AV_TIME_BASE / av_q2d(st->avg_frame_rate) : 0;
		d->pts = 0;
		d->saw_first_ts = 1;
	}
	if (d->next_dts == AV_NOPTS_VALUE) {
		d->next_dts = d->dts;
	}
	if (d->next_pts == AV_NOPTS_VALUE) {
		d->next_pts = d->pts;
	}
	if (pkt != NULL) {
		av_packet_unref(avpkt);
		if ((ret = av_packet_ref(avpkt, pkt)) < 0) {
			return ret;
		}
	}
	if (pkt != NULL && pkt->dts != AV_NOPTS_VALUE) {
		d->next_dts = d->dts = av_rescale_q(pkt->dts, st->time_base, pkv_tbq);
	}
	for (;;) {
		int64_t duration_dts = 0, duration_pts = 0;
		int got_output = 0, decode_failed = 0;
		d->pts = d->next_pts;
		d->dts = d->next_dts;
		ret = pkv_decode_video(d, repeating ? NULL : avpkt, &got_output, &duration_pts, pkt == NULL, &decode_failed);
		if (!repeating || pkt == NULL || got_output) {
			if (pkt != NULL && pkt->duration) {
				duration_dts = av_rescale_q(pkt->duration, st->time_base, pkv_tbq);
			} else if (d->dec->framerate.num != 0 && d->dec->framerate.den != 0) {
				AVCodecParserContext *pc = av_stream_get_parser(st);
				int ticks = pc != NULL ? pc->repeat_pict + 1 : d->dec->ticks_per_frame;
				duration_dts = ((int64_t)AV_TIME_BASE * d->dec->framerate.den * ticks) / d->dec->framerate.num /
					       d->dec->ticks_per_frame;
			}
			if (d->dts != AV_NOPTS_VALUE && duration_dts) {
				d->next_dts += duration_dts;
			} else {
				d->next_dts = AV_NOPTS_VALUE;
			}
		}
		if (got_output) {
			if (duration_pts > 0) {
				d->next_pts += av_rescale_q(duration_pts, st->time_base, pkv_tbq);
			} else {
				d->next_pts += duration_dts;
			}
		}
		av_packet_unref(avpkt);
		if (ret == AVERROR_EOF) {
			eof_reached = 1;
			break;
		}
		if (ret < 0) {
			char msg[256];
			pkv_errstr(ret, msg, sizeof msg);
			if (decode_failed) {
				av_log(NULL, AV_LOG_ERROR, "Error while decoding stream #0:%d: %s\n", st->index, msg);
			} else {
				av_log(NULL, AV_LOG_FATAL, "Error while processing the decoded data for stream #0:%d\n", st->index);
				d->failed = 1;
			}
			break;
		}
		if (!got_output || pkt == NULL) {
			break;
		}
		repeating = 1;
	}
	if (pkt == NULL && eof_reached) {
		// send_filter_eof
		int64_t pts = av_rescale_q_rnd(d->pts, pkv_tbq, st->time_base, AV_ROUND_NEAR_INF | AV_ROUND_PASS_MINMAX);
		d->finished = 1;
		if (d->src != NULL && d->log->errors == 0) {
			if ((ret = av_buffersrc_close(d->src, pts, AV_BUFFERSRC_FLAG_PUSH)) < 0) {
				av_log(NULL, AV_LOG_FATAL, "Error marking filters as finished\n");
				d->failed = 1;
				return ret;
			}
			if ((ret = pkv_reap(d)) < 0) {
				d->failed = 1;
				return ret;
			}
		}
	}
	return !eof_reached;
}

// pkv_step is one process_input: read a packet and decode it, or drain at the end.
static void pkv_step(pkv_dec *d) {
	AVPacket *pkt = d->pkt;
	AVFormatContext *is = d->ic;
	AVStream *st = d->st;
	int64_t pkt_dts;
	int ret, i;

	if (!d->demux_eof) {
		ret = av_read_frame(is, pkt);
		if (ret == AVERROR(EAGAIN)) {
			return;
		}
		if (ret < 0) {
			if (ret != AVERROR_EOF) {
				pkv_print_error(is->url, ret);
			}
			d->demux_eof = 1;
			return;
		}
	} else {
		pkv_process_packet(d, NULL);
		return;
	}
	if (pkt->stream_index != st->index) {
		av_packet_unref(pkt);
		return;
	}
	d->nb_packets++;
	if (pkt->flags & AV_PKT_FLAG_CORRUPT) {
		av_log(NULL, AV_LOG_WARNING, "%s: corrupt input packet in stream %d\n", is->url, pkt->stream_index);
	}
	if (!d->wrap_done && is->start_time != AV_NOPTS_VALUE && st->pts_wrap_bits < 64) {
		int64_t stime, stime2;
		if (d->next_dts == AV_NOPTS_VALUE && d->ts_offset == -is->start_time && (is->iformat->flags & AVFMT_TS_DISCONT)) {
			int64_t new_start_time = INT64_MAX;
			unsigned j;
			for (j = 0; j < is->nb_streams; j++) {
				AVStream *s = is->streams[j];
				if (s->discard == AVDISCARD_ALL || s->start_time == AV_NOPTS_VALUE) {
					continue;
				}
				new_start_time = FFMIN(new_start_time, av_rescale_q(s->start_time, s->time_base, pkv_tbq));
			}
			if (new_start_time > is->start_time) {
				d->ts_offset = -new_start_time;
			}
		}
		stime = av_rescale_q(is->start_time, pkv_tbq, st->time_base);
		stime2 = stime + (1ULL << st->pts_wrap_bits);
		d->wrap_done = 1;
		if (stime2 > stime && pkt->dts != AV_NOPTS_VALUE && pkt->dts > stime + (1LL << (st->pts_wrap_bits - 1))) {
			pkt->dts -= 1ULL << st->pts_wrap_bits;
			d->wrap_done = 0;
		}
		if (stime2 > stime && pkt->pts != AV_NOPTS_VALUE && pkt->pts > stime + (1LL << (st->pts_wrap_bits - 1))) {
			pkt->pts -= 1ULL << st->pts_wrap_bits;
			d->wrap_done = 0;
		}
	}
	if (d->nb_packets == 1) {
		for (i = 0; i < st->nb_side_data; i++) {
			AVPacketSideData *sd = &st->side_data[i];
			uint8_t *dst;
			if (sd->type == AV_PKT_DATA_DISPLAYMATRIX || av_packet_get_side_data(pkt, sd->type, NULL) != NULL) {
				continue;
			}
			if ((dst = av_packet_new_side_data(pkt, sd->type, sd->size)) == NULL) {
				d->failed = 1;
				av_packet_unref(pkt);
				return;
			}
			memcpy(dst, sd->data, sd->size);
		}
	}
	if (pkt->dts != AV_NOPTS_VALUE) {
		pkt->dts += av_rescale_q(d->ts_offset, pkv_tbq, st->time_base);
	}
	if (pkt->pts != AV_NOPTS_VALUE) {
		pkt->pts += av_rescale_q(d->ts_offset, pkv_tbq, st->time_base);
	}
	pkt_dts = av_rescale_q_rnd(pkt->dts, st->time_base, pkv_tbq, AV_ROUND_NEAR_INF | AV_ROUND_PASS_MINMAX);
	if (pkt_dts != AV_NOPTS_VALUE && d->next_dts == AV_NOPTS_VALUE && (is->iformat->flags & AVFMT_TS_DISCONT) &&
	    d->last_ts != AV_NOPTS_VALUE) {
		int64_t delta = pkt_dts - d->last_ts;
		if (delta < -10LL * AV_TIME_BASE || delta > 10LL * AV_TIME_BASE) {
			d->ts_offset -= delta;
			pkt->dts -= av_rescale_q(delta, pkv_tbq, st->time_base);
			if (pkt->pts != AV_NOPTS_VALUE) {
				pkt->pts -= av_rescale_q(delta, pkv_tbq, st->time_base);
			}
		}
	}
	// ifile->duration is 0 without -stream_loop.
	pkt_dts = av_rescale_q_rnd(pkt->dts, st->time_base, pkv_tbq, AV_ROUND_NEAR_INF | AV_ROUND_PASS_MINMAX);
	if (pkt_dts != AV_NOPTS_VALUE && d->next_dts != AV_NOPTS_VALUE) {
		int64_t delta = pkt_dts - d->next_dts;
		if (is->iformat->flags & AVFMT_TS_DISCONT) {
			if (delta < -10LL * AV_TIME_BASE || delta > 10LL * AV_TIME_BASE ||
			    pkt_dts + AV_TIME_BASE / 10 < FFMAX(d->pts, d->dts)) {
				d->ts_offset -= delta;
				pkt->dts -= av_rescale_q(delta, pkv_tbq, st->time_base);
				if (pkt->pts != AV_NOPTS_VALUE) {
					pkt->pts -= av_rescale_q(delta, pkv_tbq, st->time_base);
				}
			}
		} else {
			if (delta < -1LL * 3600 * 30 * AV_TIME_BASE || delta > 1LL * 3600 * 30 * AV_TIME_BASE) {
				av_log(NULL, AV_LOG_WARNING, "DTS %" PRId64 ", next:%" PRId64 " st:%d invalid dropping\n", pkt->dts,
				       d->next_dts, pkt->stream_index);
				pkt->dts = AV_NOPTS_VALUE;
			}
			if (pkt->pts != AV_NOPTS_VALUE) {
				int64_t pkt_pts = av_rescale_q(pkt->pts, st->time_base, pkv_tbq);
				delta = pkt_pts - d->next_dts;
				if (delta < -1LL * 3600 * 30 * AV_TIME_BASE || delta > 1LL * 3600 * 30 * AV_TIME_BASE) {
					av_log(NULL, AV_LOG_WARNING, "PTS %" PRId64 ", next:%" PRId64 " invalid dropping st:%d\n", pkt->pts,
					       d->next_dts, pkt->stream_index);
					pkt->pts = AV_NOPTS_VALUE;
				}
			}
		}
	}
	if (pkt->dts != AV_NOPTS_VALUE) {
		d->last_ts = av_rescale_q(pkt->dts, st->time_base, pkv_tbq);
	}
	pkv_process_packet(d, pkt);
	av_packet_unref(pkt);
}

pkv_dec *pkv_open(const char *url, int stream, const char *fps, int threads, volatile int *cancel, char *err, size_t n) {
	pkv_dec *d;
	const AVCodec *codec;
	AVDictionary *opts = NULL;
	char th[16];
	unsigned i;
	int ret;
	if (n > 0) {
		err[0] = 0;
	}
	d = calloc(1, sizeof *d);
	if (d == NULL || (d->log = pkv_log_new("non monotonically increasing dts to muxer")) == NULL ||
	    (d->url = strdup(url)) == NULL) {
		snprintf(err, n, "out of memory");
		goto fail;
	}
	pkv_cur = d->log;
	snprintf(d->fps, sizeof d->fps, "%s", fps);
	d->threads = threads;
	d->cancel = cancel;
	d->if_format = -1;
	d->dts = d->next_dts = d->pts = d->next_pts = d->last_ts = AV_NOPTS_VALUE;
	if ((ret = pkv_open_input(&d->ic, url, cancel)) < 0) {
		pkv_print_error(url, ret);
		goto fail_ret;
	}
	snprintf(th, sizeof th, "%d", threads);
	// The command line's -threads is a codec option: stream probing uses it too.
	{
		AVDictionary **sopts = calloc(d->ic->nb_streams + 1, sizeof *sopts);
		if (sopts == NULL) {
			snprintf(err, n, "out of memory");
			goto fail;
		}
		for (i = 0; i < d->ic->nb_streams; i++) {
			av_dict_set(&sopts[i], "threads", th, 0);
		}
		ret = avformat_find_stream_info(d->ic, sopts);
		for (i = 0; i < d->ic->nb_streams; i++) {
			av_dict_free(&sopts[i]);
		}
		free(sopts);
		if (ret < 0) {
			pkv_print_error(url, ret);
			goto fail_ret;
		}
	}
	if (d->ic->start_time != AV_NOPTS_VALUE) {
		d->ts_offset = -d->ic->start_time;
	}
	if (stream < 0 || (unsigned)stream >= d->ic->nb_streams) {
		snprintf(err, n, "no stream %d", stream);
		goto fail;
	}
	for (i = 0; i < d->ic->nb_streams; i++) {
		d->ic->streams[i]->discard = (int)i == stream ? AVDISCARD_NONE : AVDISCARD_ALL;
	}
	d->st = d->ic->streams[stream];
	codec = avcodec_find_decoder(d->st->codecpar->codec_id);
	if (codec == NULL) {
		snprintf(err, n, "no decoder for stream %d", stream);
		goto fail;
	}
	if ((d->dec = avcodec_alloc_context3(codec)) == NULL || (d->pkt = av_packet_alloc()) == NULL ||
	    (d->ipkt = av_packet_alloc()) == NULL || (d->frame = av_frame_alloc()) == NULL) {
		snprintf(err, n, "out of memory");
		goto fail;
	}
	if ((ret = avcodec_parameters_to_context(d->dec, d->st->codecpar)) < 0) {
		goto fail_ret;
	}
	// add_input_streams and init_input_stream
	d->dec->framerate = d->st->avg_frame_rate;
	d->dec->pkt_timebase = d->st->time_base;
	av_dict_set(&opts, "threads", th, 0);
	ret = avcodec_open2(d->dec, codec, &opts);
	av_dict_free(&opts);
	if (ret < 0) {
		char msg[256];
		pkv_errstr(ret, msg, sizeof msg);
		snprintf(err, n, "Error while opening decoder for input stream #0:%d : %s", stream, msg);
		goto fail;
	}
	pkv_cur = NULL;
	return d;
fail_ret:
	if (err[0] == 0) {
		pkv_errstr(ret, err, n);
	}
fail:
	if (d != NULL) {
		pkv_cur = NULL;
		// the log's lines say more than err: the caller reads them from pkv_dec_log
		if (d->log != NULL && d->log->len > 0) {
			size_t k = 0;
			char *nl;
			while ((nl = memchr(d->log->buf + k, '\n', d->log->len - k)) != NULL && (size_t)(nl - d->log->buf) + 1 < d->log->len) {
				k = (size_t)(nl - d->log->buf) + 1;
			}
			snprintf(err, n, "%.*s", (int)(d->log->len - k - (d->log->buf[d->log->len - 1] == '\n')), d->log->buf + k);
		}
		pkv_close(d);
	}
	pkv_cur = NULL;
	return NULL;
}

int pkv_next(pkv_dec *d, pkv_frame *f) {
	int rc;
	pkv_cur = d->log;
	av_frame_free(&d->held);
	for (;;) {
		if (d->qlen > 0) {
			pkv_qframe *q = &d->q[d->qhead];
			d->held = q->f;
			f->w = q->f->width;
			f->h = q->f->height;
			f->pts = q->f->pts == AV_NOPTS_VALUE ? INT64_MIN : q->f->pts;
			f->tb_num = q->tb.num;
			f->tb_den = q->tb.den;
			d->qhead++;
			d->qlen--;
			if (d->qlen == 0) {
				d->qhead = 0;
			}
			rc = PKV_FRAME;
			break;
		}
		if (d->log->errors > 0) {
			rc = PKV_LOGGED_ERROR;
			break;
		}
		if (d->failed) {
			rc = PKV_FAIL;
			break;
		}
		if (d->cancel != NULL && __atomic_load_n(d->cancel, __ATOMIC_RELAXED)) {
			rc = PKV_INTERRUPTED;
			break;
		}
		if (d->out_eof || (d->finished && d->graph == NULL)) {
			rc = PKV_END;
			break;
		}
		// transcode_step: the command line asks the graph for output before reading input.
		if (d->graph != NULL) {
			int ret = avfilter_graph_request_oldest(d->graph);
			if (ret >= 0 || ret == AVERROR_EOF) {
				if (ret == AVERROR_EOF) {
					d->out_eof = 1;
				}
				if ((ret = pkv_reap(d)) < 0) {
					d->failed = 1;
				}
				continue;
			}
			if (ret != AVERROR(EAGAIN)) {
				d->failed = 1;
				continue;
			}
			if (d->finished) {
				d->out_eof = 1; // no input left to read
				continue;
			}
		}
		pkv_step(d);
	}
	pkv_log_end(d->log);
	pkv_cur = NULL;
	return rc;
}

void pkv_copy(pkv_dec *d, uint8_t *dst) {
	AVFrame *f = d->held;
	int y, row = f->width * 3;
	for (y = 0; y < f->height; y++) {
		memcpy(dst + (size_t)y * row, f->data[0] + (ptrdiff_t)y * f->linesize[0], row);
	}
	av_frame_free(&d->held);
}

pkv_log *pkv_dec_log(pkv_dec *d) { return d->log; }

void pkv_close(pkv_dec *d) {
	if (d == NULL) {
		return;
	}
	pkv_cur = d->log;
	av_frame_free(&d->held);
	while (d->qlen > 0) {
		av_frame_free(&d->q[d->qhead].f);
		d->qhead++;
		d->qlen--;
	}
	free(d->q);
	avfilter_graph_free(&d->graph);
	av_frame_free(&d->frame);
	av_packet_free(&d->pkt);
	av_packet_free(&d->ipkt);
	avcodec_free_context(&d->dec);
	avformat_close_input(&d->ic);
	av_freep(&d->if_dm);
	free(d->dts_buffer);
	free(d->url);
	pkv_cur = NULL;
	pkv_log_free(d->log);
	free(d);
}
