#!/usr/bin/python3
"""Generate packer's checked-in decode corpus (transforms/testdata/corpus/).

Run with Debian's Python and Pillow:  /usr/bin/python3 transforms/testdata/make_corpus.py
The output is deterministic for a given Pillow/libjpeg-turbo/zlib; the files are checked in, so
tests never depend on re-running this script. Keep the corpus small (well under 1 MB).
"""
import io
import os
import random
import struct
import zlib

from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def photo(w, h, seed=1):
    """A smooth, photo-like RGB test pattern with some noise (exercises chroma upsampling)."""
    rnd = random.Random(seed)
    im = Image.new("RGB", (w, h))
    px = []
    for y in range(h):
        for x in range(w):
            r = (x * 255 // max(w - 1, 1) + rnd.randrange(24)) & 255
            g = (y * 255 // max(h - 1, 1) + rnd.randrange(24)) & 255
            b = ((x ^ y) * 7 + rnd.randrange(48)) & 255
            px.append((r, g, b))
    im.putdata(px)
    return im


def save(name, data):
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def enc(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def chunk(typ, data):
    c = struct.pack(">I", len(data)) + typ + data
    return c + struct.pack(">I", zlib.crc32(typ + data) & 0xFFFFFFFF)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]


def png_raw(w, h, bitdepth, colortype, rows, extra=b"", interlace=False):
    """Encode rows (list of lists of samples per pixel, each a tuple) as a PNG by hand.

    Supports 8- and 16-bit samples (and sub-byte grey/palette via packbits below)."""
    chans = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[colortype]

    def pack_row(pixels):
        if bitdepth >= 8:
            out = bytearray()
            for p in pixels:
                for s in p:
                    out += struct.pack(">H", s) if bitdepth == 16 else bytes([s])
            return bytes(out)
        out, acc, n = bytearray(), 0, 0
        for p in pixels:
            acc = (acc << bitdepth) | p[0]
            n += bitdepth
            if n == 8:
                out.append(acc)
                acc, n = 0, 0
        if n:
            out.append(acc << (8 - n))
        return bytes(out)

    raw = bytearray()
    if not interlace:
        for r in rows:
            raw += b"\x00" + pack_row(r)
    else:
        for x0, y0, dx, dy in ADAM7:
            for y in range(y0, h, dy):
                sub = [rows[y][x] for x in range(x0, w, dx)]
                if sub:
                    raw += b"\x00" + pack_row(sub)
    ihdr = struct.pack(">IIBBBBB", w, h, bitdepth, colortype, 0, 0, 1 if interlace else 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + extra +
            chunk(b"IDAT", zlib.compress(bytes(raw), 9)) + chunk(b"IEND", b""))


def main():
    os.makedirs(OUT, exist_ok=True)
    base = photo(67, 45)

    # JPEG: chroma subsampling, progressive, grey, odd sizes, extreme shapes.
    save("baseline-420.jpg", enc(base, "JPEG", quality=85, subsampling=2))
    save("baseline-422.jpg", enc(base, "JPEG", quality=85, subsampling=1))
    save("baseline-444.jpg", enc(base, "JPEG", quality=92, subsampling=0))
    save("progressive.jpg", enc(base, "JPEG", quality=80, progressive=True))
    save("grey.jpg", enc(base.convert("L"), "JPEG", quality=85))
    save("tiny-1x1.jpg", enc(photo(1, 1), "JPEG"))
    save("wide-4000x20.jpg", enc(photo(4000, 20, seed=2), "JPEG", quality=60))
    # CMYK: Pillow writes inverted (Adobe) CMYK with an APP14 marker, transform 0.
    cmyk = enc(base.convert("CMYK"), "JPEG", quality=90)
    save("cmyk-adobe.jpg", cmyk)
    i = cmyk.find(b"\xff\xee\x00\x0eAdobe")
    if i < 0:
        raise SystemExit("no Adobe marker in Pillow's CMYK JPEG")
    seglen = struct.unpack(">H", cmyk[i + 2:i + 4])[0]
    save("cmyk-noadobe.jpg", cmyk[:i] + cmyk[i + 2 + seglen:])
    # YCCK: the same data with the Adobe transform flag set to 2 (libjpeg then decodes YCCK).
    ycck = bytearray(cmyk)
    ycck[i + 2 + seglen - 1] = 2
    save("ycck.jpg", bytes(ycck))
    # EXIF orientation 6 (rotate 90 CW to display), on a non-square image.
    ex = Image.Exif()
    ex[0x0112] = 6
    save("exif-rotate6.jpg", enc(photo(40, 24, seed=3), "JPEG", exif=ex.tobytes()))
    # The Orientation entry with a count of 2 (SHORTs 6 and 1, held inline in the entry):
    r6 = enc(photo(40, 24, seed=3), "JPEG", exif=ex.tobytes())
    entry = b"\x01\x12\x00\x03\x00\x00\x00\x01\x00\x06\x00\x00"
    assert r6.count(entry) == 1
    # Pillow warns and takes the first value: rotated as exif-rotate6.jpg.
    save("exif-count2.jpg", r6.replace(entry, b"\x01\x12\x00\x03\x00\x00\x00\x02\x00\x06\x00\x01"))
    # A count of 3: 6 bytes do not fit in the entry, whose value field is then their offset
    # (0x60000, past the EXIF data): Pillow skips the tag ("Possibly corrupt EXIF data") and
    # leaves the image as it is.
    save("exif-count3.jpg", r6.replace(entry, b"\x01\x12\x00\x03\x00\x00\x00\x03\x00\x06\x00\x00"))
    ex = Image.Exif()
    ex[0x0112] = 3
    save("exif-rotate3.png", enc(photo(20, 12, seed=4), "PNG", exif=ex.tobytes()))

    # Damaged and hostile inputs.
    good = enc(base, "JPEG", quality=85)
    save("truncated.jpg", good[: len(good) // 2])
    assert good.endswith(b"\xff\xd9")
    save("missing-eoi.jpg", good[:-2])
    save("early-eoi.jpg", good[: len(good) * 2 // 3] + b"\xff\xd9")
    # A marker libjpeg does not know (0xFF6C) in the middle of the scan data: libjpeg warns
    # (premature end of data segment) and fills the rest of the image, then fails when it reads
    # on to EOI; Pillow raises "broken data stream".
    sos = good.find(b"\xff\xda")
    mid = sos + (len(good) - sos) // 2
    save("bad-marker-in-scan.jpg", good[:mid] + b"\xff\x6c" + good[mid:])
    save("empty.jpg", b"")
    save("text.jpg", b"this is not a JPEG file\n")
    huge = bytearray(enc(photo(8, 8), "JPEG"))
    j = huge.find(b"\xff\xc0")
    huge[j + 5:j + 9] = struct.pack(">HH", 60000, 60000)
    save("huge-60000x60000.jpg", bytes(huge))
    png = bytearray(enc(base, "PNG"))
    k = png.find(b"IDAT")
    png[k + 10] ^= 0x55  # damage the compressed data; the CRC no longer matches
    save("bad-zlib.png", bytes(png))
    # Only checksums damaged: Pillow verifies the CRCs of the chunks before the first IDAT and
    # ignores those of IDAT and later chunks.
    png = bytearray(enc(base, "PNG"))
    k = png.find(b"IDAT")
    n = struct.unpack(">I", png[k - 4:k])[0]
    png[k + 4 + n] ^= 0xFF
    save("bad-crc-idat.png", bytes(png))
    png = bytearray(enc(base, "PNG"))
    png[8 + 8 + 13] ^= 0xFF  # IHDR's CRC
    save("bad-crc-ihdr.png", bytes(png))
    png = enc(base, "PNG")
    assert png.endswith(b"IEND\xaeB`\x82")
    save("missing-iend.png", png[:-12])
    save("truncated.png", png[: len(png) // 2])

    # PNG: every colour type, bit depths, palette with and without tRNS, interlacing.
    save("rgb.png", enc(base, "PNG"))
    save("rgba.png", enc(base.convert("RGBA").point(lambda v: v), "PNG"))
    rgba = base.copy()
    rgba.putalpha(Image.linear_gradient("L").resize(base.size))
    save("rgba-alpha.png", enc(rgba, "PNG"))
    la = base.convert("L")
    la.putalpha(Image.linear_gradient("L").resize(base.size))
    save("la.png", enc(la.convert("LA"), "PNG"))
    save("grey.png", enc(base.convert("L"), "PNG"))
    save("bilevel.png", enc(base.convert("1"), "PNG"))
    pal = base.convert("P", palette=Image.ADAPTIVE, colors=200)
    save("palette.png", enc(pal, "PNG"))
    save("palette-trns.png", enc(pal, "PNG", transparency=3))
    pal16 = base.convert("P", palette=Image.ADAPTIVE, colors=16)
    save("palette-4bit.png", enc(pal16, "PNG", bits=4))
    save("grey16.png", enc(base.convert("L").convert("I").point(lambda v: v * 257), "PNG"))
    w, h = 23, 17
    rnd = random.Random(7)
    rows16 = [[(rnd.randrange(65536), rnd.randrange(65536), rnd.randrange(65536)) for _ in range(w)] for _ in range(h)]
    save("rgb16.png", png_raw(w, h, 16, 2, rows16))
    save("rgb16-interlaced.png", png_raw(w, h, 16, 2, rows16, interlace=True))
    rowsa16 = [[p + (rnd.randrange(65536),) for p in r] for r in rows16]
    save("rgba16.png", png_raw(w, h, 16, 6, rowsa16))
    rowsla16 = [[(p[0], p[1]) for p in r] for r in rows16]
    save("la16.png", png_raw(w, h, 16, 4, rowsla16))
    rowsg16 = [[(p[0],) for p in r] for r in rows16]
    save("grey16-small.png", png_raw(w, h, 16, 0, rowsg16))
    save("grey16-low.png", png_raw(w, h, 16, 0, [[(v[0] >> 7,) for v in r] for r in rows16]))
    rows8 = [[(rnd.randrange(256), rnd.randrange(256), rnd.randrange(256)) for _ in range(w)] for _ in range(h)]
    save("rgb-interlaced.png", png_raw(w, h, 8, 2, rows8, interlace=True))
    save("rgb-trns.png", png_raw(w, h, 8, 2, rows8, extra=chunk(b"tRNS", struct.pack(">HHH", *rows8[0][0]))))
    save("grey-trns.png", png_raw(w, h, 8, 0, [[(p[0],) for p in r] for r in rows8],
                                  extra=chunk(b"tRNS", struct.pack(">H", rows8[0][0][0]))))
    for bits in (1, 2, 4):
        save("grey%d.png" % bits, png_raw(w, h, bits, 0, [[(p[0] >> (8 - bits),) for p in r] for r in rows8]))
    # Palette with an index beyond the PLTE entries (out-of-range pixels).
    plte = bytes(rnd.randrange(256) for _ in range(3 * 5))
    save("palette-short.png", png_raw(w, h, 8, 3, [[(p[0] % 9,) for p in r] for r in rows8],
                                      extra=chunk(b"PLTE", plte)))
    save("palette-interlaced.png", png_raw(w, h, 8, 3, [[(p[0] % 5,) for p in r] for r in rows8],
                                           extra=chunk(b"PLTE", plte) + chunk(b"tRNS", b"\x00\x80"), interlace=True))
    save("tiny-1x1.png", enc(photo(1, 1), "PNG"))

    # Other formats.
    save("rgb.bmp", enc(base, "BMP"))
    save("palette.bmp", enc(pal, "BMP"))
    save("grey.bmp", enc(base.convert("L"), "BMP"))
    save("rgb.tif", enc(base, "TIFF"))
    save("rgb-lzw.tif", enc(base, "TIFF", compression="tiff_lzw"))
    save("grey.tif", enc(base.convert("L"), "TIFF"))
    save("rgba.tif", enc(rgba, "TIFF"))
    save("lossless.webp", enc(base, "WEBP", lossless=True))
    save("lossy.webp", enc(base, "WEBP", quality=80))
    save("lossy-alpha.webp", enc(rgba, "WEBP", quality=80))
    # Damaged WebP containers, each refused by libwebp's demuxer (which Pillow opens WebP files
    # with: "could not create decoder object"): the RIFF header says more bytes than the file
    # holds (its EXIF chunk cut off), a chunk runs past the RIFF data's end, bytes inside the
    # RIFF data that are no chunk. Bytes after the RIFF data are ignored.
    ex = Image.Exif()
    ex[0x010E] = "packer " * 30
    save("webp-exif-cut.webp", enc(base, "WEBP", quality=80, exif=ex.tobytes())[:-40])
    lossy = enc(base, "WEBP", quality=80)
    save("webp-chunk-past-riff.webp", lossy[:4] + struct.pack("<I", len(lossy) - 8 - 2) + lossy[8:])
    save("webp-leftover.webp", lossy[:4] + struct.pack("<I", len(lossy) - 8 + 4) + lossy[8:] + b"abcd")
    save("webp-trailing.webp", lossy + b"trailing")
    save("anim.gif", enc(pal, "GIF", save_all=True, append_images=[pal16.convert("RGB").convert("P")], duration=50))
    save("grey.ppm", enc(base.convert("L"), "PPM"))
    save("rgba.bmp", enc(rgba, "BMP"))
    save("grey16.tif", enc(base.convert("L").convert("I").point(lambda v: v * 257).convert("I;16"), "TIFF"))
    save("palette-trns.gif", enc(pal, "GIF", transparency=3))
    frame2 = photo(67, 45, seed=9)
    save("anim.webp", enc(base, "WEBP", save_all=True, append_images=[frame2], duration=50, quality=80))
    # A three-component JPEG that an Adobe marker (transform 0) declares RGB, not YCbCr.
    j444 = enc(base, "JPEG", quality=92, subsampling=0)
    adobe = b"\xff\xee\x00\x0eAdobe\x00\x64\x00\x00\x00\x00\x00"
    save("adobe-rgb.jpg", j444[:2] + adobe + j444[2:])
    save("rgb.ppm", enc(base, "PPM"))


if __name__ == "__main__":
    main()
