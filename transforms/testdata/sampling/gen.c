/* gen.c writes the JPEGs of this folder: unusual luma sampling factors, baseline and
 * progressive, for TestDecodeRegionSampling. Build and run (Debian: libjpeg62-turbo-dev):
 *
 *   cc -o /tmp/gen gen.c -ljpeg && sh -c 'for s in 2x4 4x2 1x4 4x1 3x1 1x3 2x2 1x2; do
 *     for p in 0 1; do for wh in "48 32" "100 96"; do
 *       set -- $wh; /tmp/gen s${s}_${1}x${2}_p$p.jpg $1 $2 ${s%x*} ${s#*x} $p; done; done; done'
 *
 * usage: gen OUT.jpg W H H0 V0 PROGRESSIVE (H0 x V0: the luma sampling factors; chroma 1x1)
 */
#include <stdio.h>
#include <stdlib.h>
#include <jpeglib.h>

int main(int argc, char **argv) {
	if (argc != 7) {
		fprintf(stderr, "usage: gen OUT.jpg W H H0 V0 PROGRESSIVE\n");
		return 2;
	}
	int w = atoi(argv[2]), h = atoi(argv[3]), h0 = atoi(argv[4]), v0 = atoi(argv[5]), prog = atoi(argv[6]);
	struct jpeg_compress_struct c;
	struct jpeg_error_mgr e;
	c.err = jpeg_std_error(&e);
	jpeg_create_compress(&c);
	FILE *f = fopen(argv[1], "wb");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	jpeg_stdio_dest(&c, f);
	c.image_width = w;
	c.image_height = h;
	c.input_components = 3;
	c.in_color_space = JCS_RGB;
	jpeg_set_defaults(&c);
	jpeg_set_quality(&c, 85, TRUE);
	c.comp_info[0].h_samp_factor = h0;
	c.comp_info[0].v_samp_factor = v0;
	for (int i = 1; i < 3; i++) c.comp_info[i].h_samp_factor = c.comp_info[i].v_samp_factor = 1;
	if (prog) jpeg_simple_progression(&c);
	jpeg_start_compress(&c, TRUE);
	unsigned char *row = malloc((size_t)w * 3);
	unsigned s = (unsigned)(w * 7 + h);
	while ((int)c.next_scanline < h) {
		int y = (int)c.next_scanline;
		for (int x = 0; x < w * 3; x++) {
			/* stripes with noise, and noisy blocks: detail in every iMCU */
			s = s * 1103515245u + 12345u;
			int v = ((x * 3 + y * 5) & 255) ^ ((s >> 16) & 31);
			if ((x / 9 + y / 7) % 3 == 0) v = (s >> 16) & 255;
			row[x] = (unsigned char)v;
		}
		jpeg_write_scanlines(&c, &row, 1);
	}
	jpeg_finish_compress(&c);
	fclose(f);
	free(row);
	return 0;
}
