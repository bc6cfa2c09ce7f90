package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneDurableCommit checks that the durable-file commit (fsync of a file or a directory, the
// rename to the final name) and the O_DIRECT open exist once, in internal/fileutil/durable.go
// and internal/fileutil/direct_*.go (and, for reading only, shard/odirect_linux.go: the reader
// imports no writer plumbing): a writer that syncs, renames or opens with O_DIRECT by itself is a copy
// that will drift from the others (as four directory syncs once did, each with its own error
// handling). The renames of whole directories in the publish of OUT (pipeline's recovery,
// storage's LocalStage) and of a staging folder's lock file into place are not file commits.
func TestOneDurableCommit(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{
		"internal/fileutil/durable.go":      true,
		"internal/fileutil/direct_linux.go": true,
		"internal/fileutil/direct_other.go": true,
		"shard/odirect_linux.go":            true, // the readers' O_DIRECT open (shard imports no writer plumbing)
	}
	renames := map[string]bool{
		"pipeline/commit.go":      true,
		"storage/publish.go":      true,
		"storage/rename_linux.go": true,
		"storage/rename_other.go": true,
		// Not a commit of data: a staging folder's lock file gets its name only once it is
		// locked, so that RemoveStale never finds it unlocked while its owner lives.
		"storage/staging.go": true,
	}
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "python") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		if allowed[rel] {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Sync" && len(n.Args) == 0 {
					t.Errorf("%s: %s calls Sync itself: commit through fileutil.Create, WriteFileAtomic or SyncDir", fset.Position(n.Pos()), rel)
				}
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Rename" && !renames[rel] {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" {
						t.Errorf("%s: %s renames a file itself: commit through fileutil.Create's Pending.Commit", fset.Position(n.Pos()), rel)
					}
				}
			case *ast.SelectorExpr:
				if n.Sel.Name == "O_DIRECT" {
					t.Errorf("%s: %s uses O_DIRECT itself: open through fileutil.OpenDirect", fset.Position(n.Pos()), rel)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("scanned only %d Go files under %s: not the module root?", files, root)
	}
}
