// Package kernels holds packer's CUDA kernels and runs their per-thread bodies on the CPU.
//
// resize.cu holds the kernel entry points and resize_body.h their per-thread bodies, in plain
// C. scripts/build-ptx.sh compiles them to resize.ptx with clang-14 (no CUDA toolkit), which
// package gpu embeds and hands to the driver's JIT. With cgo, this package also compiles
// resize_body.h for the host and runs it over a grid the way the device does: every
// (blockIdx.y, blockIdx.x, threadIdx.x) of a launch, one after another (HPass, VPass). That
// CPU harness is how the kernels' arithmetic and indexing are tested byte for byte against
// package transforms on machines without a GPU; only package gpu's tests import it.
//
// The header lives in this package's directory so that the Go build cache notices every
// change to it (cgo hashes the headers of the package directory only).
//
// The caller must pass a job table whose offsets fit the buffers (package gpu's planner
// guarantees it); the C code trusts the table exactly as the device does.
package kernels
