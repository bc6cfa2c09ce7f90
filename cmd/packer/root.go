package main

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/packer-dev/packer/pipeline"
)

// Exit codes, documented under EXIT STATUS in every command's help.
const (
	exitOK          = 0   // success
	exitFailure     = 1   // the build or the command failed
	exitUsage       = 2   // bad command line
	exitCorrupt     = 3   // verify found corrupt or mismatching data
	exitInterrupted = 130 // interrupted (Ctrl-C, SIGTERM)
)

const exitStatusHelp = `
EXIT STATUS
  0    success
  1    failure (the build failed, a file could not be read, ...)
  2    usage error (unknown flag, bad value, missing argument)
  3    corrupt or mismatching data found
  130  interrupted (Ctrl-C or SIGTERM); nothing that looks complete is left behind`

// usageError marks errors caused by the command line.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(err error) error { return &usageError{err} }

// errCorrupt is returned (wrapped) when a command found corrupt data.
var errCorrupt = errors.New("corrupt data")

// errSilent is returned when the command has already reported everything.
var errSilent = errors.New("silent")

// exitCode maps an error to the process exit status. It is the only place that does.
func exitCode(ctx context.Context, err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.Is(err, errCorrupt):
		return exitCorrupt
	case errors.As(err, &ue), errors.Is(err, pipeline.ErrOutputExists):
		return exitUsage
	}
	return exitFailure
}

// iostreams are the streams commands write to; tests use buffers.
type iostreams struct {
	Out io.Writer
	Err io.Writer
}

func stdIO() *iostreams { return &iostreams{Out: os.Stdout, Err: os.Stderr} }

func newRootCommand(io *iostreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "packer",
		Short: "Pack datasets ahead of training so GPUs never wait for data",
		Long: `packer runs the deterministic part of a training input pipeline once, before training:
it reads a raw dataset, decodes and transforms every sample, and writes uncompressed
shards (or NumPy / HDF5 arrays) that a small reader streams at disk speed.
` + exitStatusHelp,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	var cpuProfile string
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the command to this file")
	_ = root.PersistentFlags().MarkHidden("cpuprofile")
	var stopProfile func()
	root.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return err
		}
		stopProfile = func() { pprof.StopCPUProfile(); f.Close() }
		return nil
	}
	root.PersistentPostRun = func(c *cobra.Command, args []string) {
		if stopProfile != nil {
			stopProfile()
		}
	}
	root.SetOut(io.Out)
	root.SetErr(io.Err)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usagef(err) })
	root.AddCommand(
		newBuildCommand(io, nil),
		newVerifyCommand(io, nil),
		newInspectCommand(io, nil),
		newBenchCommand(io, nil),
		newPreviewCommand(io, nil),
	)
	return root
}

// argsUsage wraps a cobra positional-argument validator so its errors are usage errors.
func argsUsage(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return usagef(err)
		}
		return nil
	}
}
