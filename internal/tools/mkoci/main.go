// Command mkoci writes an OCI image layout (one gzip-compressed layer, its config and manifest,
// index.json) from files named on the command line, without a container daemon and
// reproducibly: the layer's entries are sorted by path, owned by 0:0, carry the -created time and
// modes given here (never the host's times, owners or modes), and every JSON document is written
// in one order, so the same inputs give the same manifest digest (printed on success).
// scripts/build-oci.sh uses it to package the release binary.
//
//	go run ./internal/tools/mkoci -o dist/oci -tag 0.2.0 \
//	    -file dist/packer:/usr/bin/packer:0755 -dir /tmp:1777 \
//	    -link /lib64/ld-linux-x86-64.so.2:/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 \
//	    -entrypoint /usr/bin/packer -env PATH=/usr/bin:/bin -user 65532:65532 -label k=v
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// list is a repeatable flag.
type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(s string) error { *l = append(*l, s); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkoci:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("mkoci", flag.ContinueOnError)
	out := fs.String("o", "", "the image layout folder to write (must not exist)")
	tag := fs.String("tag", "", "the image's reference name in index.json")
	created := fs.Int64("created", 0, "every timestamp in the image, in Unix seconds (default $SOURCE_DATE_EPOCH, else 0)")
	arch := fs.String("arch", "amd64", "the image's architecture")
	user := fs.String("user", "", "the user the image runs as (uid:gid)")
	workdir := fs.String("workdir", "/", "the working folder")
	var files, dirs, links, entrypoint, env, labels list
	fs.Var(&files, "file", "HOST:IMAGE:MODE: a regular file (repeatable; MODE in octal)")
	fs.Var(&dirs, "dir", "IMAGE:MODE: a folder (repeatable)")
	fs.Var(&links, "link", "IMAGE:TARGET: a symbolic link (repeatable)")
	fs.Var(&entrypoint, "entrypoint", "one word of the entrypoint (repeatable, in order)")
	fs.Var(&env, "env", "K=V in the image's environment (repeatable)")
	fs.Var(&labels, "label", "K=V: a label of the config and an annotation of the manifest (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() > 0 {
		return fmt.Errorf("usage: mkoci -o DIR [-file HOST:IMAGE:MODE]... (see -h)")
	}
	img := &image{arch: *arch, os: "linux", user: *user, workdir: *workdir, tag: *tag,
		entrypoint: entrypoint, env: env, labels: map[string]string{}}
	t := *created
	if !flagGiven(fs, "created") {
		if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return fmt.Errorf("SOURCE_DATE_EPOCH=%q: not a number of seconds", s)
			}
			t = v
		}
	}
	img.created = time.Unix(t, 0).UTC()
	for _, f := range files {
		parts := strings.Split(f, ":")
		if len(parts) != 3 {
			return fmt.Errorf("-file %q: want HOST:IMAGE:MODE", f)
		}
		mode, err := parseMode(parts[2])
		if err != nil {
			return fmt.Errorf("-file %q: %w", f, err)
		}
		img.entries = append(img.entries, entry{path: parts[1], src: parts[0], mode: mode})
	}
	for _, d := range dirs {
		p, m, ok := strings.Cut(d, ":")
		mode, err := parseMode(m)
		if !ok || err != nil {
			return fmt.Errorf("-dir %q: want IMAGE:MODE", d)
		}
		img.entries = append(img.entries, entry{path: p, dir: true, mode: mode})
	}
	for _, l := range links {
		p, target, ok := strings.Cut(l, ":")
		if !ok || target == "" {
			return fmt.Errorf("-link %q: want IMAGE:TARGET", l)
		}
		img.entries = append(img.entries, entry{path: p, link: target})
	}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return fmt.Errorf("-label %q: want K=V", l)
		}
		img.labels[k] = v
	}
	lay, err := img.write(*out)
	if err != nil {
		return err
	}
	fmt.Println(lay.manifest.Digest)
	return nil
}

func parseMode(s string) (int64, error) {
	m, err := strconv.ParseInt(s, 8, 32)
	if err != nil || m < 0 || m > 0o7777 {
		return 0, fmt.Errorf("mode %q: want octal permission bits such as 0755", s)
	}
	return m, nil
}

func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
