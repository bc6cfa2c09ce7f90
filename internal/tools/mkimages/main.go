// Command mkimages writes a folder dataset of N small PNG images (ImageFolder layout: C class
// folders), for the scale benchmark (scripts/bench_scale.sh). Every image is 16x12 RGB with
// pixels derived from its index, so a dataset is reproducible byte for byte.
//
//	go run ./internal/tools/mkimages -n 100000 -classes 100 -dir /tmp/scale/100k
package main

import (
	"bytes"
	"flag"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"sync"
)

func main() {
	n := flag.Int("n", 10000, "images to write")
	classes := flag.Int("classes", 100, "class folders")
	dir := flag.String("dir", "", "dataset folder to create")
	flag.Parse()
	if *dir == "" || *n < 1 || *classes < 1 {
		fmt.Fprintln(os.Stderr, "mkimages: give -dir, -n >= 1 and -classes >= 1")
		os.Exit(2)
	}
	for c := 0; c < *classes; c++ {
		if err := os.MkdirAll(filepath.Join(*dir, fmt.Sprintf("c%04d", c)), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "mkimages:", err)
			os.Exit(1)
		}
	}
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			img := image.NewNRGBA(image.Rect(0, 0, 16, 12))
			var buf bytes.Buffer
			enc := png.Encoder{CompressionLevel: png.BestSpeed}
			for i := w; i < *n; i += workers {
				for p := 0; p < len(img.Pix); p += 4 {
					v := uint32(i)*2654435761 + uint32(p)*40503
					img.Pix[p], img.Pix[p+1], img.Pix[p+2], img.Pix[p+3] = byte(v>>8), byte(v>>16), byte(v>>24), 255
				}
				buf.Reset()
				if err := enc.Encode(&buf, img); err != nil {
					errs <- err
					return
				}
				name := filepath.Join(*dir, fmt.Sprintf("c%04d", i%*classes), fmt.Sprintf("%08d.png", i))
				if err := os.WriteFile(name, buf.Bytes(), 0o644); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		fmt.Fprintln(os.Stderr, "mkimages:", err)
		os.Exit(1)
	}
}
