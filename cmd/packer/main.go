// Command packer packs datasets ahead of training and checks, inspects and benchmarks the result.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRootCommand(stdIO()).ExecuteContext(ctx)
	code := exitCode(ctx, err)
	switch {
	case code == exitInterrupted:
		fmt.Fprintln(os.Stderr, "packer: interrupted; nothing was committed")
	case err != nil && !errors.Is(err, errSilent):
		fmt.Fprintln(os.Stderr, "packer:", err)
	}
	os.Exit(code)
}
