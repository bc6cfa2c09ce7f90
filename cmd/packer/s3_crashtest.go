//go:build packer_crashtest

package main

import (
	"fmt"
	"os"
)

// Only in the crash-test binary (-tags packer_crashtest): with PACKER_TEST_S3_STALL set, a
// build to object storage stops for good after the first part of a multipart upload is sent,
// saying so on stderr, so that a test can kill it at that point, deterministically.
func init() {
	if os.Getenv("PACKER_TEST_S3_STALL") == "" {
		return
	}
	s3PartSentHook = func(key string, part int32) {
		fmt.Fprintf(os.Stderr, "packer-test: stalled after part %d of %s\n", part, key)
		select {}
	}
}
