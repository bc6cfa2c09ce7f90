//go:build !linux

package shard

// hugePage is 0 where transparent huge pages are not requested: alignedBuf maps what it is asked.
const hugePage = 0

func adviseHuge([]byte) {}

func populate([]byte) {}
