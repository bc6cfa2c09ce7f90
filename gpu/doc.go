// Package gpu runs packer's resize on NVIDIA GPUs and produces exactly the bytes of package
// transforms (the CPU reference). It is the only package that talks to the CUDA driver.
//
// See README.md in this directory for the design, the tests and the performance bound.
package gpu
