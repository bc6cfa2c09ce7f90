/* CRC-32C (Castagnoli) for packer_reader, loaded with ctypes by _crc32c.py (plain C, no
 * Python.h, so ctypes releases the GIL for the whole call).
 *
 *   uint32_t packer_crc32c(uint32_t crc, const uint8_t *p, size_t n)
 *       CRC-32C of p[0..n) continuing crc, the finished CRC of the bytes before (0 to start):
 *       packer_crc32c(packer_crc32c(0, "12345", 5), "6789", 4) == 0xE3069283.
 *   int packer_crc32c_hw(void)      1 when packer_crc32c uses the SSE4.2 instruction.
 *   uint32_t packer_crc32c_portable(uint32_t crc, const uint8_t *p, size_t n)
 *       the table-driven path (slicing by 8), exported so tests can check it on any CPU.
 *
 * The SSE4.2 crc32 instruction has a latency of 3 cycles and a throughput of 1 per cycle, so
 * one dependent chain runs at a third of the possible speed. Large buffers are therefore cut
 * into runs of 3 * L bytes, each run computed as three independent streams of L bytes, and
 * the three register values joined with the "shift by L zero bytes" operator: CRC is linear
 * over GF(2), so reg(A || B) = shift_|B|(reg(A)) ^ reg_from_0(B). The operator is a 32x32 bit
 * matrix, applied as four 256-entry tables (one lookup per register byte), built at load time
 * for the two stream lengths used (LONG for big buffers, SHORT for the rest). This is the
 * well-known technique of Intel's white paper and Mark Adler's answer on Stack Overflow,
 * written anew here.
 *
 * Build: gcc -O2 -fPIC -shared -o libpackercrc.so _crc32c_hw.c
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define POLY 0x82F63B78u /* reflected Castagnoli polynomial */
#define LONG 8192        /* bytes per stream for big buffers */
#define SHORT 256        /* bytes per stream for medium buffers */

static uint32_t slice[8][256];     /* slicing-by-8 tables: slice[k][b] = b followed by k zero bytes */
static uint32_t zlong[4][256];     /* shift by LONG zero bytes, one table per register byte */
static uint32_t zshort[4][256];    /* shift by SHORT zero bytes */
static int use_hw;

static inline uint64_t load64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8); /* unaligned-safe; compiles to one load */
  return v;
}

/* Raw register update (no init or final xor), table-driven, slicing by 8 (little-endian
 * words; big-endian hosts take the byte loop). */
static uint32_t raw_sw(uint32_t r, const uint8_t *p, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w = load64(p) ^ r;
    r = slice[7][w & 0xff] ^ slice[6][(w >> 8) & 0xff] ^ slice[5][(w >> 16) & 0xff] ^
        slice[4][(w >> 24) & 0xff] ^ slice[3][(w >> 32) & 0xff] ^ slice[2][(w >> 40) & 0xff] ^
        slice[1][(w >> 48) & 0xff] ^ slice[0][w >> 56];
  }
#endif
  for (; n; p++, n--) r = slice[0][(r ^ *p) & 0xff] ^ (r >> 8);
  return r;
}

/* A 32x32 bit matrix as its 32 columns: m[i] is the image of the register value 1 << i. */
static uint32_t mat_apply(const uint32_t *m, uint32_t x) {
  uint32_t r = 0;
  for (int i = 0; x; i++, x >>= 1)
    if (x & 1) r ^= m[i];
  return r;
}

/* Four byte tables for the operator "advance the register over n zero bytes". */
static void make_shift(uint32_t t[4][256], size_t n) {
  uint32_t op[32], sq[32], tmp[32];
  for (int i = 0; i < 32; i++) op[i] = 1u << i; /* identity */
  for (int i = 0; i < 32; i++) sq[i] = raw_sw(1u << i, (const uint8_t *)"\0", 1); /* one zero byte */
  for (; n; n >>= 1) { /* op = sq^n by repeated squaring; sq runs through 1, 2, 4, ... bytes */
    if (n & 1) {
      for (int i = 0; i < 32; i++) tmp[i] = mat_apply(sq, op[i]);
      memcpy(op, tmp, sizeof op);
    }
    for (int i = 0; i < 32; i++) tmp[i] = mat_apply(sq, sq[i]);
    memcpy(sq, tmp, sizeof sq);
  }
  for (int k = 0; k < 4; k++)
    for (uint32_t b = 0; b < 256; b++) t[k][b] = mat_apply(op, b << (8 * k));
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>

static inline uint32_t shift(uint32_t t[4][256], uint32_t r) {
  return t[0][r & 0xff] ^ t[1][(r >> 8) & 0xff] ^ t[2][(r >> 16) & 0xff] ^ t[3][r >> 24];
}

/* Three streams of len bytes each (len a multiple of 8) over runs of 3 * len bytes, while
 * at least one whole run is left; returns the register and advances *pp, *pn. */
__attribute__((target("sse4.2,crc32"))) static uint32_t
runs_hw(uint32_t r, const uint8_t **pp, size_t *pn, size_t len, uint32_t t[4][256]) {
  const uint8_t *p = *pp;
  size_t n = *pn;
  while (n >= 3 * len) {
    uint64_t a = r, b = 0, c = 0;
    const uint8_t *end = p + len;
    for (; p < end; p += 8) {
      a = _mm_crc32_u64(a, load64(p));
      b = _mm_crc32_u64(b, load64(p + len));
      c = _mm_crc32_u64(c, load64(p + 2 * len));
    }
    r = shift(t, shift(t, (uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)c;
    p += 2 * len;
    n -= 3 * len;
  }
  *pp = p;
  *pn = n;
  return r;
}

__attribute__((target("sse4.2,crc32"))) static uint32_t raw_hw(uint32_t r, const uint8_t *p, size_t n) {
  for (; n && ((uintptr_t)p & 7); p++, n--) r = _mm_crc32_u8(r, *p); /* to an 8-byte boundary */
  r = runs_hw(r, &p, &n, LONG, zlong);
  r = runs_hw(r, &p, &n, SHORT, zshort);
  uint64_t w = r;
  for (; n >= 8; p += 8, n -= 8) w = _mm_crc32_u64(w, load64(p));
  r = (uint32_t)w;
  for (; n; p++, n--) r = _mm_crc32_u8(r, *p);
  return r;
}
#endif

__attribute__((constructor)) static void init(void) {
  for (uint32_t b = 0; b < 256; b++) {
    uint32_t c = b;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (c & 1 ? POLY : 0);
    slice[0][b] = c;
  }
  for (int k = 1; k < 8; k++)
    for (int b = 0; b < 256; b++) slice[k][b] = (slice[k - 1][b] >> 8) ^ slice[0][slice[k - 1][b] & 0xff];
  make_shift(zlong, LONG);
  make_shift(zshort, SHORT);
#if defined(__x86_64__)
  /* CPUID leaf 1, ECX bit 20: SSE4.2 (which has crc32). Asked directly rather than through
   * __builtin_cpu_supports, whose __cpu_model comes from the compiler's runtime library. */
  unsigned eax, ebx, ecx, edx;
  use_hw = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 20)) != 0;
#endif
}

uint32_t packer_crc32c_portable(uint32_t crc, const uint8_t *p, size_t n) {
  return ~raw_sw(~crc, p, n);
}

uint32_t packer_crc32c(uint32_t crc, const uint8_t *p, size_t n) {
#if defined(__x86_64__)
  if (use_hw) return ~raw_hw(~crc, p, n);
#endif
  return ~raw_sw(~crc, p, n);
}

int packer_crc32c_hw(void) { return use_hw; }
