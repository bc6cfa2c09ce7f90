// Package transforms decodes images and applies packer's deterministic transforms: resize,
// centre crop, layout, element type and normalisation. It is the reference implementation:
// other paths (the GPU kernels) must produce its bytes.
//
// # Fidelity
//
// For 8-bit "L" (C=1) and "RGB" (C=3) images, [Resize] and [Worker.Apply] produce, byte for
// byte, what Pillow 9.4 and torchvision produce:
//
//   - Resize is Pillow's Image.resize(size, filter) with no box and no reducing_gap (what
//     torchvision's Resize calls): the size is returned unchanged as a copy; NEAREST follows
//     Pillow's affine nearest-neighbour mapping (ImagingScaleAffine: positions accumulated in
//     float64, black outside the source); the other filters are Pillow's separable
//     convolution, horizontal pass first into an 8-bit intermediate image, a pass skipped when
//     its axis keeps its size, support scaled by the downscale factor, coefficients computed
//     in float64, normalised, then converted to fixed point with 22 fractional bits and
//     Pillow's rounding. The integer weights are exported ([Weights], [ComputeWeights],
//     [Compiled.Plan]) with the exact per-sample formula, so other implementations can match.
//   - Spec.Resize is torchvision's Resize(N, max_size) output size ([ResizeOutputSize]);
//     Width/Height is Resize((h, w)).
//   - CropW/CropH is torchvision's CenterCrop ([CenterCropOffset]): zero padding first when the
//     image is smaller on an axis, then the offset int(round((size-crop)/2.0)), Python's
//     round halving to even.
//   - Float outputs are torchvision's ToTensor then Normalize: v = float32(p)/255, then
//     (v - float32(mean)) / float32(std), each operation rounded to float32 in that order.
//     Float16 is that float32 rounded to nearest, ties to even ([Float16Bits]), as torch's
//     Tensor.half(). Floats are stored little-endian.
//
// Only the output pixels that survive the crop are computed, and only the source rows under
// their filter support go through the horizontal pass: each output pixel depends only on its
// own row's and column's weights, so this is byte-identical to resizing fully and cropping
// after (tested, and fuzzed).
//
// # Exceptions
//
// Pillow evaluates the hamming and lanczos kernels with the C library's sin and cos. packer
// uses its own correctly rounded versions (double-double), identical on every architecture;
// glibc's differ from them in the last bit for about 0.2% of arguments. A fixed-point
// coefficient can only change if such a difference, of relative size 2^-53, straddles a
// rounding boundary of the 22-bit conversion: the tests compare the weights of hundreds of
// size pairs with a transliteration run on glibc and find none. Pillow built on another C
// library (or with FMA contraction, as compilers do by default on arm64) can itself differ
// from Pillow on x86-64 glibc in the same rare way; packer follows x86-64 glibc Pillow.
//
// Images with alpha (LA, RGBA), 16-bit and palette modes are converted to L or RGB before
// they reach these transforms, as Pillow's convert does; resizing with alpha (Pillow's
// premultiplied path) is not implemented.
//
// # Speed
//
// On amd64 CPUs with AVX2 (and cgo), the RGB horizontal pass and every vertical pass run in C
// with AVX2 intrinsics (resample_avx2.go). They compute the same int32 sums as the Go loops,
// which integer arithmetic makes independent of order: the horizontal pass multiplies with
// vpmaddwd after splitting each coefficient into hi*2^11 + lo (both fit 16 bits; weights whose
// coefficients would not are left to the Go loops), the vertical pass with vpmulld. A test
// compares both paths byte for byte on random images, sizes, filters and crop regions, and
// fails on an amd64 cgo build whose CPU lacks AVX2 rather than passing without running. Other
// CPUs and builds without cgo use the Go loops (unrolled per tap count, bounds checks hoisted),
// and so does a build with the purego tag (go test -tags purego ./transforms/), which tests
// the Go loops against the golden files on a machine that would otherwise take the AVX2 passes,
// with cgo (libjpeg-turbo) still on.
//
// # Floating point
//
// Weight computations write every product inside float64(...) so that no architecture may
// fuse it with an addition (Go spec, "Floating-point operators"): the reference (x86-64
// Pillow) rounds each operation separately. The resampling itself is integer arithmetic.
//
// # The spec, compiled once
//
// A [Spec] is the transform as flags and manifests write it; its filter, layout and element
// type are typed values ([Filter], [Layout], [DType]) read from their names by UnmarshalText,
// so an unknown name is an error where it is read. [Spec.Compile] fills in the defaults (a
// spec that resizes without a filter gets Bilinear) and makes every check, once; the
// [Compiled] it returns is what a [Worker], the GPU path and the build engine take, and
// nothing checks it again.
//
// # Concurrency
//
// A [Worker] holds scratch buffers and is not safe for concurrent use; give each goroutine
// its own. Weights are computed once per (input size, output size, filter) and shared through
// a bounded, concurrency-safe cache ([CachedWeights]). Once its buffers have grown, a Worker
// does not allocate.
//
// # Limits
//
// Sizes are limited to [MaxResampleSize] per side; a resize that would produce an empty image
// (torchvision's max_size with an extreme aspect ratio) is an error, as it is in Pillow.
package transforms
