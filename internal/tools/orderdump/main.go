// Command orderdump prints, as JSON, the record indices of every batch the Go shard.Loader
// yields for a dataset and a set of LoaderOptions, and its state after each batch. The Python
// reader's cross-language tests compare their own batches with it. With -pass it only reads the
// epoch and prints the bytes and seconds (scripts/bench_order.py times the process's CPU).
//
//	orderdump DIR '{"BatchSize": 8, "Shuffle": true, "Seed": 3, "Rank": 1, "World": 3}'
//	orderdump -pass DIR '{"BatchSize": 256, "Shuffle": true, "Order": 1}'
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

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
	args := os.Args[1:]
	pass := len(args) > 0 && args[0] == "-pass"
	if pass {
		args = args[1:]
	}
	if len(args) != 2 {
		return fmt.Errorf("usage: orderdump [-pass] DIR OPTIONS_JSON")
	}
	var o shard.LoaderOptions
	if err := json.Unmarshal([]byte(args[1]), &o); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	start := time.Now()
	d, err := shard.OpenDataset(args[0])
	if err != nil {
		return err
	}
	defer d.Close()
	datasetOpened := time.Since(start)
	l, err := d.NewLoader(o)
	if err != nil {
		return err
	}
	defer l.Close()
	opened := time.Since(start) // dataset opened, epoch order computed
	if pass {
		var n int64
		for l.Next() {
			n += int64(len(l.Batch().Data))
		}
		if err := l.Err(); err != nil {
			return err
		}
		out := map[string]float64{"bytes": float64(n), "seconds": time.Since(start).Seconds(), "open_seconds": opened.Seconds(),
			"dataset_seconds": datasetOpened.Seconds()}
		if l.DirectIO() {
			out["direct"] = 1
		}
		// What the process read: rchar counts the bytes its reads returned, read_bytes
		// those fetched from the disk (O_DIRECT reads included); Linux only.
		if io, err := os.ReadFile("/proc/self/io"); err == nil {
			for _, line := range strings.Split(string(io), "\n") {
				if k, v, ok := strings.Cut(line, ": "); ok && (k == "rchar" || k == "read_bytes") {
					if x, err := strconv.ParseFloat(v, 64); err == nil {
						out[k] = x
					}
				}
			}
		}
		return json.NewEncoder(os.Stdout).Encode(out)
	}
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
