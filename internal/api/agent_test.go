package api

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandDir: a command's dir stays inside the replica's working
// directory: relative, without "..".
func TestCommandDir(t *testing.T) {
	for _, c := range []struct {
		dir string
		ok  bool
	}{
		{"", true}, {"src", true}, {"a/b/c", true}, {"./a", true}, {"a/./b", true}, {"a..b", true}, {"...", true},
		{"/", false}, {"/etc", false}, {"..", false}, {"../x", false}, {"a/../../x", false}, {"a/..", false}, {"a\\..\\..", false},
		{"a\x00b", false}, {strings.Repeat("a", 5000), false},
	} {
		field, msg := (&Command{Argv: []string{"x"}, Dir: c.dir}).Validate()
		if (field == "") != c.ok {
			t.Errorf("dir %q: %s %s, want ok %v", c.dir, field, msg, c.ok)
		}
		if !c.ok && field != "command.dir" {
			t.Errorf("dir %q: error names %q, want command.dir", c.dir, field)
		}
	}
	if field, _ := (&Command{Argv: []string{"x"}, Env: map[string]string{"A": "b\x00"}}).Validate(); field != "command.env" {
		t.Errorf("a NUL in an environment value: %q", field)
	}
}

// FuzzCommandDir: every dir Validate accepts resolves inside the working
// directory.
func FuzzCommandDir(f *testing.F) {
	for _, s := range []string{"", "a", "a/b", "..", "../a", "/a", "a/../..", "a//b/", ".", "./..", "a\\b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dir string) {
		if field, _ := (&Command{Argv: []string{"x"}, Dir: dir}).Validate(); field != "" {
			return
		}
		const work = "/data/work/t_w/replica-0"
		got := filepath.Join(work, filepath.Clean("/"+dir))
		if got != work && !strings.HasPrefix(got, work+"/") {
			t.Fatalf("dir %q accepted but resolves to %q", dir, got)
		}
		if rel := filepath.Join(work, dir); rel != work && !strings.HasPrefix(rel, work+"/") {
			t.Fatalf("dir %q accepted but joins to %q", dir, rel)
		}
	})
}
