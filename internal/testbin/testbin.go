// Package testbin builds the real servers the tests run (etcd,
// kube-apiserver) through the repository's scripts, so that a machine with
// only Go runs them: scripts/NAME.sh build builds once, caches, and prints
// the binary's path on its last line.
package testbin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build runs scripts/NAME.sh build and returns the path it prints.
func Build(name string) (string, error) {
	script, err := Script(name)
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", script, "build")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s build: %v\nstdout:\n%s\nstderr:\n%s", script, err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	path := strings.TrimSpace(lines[len(lines)-1])
	if fi, err := os.Stat(path); err != nil || fi.IsDir() {
		return "", fmt.Errorf("%s build printed %q, which is not a file (stderr:\n%s)", script, path, stderr.String())
	}
	return path, nil
}

// Script finds scripts/NAME.sh, walking up from the working directory (a
// package directory under go test) to the repository root.
func Script(name string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	rel := filepath.Join("scripts", name+".sh")
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New(rel + " not found in any parent of the working directory")
		}
		dir = parent
	}
}
