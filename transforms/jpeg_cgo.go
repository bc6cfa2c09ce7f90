//go:build cgo

package transforms

/*
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <jpeglib.h>

// pk_err carries libjpeg's fatal errors back across a longjmp. Warnings (corrupt-data
// messages libjpeg can recover from) are counted but otherwise ignored, as Pillow ignores them.
typedef struct {
	struct jpeg_error_mgr pub;
	jmp_buf jb;
	char msg[JMSG_LENGTH_MAX];
	int too_many_scans;
} pk_err;

// PK_MAX_SCANS bounds the scans of a progressive JPEG. Each scan can make libjpeg pass over
// the whole coefficient buffer, so a small file with a huge number of scans takes very long
// to decode (a known denial of service; libjpeg-turbo's djpeg has -maxscans for it). Real
// encoders write about 10.
#define PK_MAX_SCANS 1000

static void pk_progress(j_common_ptr c) {
	if (c->is_decompressor && ((j_decompress_ptr)c)->input_scan_number > PK_MAX_SCANS) {
		pk_err *e = (pk_err *)c->err;
		e->too_many_scans = 1;
		snprintf(e->msg, sizeof e->msg, "more than %d progressive scans", PK_MAX_SCANS);
		longjmp(e->jb, 1);
	}
}

// pk_src is an in-memory source. When libjpeg asks for bytes past the end of the data the
// file is truncated: remember that, and feed a fake EOI so libjpeg stops cleanly.
typedef struct {
	struct jpeg_source_mgr pub;
	int eof;
} pk_src;

static const JOCTET pk_fake_eoi[2] = {0xFF, JPEG_EOI};

static void pk_error_exit(j_common_ptr c) {
	pk_err *e = (pk_err *)c->err;
	(*c->err->format_message)(c, e->msg);
	longjmp(e->jb, 1);
}

static void pk_output_message(j_common_ptr c) { (void)c; }

static void pk_init_source(j_decompress_ptr d) { (void)d; }

static boolean pk_fill_input_buffer(j_decompress_ptr d) {
	pk_src *s = (pk_src *)d->src;
	s->eof = 1;
	s->pub.next_input_byte = pk_fake_eoi;
	s->pub.bytes_in_buffer = 2;
	return TRUE;
}

static void pk_skip_input_data(j_decompress_ptr d, long n) {
	pk_src *s = (pk_src *)d->src;
	if (n <= 0) return;
	if ((size_t)n > s->pub.bytes_in_buffer) {
		s->eof = 1;
		s->pub.next_input_byte = pk_fake_eoi;
		s->pub.bytes_in_buffer = 2;
		return;
	}
	s->pub.next_input_byte += n;
	s->pub.bytes_in_buffer -= (size_t)n;
}

static void pk_term_source(j_decompress_ptr d) { (void)d; }

// pk_info is what the header says, plus the output size at the requested scale.
typedef struct {
	int width, height;       // full size
	int comps;               // components in the file
	int colorspace;          // J_COLOR_SPACE of the file
	int out_width, out_height;
	int out_comps;
	int truncated;
	int warnings;
	int crop_x, crop_w;      // decoded columns, for a region decode
	int imcu_w;              // width of an iMCU in output pixels
	int max_h_samp, max_v_samp; // largest component sampling factors
	char msg[JMSG_LENGTH_MAX];
} pk_info;

// pk_setup prepares d for data; the caller must have set up err's jmp_buf. out_cs is the
// output colour space libjpeg converts to: RGB for one- and three-component files (libjpeg
// replicates grey, converts YCbCr with its accurate integer code), CMYK for four-component
// CMYK and YCCK files, as Pillow asks it.
static int pk_out_space(int comps) {
	switch (comps) {
	case 1: case 3: return JCS_RGB;
	case 4: return JCS_CMYK;
	}
	return -1;
}

// pk_jpeg_decode reads the header, and, when out is not NULL, decodes the image at scale
// 1/denom into out (rows of stride bytes). It returns 0 on success, 1 on a libjpeg error
// (info->msg), 2 for an unsupported component count, 3 when the output size does not fit
// outlen, 4 for a truncated file, 5 for too many progressive scans. Fancy upsampling and the accurate integer DCT (JDCT_ISLOW)
// are libjpeg's defaults; they are set explicitly because fidelity depends on them.
//
// When region is not 0, only output columns [rx0, rx1) and rows [ry0, ry1) are asked for:
// jpeg_crop_scanline widens the columns to iMCU boundaries (info->crop_x, crop_w say where
// the decoded columns are), jpeg_skip_scanlines skips the rows above and the rows below (which
// it still checks, see below). out then holds ry1-ry0 rows of crop_w pixels.
static int pk_jpeg_decode(const unsigned char *data, size_t len, int denom,
		unsigned char *out, size_t outlen, size_t stride, pk_info *info,
		int region, int rx0, int rx1, int ry0, int ry1) {
	struct jpeg_decompress_struct d;
	pk_err err;
	pk_src src;
	struct jpeg_progress_mgr prog;
	memset(&d, 0, sizeof d);
	memset(&src, 0, sizeof src);
	memset(&prog, 0, sizeof prog);
	d.err = jpeg_std_error(&err.pub);
	err.pub.error_exit = pk_error_exit;
	err.pub.output_message = pk_output_message;
	err.msg[0] = 0;
	err.too_many_scans = 0;
	// finishing is set once every scanline is out and jpeg_finish_decompress reads on to EOI:
	// a libjpeg error from there is damage (a marker libjpeg cannot read where the scan data
	// broke off), not truncation.
	volatile int finishing = 0;
	if (setjmp(err.jb)) {
		strncpy(info->msg, err.msg, sizeof info->msg - 1);
		info->truncated = finishing ? 0 : src.eof;
		jpeg_destroy_decompress(&d);
		return err.too_many_scans ? 5 : 1;
	}
	jpeg_create_decompress(&d);
	prog.progress_monitor = pk_progress;
	d.progress = &prog;
	src.pub.init_source = pk_init_source;
	src.pub.fill_input_buffer = pk_fill_input_buffer;
	src.pub.skip_input_data = pk_skip_input_data;
	src.pub.resync_to_restart = jpeg_resync_to_restart;
	src.pub.term_source = pk_term_source;
	src.pub.next_input_byte = data;
	src.pub.bytes_in_buffer = len;
	d.src = &src.pub;
	jpeg_read_header(&d, TRUE);
	info->width = (int)d.image_width;
	info->height = (int)d.image_height;
	info->comps = d.num_components;
	info->colorspace = (int)d.jpeg_color_space;
	info->max_h_samp = d.max_h_samp_factor;
	info->max_v_samp = d.max_v_samp_factor;
	int cs = pk_out_space(d.num_components);
	if (cs < 0) {
		jpeg_destroy_decompress(&d);
		return 2;
	}
	d.out_color_space = (J_COLOR_SPACE)cs;
	d.dct_method = JDCT_ISLOW;
	d.do_fancy_upsampling = TRUE;
	d.scale_num = 1;
	d.scale_denom = (unsigned int)(denom > 0 ? denom : 1);
	jpeg_calc_output_dimensions(&d);
	info->out_width = (int)d.output_width;
	info->out_height = (int)d.output_height;
	info->out_comps = d.out_color_components;
	if (out == NULL) {
		info->truncated = src.eof;
		jpeg_destroy_decompress(&d);
		return 0;
	}
	JDIMENSION y0 = 0, y1 = d.output_height;
	if (region) {
		if (rx0 < 0 || rx1 > (int)d.output_width || rx0 >= rx1 || ry0 < 0 ||
				ry1 > (int)d.output_height || ry0 >= ry1) {
			jpeg_destroy_decompress(&d);
			return 3;
		}
		y0 = (JDIMENSION)ry0;
		y1 = (JDIMENSION)ry1;
	}
	jpeg_start_decompress(&d);
	info->crop_x = 0;
	info->crop_w = (int)d.output_width;
	// Fancy upsampling treats the first and last column of a cropped scanline as image
	// edges, so pad the crop by one iMCU on each side: the columns asked for are then decoded
	// exactly as in the full image. info->imcu_w is the padding.
	info->imcu_w = d.max_h_samp_factor * d.min_DCT_scaled_size;
	if (region) {
		int pad = info->imcu_w;
		int cx0 = rx0 - pad > 0 ? rx0 - pad : 0;
		int cx1 = rx1 + pad < (int)d.output_width ? rx1 + pad : (int)d.output_width;
		if (cx0 > 0 || cx1 < (int)d.output_width) {
			JDIMENSION xoff = (JDIMENSION)cx0, w = (JDIMENSION)(cx1 - cx0);
			jpeg_crop_scanline(&d, &xoff, &w);
			info->crop_x = (int)xoff;
			info->crop_w = (int)w;
		}
	}
	if ((size_t)d.output_width * (size_t)d.out_color_components > stride ||
			stride * (size_t)(y1 - y0) > outlen) {
		jpeg_destroy_decompress(&d);
		return 3;
	}
	if (y0 > 0 && jpeg_skip_scanlines(&d, y0) != y0) {
		info->truncated = 1;
	}
	while (!info->truncated && d.output_scanline < y1) {
		JSAMPROW rows[16];
		JDIMENSION n = y1 - d.output_scanline, i;
		if (n > 16) n = 16;
		for (i = 0; i < n; i++) rows[i] = out + (size_t)(d.output_scanline - y0 + i) * stride;
		if (jpeg_read_scanlines(&d, rows, n) == 0) break;
		if (src.eof) break;
	}
	// A region decode goes on through the rows below the region so that a file truncated or
	// damaged there fails exactly as its full decode does (and as Pillow's does): skipped rows
	// are still entropy-decoded in a single-scan file (multi-scan files were read whole by
	// jpeg_start_decompress). jpeg_skip_scanlines does not decode when asked to skip to the
	// very end, so the last scanline is read, into a row from libjpeg's own pool.
	if (region && !info->truncated && !src.eof && d.output_scanline == y1 && y1 < d.output_height) {
		JDIMENSION rest = d.output_height - 1 - y1;
		if (rest > 0 && jpeg_skip_scanlines(&d, rest) != rest) info->truncated = 1;
		if (!info->truncated && !src.eof) {
			JSAMPARRAY last = (*d.mem->alloc_sarray)((j_common_ptr)&d, JPOOL_IMAGE,
				d.output_width * d.out_color_components, 1);
			if (jpeg_read_scanlines(&d, last, 1) != 1) info->truncated = 1;
		}
	}
	info->truncated |= src.eof;
	info->warnings = (int)err.pub.num_warnings;
	// Once every scanline is out, read on to EOI as Pillow does (jpeg_finish_decompress): scan
	// data that broke off at a marker libjpeg cannot read was only warned about while the rows
	// were decoded (the rest of the image filled in), and fails here, as it fails Pillow
	// ("broken data stream"). The data ending there instead is not an error: the source's fake
	// EOI ends the read, as for a missing EOI after complete scan data.
	if (!info->truncated && d.output_scanline == d.output_height) {
		finishing = 1;
		jpeg_finish_decompress(&d);
	}
	jpeg_destroy_decompress(&d);
	if (!info->truncated && d.output_scanline < y1) info->truncated = 1;
	return info->truncated ? 4 : 0;
}
*/
import "C"

