package shard

import "syscall"

// hugePage is the size of a transparent huge page (x86-64, arm64 with 4 KiB pages).
const hugePage = 2 << 20

// adviseHuge asks for transparent huge pages for b, which starts on a huge page boundary. It is
// only advice: the kernel may refuse (THP disabled), and the buffer works the same either way.
func adviseHuge(b []byte) { _ = syscall.Madvise(b, syscall.MADV_HUGEPAGE) }

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14), which package syscall does not name.
const madvPopulateWrite = 23

// populate faults b in for writing now, where the kernel can (older kernels refuse the advice,
// and b is faulted in at first use as before).
func populate(b []byte) { _ = syscall.Madvise(b, madvPopulateWrite) }
