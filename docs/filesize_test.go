package docs

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxLines is the house limit of a non-test Go file (design.md "House style"): past
// it a file holds more than one concern, and is split by concern.
const maxLines = 800

// generated is Go's marker of a generated file, which no one edits by hand.
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// TestFileSize fails for every non-test Go file of the repository with more than
// maxLines non-blank lines, naming each with its count. Generated files, testdata and
// the console's node_modules are not the project's hand-written Go.
func TestFileSize(t *testing.T) {
	root := ".."
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "testdata", "vendor":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if generated.Match(b) {
			return nil
		}
		if n := nonBlank(b); n > maxLines {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s has %d non-blank lines, more than %d: split it by concern", filepath.ToSlash(rel), n, maxLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func nonBlank(b []byte) int {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			n++
		}
	}
	return n
}

func TestNonBlank(t *testing.T) {
	for _, tc := range []struct {
		text string
		want int
	}{
		{"", 0},
		{"a", 1},
		{"a\n\n \t\nb\n", 2},
		{"\n\n", 0},
		{"x\r\n\r\ny", 2},
	} {
		if got := nonBlank([]byte(tc.text)); got != tc.want {
			t.Errorf("nonBlank(%q) = %d, want %d", tc.text, got, tc.want)
		}
	}
}
