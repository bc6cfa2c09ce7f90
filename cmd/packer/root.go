package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime/pprof"
	"runtime/trace"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

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

// exitCode maps an error to the process exit status. It is the only place that does. ctx is
// the command's context, cancelled only by a signal (main): exit 130 means a signal came. An
// error that merely wraps context.Canceled without one (a request cancelled inside the
// command because another one failed, whose error should have been returned instead) is a
// failure, not an interruption.
func exitCode(ctx context.Context, err error) int {
	var ue *usageError
	switch {
	case err == nil:
		return exitOK
	case ctx.Err() != nil:
		return exitInterrupted
	case errors.Is(err, errCorrupt):
		return exitCorrupt
	case errors.As(err, &ue), errors.Is(err, pipeline.ErrOutputExists),
		errors.Is(err, pipeline.ErrOutputNotDataset), errors.Is(err, pipeline.ErrOutputFile),
		errors.Is(err, pipeline.ErrPartIdentity):
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
		Version:                    pipeline.Version,
		SuggestionsMinimumDistance: 2,
		SilenceErrors:              true,
		SilenceUsage:               true,
		// An unknown command is a usage error (exit 2): with Args set, cobra reports it through
		// the validator instead of its own error, which would exit 1.
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			return unknownCommand(c, args[0])
		},
		RunE: func(c *cobra.Command, args []string) error { return c.Help() },
	}
	root.SetVersionTemplate("packer {{.Version}}\n")
	var cpuProfile string
	root.PersistentFlags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the command to this file")
	_ = root.PersistentFlags().MarkHidden("cpuprofile")
	var traceFile string
	root.PersistentFlags().StringVar(&traceFile, "trace", "", "write an execution trace of the command to this file (go tool trace)")
	_ = root.PersistentFlags().MarkHidden("trace")
	var stopProfile, stopTrace func()
	root.PersistentPreRunE = func(c *cobra.Command, args []string) error {
		if err := refuseURLs(c, args); err != nil {
			return err
		}
		if traceFile != "" {
			f, err := os.Create(traceFile)
			if err != nil {
				return err
			}
			if err := trace.Start(f); err != nil {
				f.Close()
				return err
			}
			stopTrace = func() { trace.Stop(); f.Close() }
		}
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
		if stopTrace != nil {
			stopTrace()
		}
	}
	root.SetOut(io.Out)
	root.SetErr(io.Err)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		// A mistyped command followed by its flags ("packer biuld SRC -o OUT", "packer cluster
		// slurmm -o DIR") reaches the root or the command group, whose flags the command's are
		// not: the unknown command, met before the flag, is the error to report.
		if c.HasSubCommands() && len(c.Flags().Args()) > 0 {
			return unknownCommand(c, c.Flags().Arg(0))
		}
		return usagef(suggestFlag(c, err))
	})
	root.AddCommand(
		newBuildCommand(io, nil),
		newVerifyCommand(io, nil),
		newInspectCommand(io, nil),
		newBenchCommand(io, nil),
		newPreviewCommand(io, nil),
		newMergeCommand(io, nil),
		newPlanCommand(io, nil),
		newMixPlanCommand(io, nil),
		newClusterCommand(io),
	)
	return root
}

// unknownCommand is the usage error for a command name the root does not know, with the
// commands within two edits of it.
func unknownCommand(root *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, root.CommandPath())
	if s := root.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usagef(errors.New(msg))
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

// urlScheme matches the start of a URL such as s3://bucket/prefix.
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// refuseURLs refuses URL-like paths among the positional arguments and -o, except the
// s3://bucket/prefix locations a command reads or writes through the object store (the
// sources and outputs of build and merge, the dataset of verify, inspect, preview and bench,
// plan's source, which plan itself refuses with a way round): a path such as gs://bucket/out
// would otherwise become a local directory ./gs:/bucket/out, leaving the user to believe the
// data went to the bucket.
func refuseURLs(c *cobra.Command, args []string) error {
	where := remoteForms("") + " locations are supported by build (SRC and -o), merge (parts and -o), verify, inspect, preview and bench"
	check := func(p string, remoteOK bool) error {
		if !urlScheme.MatchString(p) || remoteOK && remote(p) {
			return nil
		}
		if remote(p) {
			return usagef(fmt.Errorf("%s: %s does not read or write object storage (%s); give a local path", p, c.Name(), where))
		}
		return usagef(fmt.Errorf("%s: URLs are not supported (object storage is %s; %s); give a local path", p, remoteForms("bucket/prefix"), where))
	}
	for _, p := range args {
		if err := check(p, true); err != nil {
			return err
		}
	}
	if f := c.Flags().Lookup("out"); f != nil {
		if err := check(f.Value.String(), c.Name() == "build" || c.Name() == "merge"); err != nil {
			return err
		}
	}
	return nil
}

// suggestFlag adds "did you mean --x?" to an unknown-flag error when a flag of the command is
// within two edits of the one given.
func suggestFlag(c *cobra.Command, err error) error {
	msg := err.Error()
	const prefix = "unknown flag: --"
	if !strings.HasPrefix(msg, prefix) {
		return err
	}
	given := strings.TrimPrefix(msg, prefix)
	best, bestD := "", 3
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if d := editDistance(given, f.Name); d < bestD {
			best, bestD = f.Name, d
		}
	})
	if best == "" {
		return err
	}
	return fmt.Errorf("%w; did you mean --%s?", err, best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