import (
	"fmt"
	"image"
	"unsafe"
)

// jpegHeader is what the JPEG header says about an image.
type jpegHeader struct {
	w, h, comps int
	maxH, maxV  int // largest component sampling factors
}

const jpegCgo = true

func jpegCall(data []byte, denom int, out []byte, stride int) (C.pk_info, C.int) {
	return jpegCallRegion(data, denom, out, stride, nil)
}

func jpegCallRegion(data []byte, denom int, out []byte, stride int, r *image.Rectangle) (C.pk_info, C.int) {
	var info C.pk_info
	if len(data) == 0 {
		return info, 1
	}
	var outp *C.uchar
	if out != nil {
		outp = (*C.uchar)(unsafe.Pointer(&out[0]))
	}
	var region, x0, x1, y0, y1 C.int
	if r != nil {
		region, x0, x1, y0, y1 = 1, C.int(r.Min.X), C.int(r.Max.X), C.int(r.Min.Y), C.int(r.Max.Y)
	}
	rc := C.pk_jpeg_decode((*C.uchar)(unsafe.Pointer(&data[0])), C.size_t(len(data)), C.int(denom),
		outp, C.size_t(len(out)), C.size_t(stride), &info, region, x0, x1, y0, y1)
	return info, rc
}

func jpegError(info *C.pk_info, rc C.int) error {
	msg := C.GoString(&info.msg[0])
	switch {
	case rc == 4 || info.truncated != 0:
		return fmt.Errorf("%w: jpeg: file is truncated", ErrTruncated)
	case rc == 5:
		return fmt.Errorf("%w: jpeg: %s", ErrUnsupported, msg)
	case rc == 2:
		return fmt.Errorf("%w: jpeg: %d-component images", ErrUnsupported, int(info.comps))
	case rc == 3:
		return fmt.Errorf("jpeg: internal error: output buffer too small")
	}
	if msg == "" {
		msg = "invalid data"
	}
	return fmt.Errorf("%w: jpeg: %s", ErrCorrupt, msg)
}

