// Command copyfloor copies the files of the datasets below the prefixes SRC (every object
// there but manifest.json and packer's .packer-* objects: the shards a merge by server-side
// copy copies) to DST/0/, DST/1/, ... of the same store with one CopyObject each, 16 at once,
// and checks nothing: the store's own cost of those copies, the floor that
// scripts/bench_merge_s3.sh sets that merge against. It prints the seconds the copies took.
// The store is the one of the AWS_* environment (path-style addressing).
//
//	copyfloor DST-BUCKET/PREFIX SRC-BUCKET/PREFIX...
package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: copyfloor DST-BUCKET/PREFIX SRC-BUCKET/PREFIX...")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "copyfloor:", err)
		os.Exit(1)
	}
}

func run(dst string, srcs []string) error {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return err
	}
	c := awss3.NewFromConfig(cfg, func(o *awss3.Options) { o.UsePathStyle = true })
	db, dp, _ := strings.Cut(dst, "/")
	type copy struct{ from, to string }
	var copies []copy
	for i, src := range srcs {
		sb, sp, _ := strings.Cut(src, "/")
		p := awss3.NewListObjectsV2Paginator(c, &awss3.ListObjectsV2Input{Bucket: aws.String(sb), Prefix: aws.String(sp + "/")})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				return fmt.Errorf("list %s: %w", src, err)
			}
			for _, o := range page.Contents {
				name := strings.TrimPrefix(aws.ToString(o.Key), sp+"/")
				if name == "manifest.json" || strings.HasPrefix(name, ".packer") {
					continue
				}
				segs := strings.Split(aws.ToString(o.Key), "/")
				for j, s := range segs {
					segs[j] = url.PathEscape(s)
				}
				copies = append(copies, copy{sb + "/" + strings.Join(segs, "/"), fmt.Sprintf("%s/%d/%s", dp, i, name)})
			}
		}
	}
	start := time.Now()
	errs := make([]error, len(copies))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i, cp := range copies {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, errs[i] = c.CopyObject(ctx, &awss3.CopyObjectInput{
				Bucket: aws.String(db), Key: aws.String(cp.to), CopySource: aws.String(cp.from),
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("copy %s: %w", copies[i].from, err)
		}
	}
	fmt.Printf("%.3f\n", time.Since(start).Seconds())
	return nil
}
