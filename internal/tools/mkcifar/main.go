// Command mkcifar writes a synthetic CIFAR-10 or CIFAR-100 dataset in the official binary layout,
// as a folder or as the official .tar.gz, for demos and benchmarks that must run without network.
//
//	go run ./internal/tools/mkcifar -kind cifar10 -per-file 2000 -tgz out/cifar-10-binary.tar.gz
//	go run ./internal/tools/mkcifar -kind cifar100 -per-file 1000 -dir out/
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/packer-dev/packer/source/cifar"
)

func main() {
	kind := flag.String("kind", cifar.Kind10, "cifar10 or cifar100")
	perFile := flag.Int("per-file", 1000, "records in each data file")
	dir := flag.String("dir", "", "write the extracted folder under this directory")
	tgz := flag.String("tgz", "", "write the official-style .tar.gz to this path")
	flag.Parse()
	if (*dir == "") == (*tgz == "") {
		fmt.Fprintln(os.Stderr, "mkcifar: give exactly one of -dir or -tgz")
		os.Exit(2)
	}
	var err error
	if *dir != "" {
		var folder string
		folder, err = cifar.WriteTestDataset(*dir, *kind, *perFile)
		if err == nil {
			fmt.Println(folder)
		}
	} else {
		err = cifar.WriteTestArchive(*tgz, *kind, *perFile)
		if err == nil {
			fmt.Println(*tgz)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkcifar:", err)
		os.Exit(1)
	}
}
