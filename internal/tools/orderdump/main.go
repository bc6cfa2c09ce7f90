// Command orderdump prints, as JSON, the record indices of every batch the Go shard.Loader
// yields for a dataset and a set of LoaderOptions, and its state after each batch. The Python
// reader's cross-language tests compare their own batches with it.
//
//	orderdump DIR '{"BatchSize": 8, "Shuffle": true, "Seed": 3, "Rank": 1, "World": 3}'
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/packer-dev/packer/shard"
)

type output struct {
	Batches [][]int64           `json:"batches"`
	States  []shard.LoaderState `json:"states"`
	Len     int64               `json:"len"`
	NumB    int64               `json:"num_batches"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "orderdump:", err)
		os.Exit(1)
	}
}

func run() error {
	if len(os.Args) != 3 {
		return fmt.Errorf("usage: orderdump DIR OPTIONS_JSON")
	}
	var o shard.LoaderOptions
	if err := json.Unmarshal([]byte(os.Args[2]), &o); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	d, err := shard.OpenDataset(os.Args[1])
	if err != nil {
		return err
	}
	defer d.Close()
	l, err := d.NewLoader(o)
	if err != nil {
		return err
	}
	defer l.Close()
	out := output{Batches: [][]int64{}, States: []shard.LoaderState{}, Len: l.Len(), NumB: l.Batches()}
	for l.Next() {
		out.Batches = append(out.Batches, append([]int64(nil), l.Batch().Indices...))
		out.States = append(out.States, l.State())
	}
	if err := l.Err(); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}
