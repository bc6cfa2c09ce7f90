//go:build packer_crashtest

package main

import (
	"context"
	"fmt"
	"os"
	"sync"
)

// Only in the crash-test binary (-tags packer_crashtest): with PACKER_TEST_S3_STALL set, a
// build to object storage stops after the first part of a multipart upload is sent, saying so
// on stderr, until the build is cancelled (SIGINT, SIGTERM), so that a test can kill or
// interrupt it at that point, deterministically.
func init() {
	if os.Getenv("PACKER_TEST_S3_STALL") == "" {
		return
	}
	var once sync.Once
	s3PartSentHook = func(ctx context.Context, key string, part int32) {
		once.Do(func() {
			fmt.Fprintf(os.Stderr, "packer-test: stalled after part %d of %s\n", part, key)
			<-ctx.Done()
		})
	}
}
