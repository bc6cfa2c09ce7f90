//go:build packer_crashtest

package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
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

// Only in the crash-test binary: with PACKER_TEST_S3_STOP_AFTER=N, a build to object storage
// stops for good once N shards are uploaded, saying so on stderr, so that a test can kill it
// with shards in the bucket and a checkpoint kept.
func init() {
	n, err := strconv.Atoi(os.Getenv("PACKER_TEST_S3_STOP_AFTER"))
	if err != nil || n < 1 {
		return
	}
	var stored atomic.Int64
	s3ShardStoredHook = func(name string) {
		if stored.Add(1) == int64(n) {
			fmt.Fprintf(os.Stderr, "packer-test: stopped after %d shards uploaded\n", n)
			time.Sleep(time.Hour) // until killed
		}
	}
}

// Only in the crash-test binary: with PACKER_TEST_S3_PAUSE_AFTER=N and PACKER_TEST_S3_GO_ON=FILE,
// a build to object storage pauses once N shards are uploaded, saying so on stderr, until FILE
// exists, and then goes on, so that a test can run another build of the same OUT meanwhile.
func init() {
	n, err := strconv.Atoi(os.Getenv("PACKER_TEST_S3_PAUSE_AFTER"))
	goOn := os.Getenv("PACKER_TEST_S3_GO_ON")
	if err != nil || n < 1 || goOn == "" {
		return
	}
	var stored atomic.Int64
	s3ShardStoredHook = func(name string) {
		if stored.Add(1) != int64(n) {
			return
		}
		fmt.Fprintf(os.Stderr, "packer-test: paused after %d shards uploaded\n", n)
		for {
			if _, err := os.Stat(goOn); err == nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
