package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/packer-dev/packer/shard"
)

type mixPlanOptions struct {
	IO            *iostreams
	Dirs          []string
	Weights       string
	Seed          uint64
	EpochSize     int64
	Epoch         uint64
	Ranks         int
	BatchSize     int
	NoReplacement bool
	NoShuffle     bool
	DropLast      bool
	JSON          bool
}

func newMixPlanCommand(io *iostreams, runF func(context.Context, *mixPlanOptions) error) *cobra.Command {
	opts := &mixPlanOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "mix-plan OUT... --weights W,...",
		Short: "Show the realised proportions and epoch length of a weighted mixture of datasets",
		Long: `Mix-plan prints how a weighted mixture of the packed datasets OUT... is read (shard/ORDER.md,
"Mixtures"; the Go shard.Mixture and Python packer_reader.mix read this order): the epoch
length, and per dataset its records, weight, share of the stream (the weight quantised to
units of 2^-20), the records it gives in the epoch, their fraction of it, and the passes over
the dataset that makes. With --batch-size B (and --ranks W) it also prints the batches per rank
and the fewest and most records of each dataset in one batch of a rank: the source choice is
stratified, so they stay within the dataset's depth in the mixture's split tree (1 for two
datasets, 2 for up to four, 3 for up to eight) of B times its share. It reads the manifests
only.
` + exitStatusHelp,
		Example: `  packer mix-plan web books --weights 0.7,0.3
  packer mix-plan web books code --weights 6,3,1 --seed 1 --epoch-size 1000000 --ranks 8 --batch-size 256
  packer mix-plan web books --weights 1,1 --no-replacement --json`,
		Args: argsUsage(cobra.MinimumNArgs(1)),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Dirs = args
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runMixPlan(c.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Weights, "weights", "", "one weight per dataset, comma-separated (only their ratios matter)")
	f.Uint64Var(&opts.Seed, "seed", 0, "the mixture's seed")
	f.Int64Var(&opts.EpochSize, "epoch-size", 0, "records per mixture epoch, all ranks together (0: the datasets' records summed; without replacement, the longest epoch no dataset runs out in)")
	f.Uint64Var(&opts.Epoch, "epoch", 0, "the epoch to show")
	f.IntVar(&opts.Ranks, "ranks", 1, "number of ranks reading the mixture")
	f.IntVar(&opts.BatchSize, "batch-size", 0, "batch size per rank: also show per-batch counts")
	f.BoolVar(&opts.NoReplacement, "no-replacement", false, "read each dataset at most once per epoch")
	f.BoolVar(&opts.NoShuffle, "no-shuffle", false, "read each dataset in record order")
	f.BoolVar(&opts.DropLast, "drop-last", false, "drop the last, partial global batch")
	f.BoolVar(&opts.JSON, "json", false, "print the summary as JSON")
	return cmd
}

func runMixPlan(ctx context.Context, o *mixPlanOptions) error {
	var weights []float64
	for _, s := range strings.Split(o.Weights, ",") {
		w, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return usagef(fmt.Errorf("--weights %q: %q is not a number", o.Weights, s))
		}
		weights = append(weights, w)
	}
	if len(weights) != len(o.Dirs) {
		return usagef(fmt.Errorf("--weights gives %d weights for %d datasets", len(weights), len(o.Dirs)))
	}
	if o.Ranks < 1 || o.BatchSize < 0 {
		return usagef(fmt.Errorf("--ranks %d --batch-size %d: want ranks ≥ 1 and a batch size ≥ 0", o.Ranks, o.BatchSize))
	}
	counts := make([]int64, len(o.Dirs))
	for k, dir := range o.Dirs {
		m, err := readManifestAt(ctx, dir)
		if err != nil {
			return err
		}
		counts[k] = m.Count
		if m.Count < 1 {
			return fmt.Errorf("%s: the dataset has no records to mix", dir)
		}
	}
	mix, err := shard.NewMixture(counts, shard.MixOptions{Weights: weights, Seed: o.Seed, EpochSize: o.EpochSize,
		Replacement: !o.NoReplacement, Shuffle: !o.NoShuffle})
	if err != nil {
		return usagef(err)
	}
	s, err := mix.Summary(o.Epoch, o.BatchSize, o.Ranks, o.DropLast)
	if err != nil {
		return usagef(err)
	}
	if o.JSON {
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(o.IO.Out, "%s\n", b)
		return err
	}
	_, err = fmt.Fprintln(o.IO.Out, formatMixSummary(s, o.Dirs))
	return err
}

// formatMixSummary is mix-plan's text, the same as Python's packer_reader.mixture.format_summary.
func formatMixSummary(s shard.MixSummary, names []string) string {
	var b strings.Builder
	repl, order := "with replacement", "shuffled"
	if !s.Replacement {
		repl = "without replacement"
	}
	if !s.Shuffle {
		order = "in record order"
	}
	fmt.Fprintf(&b, "epoch %d: %d records (%s, %s), seed %d\n", s.Epoch, s.EpochSize, repl, order, s.Seed)
	if s.BatchesPerRank != nil {
		fmt.Fprintf(&b, "%d ranks, batches of %d: %d batches per rank\n", s.WorldSize, s.BatchSize, *s.BatchesPerRank)
	}
	fmt.Fprintf(&b, "%-24s %12s %8s %8s %12s %9s %8s", "source", "records", "weight", "share", "drawn", "fraction", "passes")
	if s.BatchesPerRank != nil {
		b.WriteString("  per batch")
	}
	for k, r := range s.Sources {
		fmt.Fprintf(&b, "\n%-24s %12d %8.4g %8.5f %12d %9.5f %8.3f", names[k], r.Records, r.Weight, r.Share, r.Drawn, r.Fraction, r.Passes)
		if s.BatchesPerRank != nil {
			if r.BatchMin != nil {
				fmt.Fprintf(&b, "  %d-%d", *r.BatchMin, *r.BatchMax)
			} else {
				b.WriteString("  -")
			}
		}
	}
	return b.String()
}
