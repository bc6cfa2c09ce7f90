package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/packer-dev/packer/pipeline"
)

// buildLeftover returns why dir (after its symlinks are resolved) is not a committed dataset
// but a folder a build keeps beside its output, or "". A staging folder gets its manifest just
// before it is renamed into place, so one with a manifest is a build killed before its commit,
// or, after an exchange, the dataset the build replaced; OUT.packer-old is a dataset set aside
// by an interrupted replacement, and what lies in OUT.packer-trash is waiting to be removed.
// Their files may match their manifests, but saying "ok" for one would vouch for data that
// the next build into OUT removes or puts back.
func buildLeftover(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	for p := abs; ; p = filepath.Dir(p) {
		base := filepath.Base(p)
		switch {
		case strings.HasSuffix(base, pipeline.StagingSuffix):
			out := strings.TrimSuffix(p, pipeline.StagingSuffix)
			return fmt.Sprintf("%s is the staging folder of a build into %s (killed before its commit, or holding the dataset it replaced): not a committed dataset; the next build into %s removes it", p, out, out)
		case strings.HasSuffix(base, pipeline.OldSuffix):
			out := strings.TrimSuffix(p, pipeline.OldSuffix)
			return fmt.Sprintf("%s is the dataset %s held before an interrupted replacement: not a committed dataset; the next build into %s puts it back (if %s is missing) or removes it", p, out, out, out)
		case strings.HasSuffix(base, pipeline.TrashSuffix):
			return fmt.Sprintf("%s lies in %s, the leftovers of interrupted builds: not a committed dataset; the next build into %s removes it", abs, p, strings.TrimSuffix(p, pipeline.TrashSuffix))
		}
		if filepath.Dir(p) == p {
			return ""
		}
	}
}