// jpegDecodeHeader reads the header of a JPEG file.
func jpegDecodeHeader(data []byte) (jpegHeader, error) {
	info, rc := jpegCall(data, 1, nil, 0)
	if rc != 0 {
		return jpegHeader{}, jpegError(&info, rc)
	}
	return jpegHeader{w: int(info.width), h: int(info.height), comps: int(info.comps),
		maxH: int(info.max_h_samp), maxV: int(info.max_v_samp)}, nil
}

// jpegDecode decodes a JPEG file at scale 1/denom (denom 1, 2, 4 or 8) into an RGB image,
// with Pillow's colour handling: grey and YCbCr through libjpeg's own conversion to RGB,
// CMYK and YCCK as libjpeg's CMYK output, inverted (Pillow always assumes Adobe polarity,
// rawmode "CMYK;I") and then converted with Pillow's CMYK→RGB formula.
func jpegDecode(data []byte, denom int, s *DecodeScratch) (Image, error) {
	info, rc := jpegCall(data, denom, nil, 0)
	if rc != 0 {
		return Image{}, jpegError(&info, rc)
	}
	w, h, oc := int(info.out_width), int(info.out_height), int(info.out_comps)
	if w <= 0 || h <= 0 || (oc != 3 && oc != 4) {
		return Image{}, fmt.Errorf("%w: jpeg: bad output geometry %dx%dx%d", ErrCorrupt, w, h, oc)
	}
	stride := w * oc
	var buf []byte
	if oc == 4 {
		buf = s.tmp(stride * h)
	} else {
		buf = s.pix(stride * h)
	}
	info, rc = jpegCall(data, denom, buf, stride)
	if rc != 0 {
		return Image{}, jpegError(&info, rc)
	}
	if oc == 3 {
		return Image{W: w, H: h, C: 3, Pix: buf}, nil
	}
	pix := s.pix(w * h * 3)
	cmykInvertedToRGB(pix, buf)
	return Image{W: w, H: h, C: 3, Pix: pix}, nil
}

