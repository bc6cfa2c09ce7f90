// Package gpu runs packer's transform chain on NVIDIA GPUs and produces exactly the bytes of
// package transforms (the CPU reference). It is the only package that talks to the CUDA
// driver.
//
// # Usage
//
// Select resolves --device auto|cpu|gpu; a Resizer applies a compiled transform (transforms.Compiled) to batches of
// decoded images:
//
//	dev, summary, err := gpu.Select("auto") // dev == nil: use the CPU; summary says why
//	rs, err := gpu.NewResizer(dev, spec, gpu.ResizerOptions{})
//	err = rs.Run(imgs, dsts) // dsts[i] of rs.OutputSize(w, h, c) bytes
//	err = rs.RunWindows(imgs, wins, dsts) // region-decoded images and their Window
//	rs.Close(); dev.Close()
//
// Only the source region each image's kept pixels read is staged and uploaded. Run calls are
// split by staged bytes and queued; a free slot (ResizerOptions.Streams, 4 by default) takes
// the oldest queued pieces of any caller up to ResizerOptions.MaxBatchBytes as one device
// batch, so concurrent small calls gather into large batches while the device is busy.
// Images copied into Resizer.Frame (pinned memory; the pipeline's batch workers do) are not
// staged: the rows their kept pixels read go up straight from the frame.
//
// PinnedAllocator is a shard.Allocator backed by page-locked memory from the driver, and
// Device.CopyBatchAsync issues the asynchronous host-to-device copy of a batch.
//
// # Driver
//
// The driver library (libcuda.so.1) is opened with dlopen on first use, never at package
// initialisation, by the binding in gpu/internal/cuda (the package's only route to the
// driver), so one binary runs on GPU and CPU-only nodes; without it every call returns
// an error wrapping ErrNoDriver. Every failed driver call is an *Error naming the call and the
// CUresult. The kernels (kernels/resize.cu, kernels/resize_body.h) are compiled to PTX by
// scripts/build-ptx.sh with clang-14, checked in, and embedded, with sm_80 and sm_90 cubins
// assembled from that PTX by ptxas (kernels/build-cubin.sh): the device's cubin is loaded
// first, and the PTX, JIT-compiled by the driver, otherwise.
//
// # Concurrency
//
// A Device's CUDA context is owned by one goroutine locked to its OS thread. Driver calls run
// there: Device.Do sends it a function; the driver methods of Device must be called inside
// Do and return ErrWrongThread otherwise. Device.Wait blocks the caller, not the owner, until
// an event completes. Resizer.Run and PinnedAllocator are safe for concurrent use.
//
// # Limits
//
// Each buffer of a device batch is below 2 GiB (the job table holds int32 offsets), a device
// batch holds at most 4096 images, and hosts must be little-endian. See README.md in this
// directory for the design, the tests and the performance bound.
package gpu
