// Command packer packs datasets ahead of training and checks, inspects and benchmarks the result.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/packer-dev/packer/pipeline"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRootCommand(stdIO()).ExecuteContext(ctx)
	os.Exit(report(ctx, os.Stderr, err))
}

// report writes the last line of a command that ended with err to w and returns the exit
// status. An interrupted build that kept its checkpoint says where and how to go on from it.
func report(ctx context.Context, w io.Writer, err error) int {
	code := exitCode(ctx, err)
	var kept *pipeline.CheckpointKeptError
	switch {
	case code == exitInterrupted && errors.As(err, &kept):
		fmt.Fprintf(w, "packer: interrupted; nothing was committed; %s\n", kept.Advice())
	case code == exitInterrupted:
		fmt.Fprintln(w, "packer: interrupted; nothing was committed")
	case err != nil && !errors.Is(err, errSilent):
		fmt.Fprintln(w, "packer:", err)
	}
	return code
}
