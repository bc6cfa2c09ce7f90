package video

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFolderAliasRefused: a class folder that is a symbolic link to another class folder
// (video and frames sources), or a video folder of frames linking to another video folder,
// would pack the same videos twice, under two labels at worst; Open and OpenFrames refuse
// the source, naming both paths.
func TestFolderAliasRefused(t *testing.T) {
	mk := func(root string, files ...string) {
		for _, f := range files {
			p := filepath.Join(root, filepath.FromSlash(f))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	link := func(old, new string) {
		if err := os.Symlink(old, new); err != nil {
			t.Skip("no symlinks:", err)
		}
	}
	// Frames: a class alias, then a video folder alias.
	root := t.TempDir()
	mk(root, "cat/v1/f1.png", "dog/v2/f1.png")
	link("cat", filepath.Join(root, "kitty"))
	if _, err := OpenFrames(root, Options{}); err == nil || !strings.Contains(err.Error(), "same folder") {
		t.Errorf("frames, class alias: %v", err)
	}
	root = t.TempDir()
	mk(root, "cat/v1/f1.png", "dog/v2/f1.png")
	link(filepath.Join("..", "cat", "v1"), filepath.Join(root, "dog", "v1copy"))
	if _, err := OpenFrames(root, Options{}); err == nil || !strings.Contains(err.Error(), "same folder") {
		t.Errorf("frames, video folder alias: %v", err)
	}
	// Video files: a class alias (checked before ffmpeg is looked for).
	root = t.TempDir()
	mk(root, "cat/a.mp4", "dog/b.mp4")
	link("dog", filepath.Join(root, "puppy"))
	if _, err := Open(root, Options{FFmpeg: filepath.Join(root, "no-such-ffmpeg")}); err == nil || !strings.Contains(err.Error(), "same folder") {
		t.Errorf("video, class alias: %v", err)
	}
}