// jpegDecodeRegion decodes the rows r.Min.Y..r.Max.Y of a JPEG (at scale 1/denom) and at
// least the columns r.Min.X..r.Max.X: libjpeg widens them to whole iMCUs. It returns the
// decoded image and the column of the full image where it starts. Pixels are those of the
// full decode (TestDecodeRegionMatchesFull); rows past r.Max.Y are never decoded.
func jpegDecodeRegion(data []byte, denom int, r image.Rectangle, s *DecodeScratch) (Image, int, error) {
	info, rc := jpegCall(data, denom, nil, 0)
	if rc != 0 {
		return Image{}, 0, jpegError(&info, rc)
	}
	w, oc := int(info.out_width), int(info.out_comps)
	if oc != 3 && oc != 4 {
		return Image{}, 0, fmt.Errorf("%w: jpeg: bad output geometry %dx%d", ErrCorrupt, w, oc)
	}
	// Allocate for the full width: the cropped width is only known after start_decompress.
	stride := w * oc
	h := r.Dy()
	var buf []byte
	if oc == 4 {
		buf = s.tmp(stride * h)
	} else {
		buf = s.pix(stride * h)
	}
	info, rc = jpegCallRegion(data, denom, buf, stride, &r)
	if rc != 0 {
		return Image{}, 0, jpegError(&info, rc)
	}
	cx, cw, pad := int(info.crop_x), int(info.crop_w), int(info.imcu_w)
	// Keep exactly the columns asked for; they lie a whole iMCU inside the crop unless the
	// crop reaches the image edge.
	if r.Min.X < cx || r.Max.X > cx+cw ||
		(cx > 0 && r.Min.X-cx < pad) || (cx+cw < w && cx+cw-r.Max.X < pad) {
		return Image{}, 0, fmt.Errorf("jpeg: internal error: crop %d+%d does not cover %v with margin %d", cx, cw, r, pad)
	}
	rw := r.Dx()
	off := (r.Min.X - cx) * oc
	pix := s.pix(rw * h * 3)
	for y := 0; y < h; y++ {
		row := buf[y*stride+off : y*stride+off+rw*oc]
		dst := pix[y*rw*3 : (y+1)*rw*3]
		if oc == 4 {
			cmykInvertedToRGB(dst, row)
		} else {
			copy(dst, row)
		}
	}
	return Image{W: rw, H: h, C: 3, Pix: pix}, r.Min.X, nil
}

// cgoEnabled reports whether this build uses cgo (libjpeg-turbo, the AVX2 resize passes).
const cgoEnabled = true
