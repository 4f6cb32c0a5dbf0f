package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// Contexts. `arbiter login` stores a context — a server (or several
// replicas' URLs), the path of a token file and optionally a default
// tenant — in the user's configuration file, and makes it current; client
// commands then need no --server or token. Flags and the environment
// override the context. The file holds no secret: a context names the
// token's file, and the token is read from it at each command (why: see
// docs/security.md, "Contexts").
//
// The file is os.UserConfigDir()/arbiter/config.yaml (ARBITER_CONFIG
// overrides the path), written 0600 in a 0700 directory, atomically (a
// temporary file renamed over it). A configuration that others may write
// is refused, since it says where the token goes; so is a token file
// others may read.

// defaultServer is the server when nothing names one.
const defaultServer = "http://127.0.0.1:7070"

// maxConfig bounds the configuration file.
const maxConfig = 1 << 20

// clientConfig is the configuration file.
type clientConfig struct {
	CurrentContext string       `yaml:"current-context,omitempty"`
	Contexts       []cliContext `yaml:"contexts,omitempty"`
}

// cliContext is one context: where to connect and with which token.
type cliContext struct {
	Name string `yaml:"name"`
	// Server is one URL or several replicas' URLs separated by commas.
	Server string `yaml:"server"`
	// TokenFile is the absolute path of the file holding the token.
	TokenFile string `yaml:"token-file"`
	// Tenant is the tenant commands act on when none is given.
	Tenant string `yaml:"tenant,omitempty"`
}

// find returns the context named name, or nil.
func (cfg *clientConfig) find(name string) *cliContext {
	for i := range cfg.Contexts {
		if cfg.Contexts[i].Name == name {
			return &cfg.Contexts[i]
		}
	}
	return nil
}

// names lists the contexts' names, for messages.
func (cfg *clientConfig) names() string {
	var ns []string
	for _, c := range cfg.Contexts {
		ns = append(ns, fmt.Sprintf("%q", c.Name))
	}
	if len(ns) == 0 {
		return "there are none: run `arbiter login --server URL --token-file FILE`"
	}
	return "the contexts are " + strings.Join(ns, ", ")
}

// configPath is the configuration file's path; owned says it is the
// default one, whose directory Arbiter owns.
func configPath() (path string, owned bool, err error) {
	if p := os.Getenv("ARBITER_CONFIG"); p != "" {
		return p, false, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", false, fmt.Errorf("finding the user's configuration directory (set ARBITER_CONFIG to the file to use): %w", err)
	}
	return filepath.Join(dir, "arbiter", "config.yaml"), true, nil
}

// checkPrivate refuses, on systems with Unix permissions, a file whose
// permission bits in mask others have: what names the file.
func checkPrivate(what, path string, fi fs.FileInfo, mask fs.FileMode, verb string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	if perm := fi.Mode().Perm(); perm&mask != 0 {
		return fmt.Errorf("%s %s is %s by other users (mode %04o): run chmod 600 %s", what, path, verb, perm, path)
	}
	return nil
}

// loadConfig reads the configuration at path; a missing file is an empty
// configuration.
func loadConfig(path string) (*clientConfig, error) {
	cfg := &clientConfig{}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return nil, fmt.Errorf("the configuration: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("the configuration: %w", err)
	}
	if err := checkPrivate("the configuration", path, fi, 0o022, "writable"); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfig+1))
	if err != nil {
		return nil, fmt.Errorf("the configuration: %w", err)
	}
	if len(data) > maxConfig {
		return nil, fmt.Errorf("the configuration %s is larger than %d bytes", path, maxConfig)
	}
	if err := yamlfile.Decode(path, data, cfg); err != nil {
		return nil, err
	}
	var errs []error
	seen := map[string]bool{}
	for i, c := range cfg.Contexts {
		switch {
		case c.Name == "" || c.Server == "" || c.TokenFile == "":
			errs = append(errs, fmt.Errorf("%s: contexts[%d]: name, server and token-file are required", path, i))
		case seen[c.Name]:
			errs = append(errs, fmt.Errorf("%s: contexts[%d]: context %q appears twice", path, i, c.Name))
		}
		seen[c.Name] = true
	}
	if cfg.CurrentContext != "" && !seen[cfg.CurrentContext] {
		errs = append(errs, fmt.Errorf("%s: current-context %q is not one of the contexts: run `arbiter config use-context NAME`", path, cfg.CurrentContext))
	}
	return cfg, errors.Join(errs...)
}

// saveConfig writes cfg to path atomically: a temporary file in the same
// directory, 0600, synced, renamed over the old one. The directory is
// made 0700; the default one (owned) is set to 0700 if it was wider.
func saveConfig(path string, owned bool, cfg *clientConfig) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("saving the configuration: %w", err)
	}
	if owned {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("saving the configuration: %w", err)
		}
	}
	var buf bytes.Buffer
	buf.WriteString("# Arbiter's client contexts: written by `arbiter login` and `arbiter config`.\n# It holds no token, only the path of each context's token file.\n")
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(cfg); err != nil {
		return err
	}
	data := buf.Bytes()
	f, err := os.CreateTemp(dir, ".config-*.yaml.tmp")
	if err != nil {
		return fmt.Errorf("saving the configuration: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing there
	err = f.Chmod(0o600)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("saving the configuration %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil { // make the rename durable
		d.Sync()
		d.Close()
	}
	return nil
}

// readContextToken reads a context's token from its file.
func readContextToken(c *cliContext) (string, error) {
	tok, err := readPrivateToken(fmt.Sprintf("context %q", c.Name), c.TokenFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w (give the context a token file again: `arbiter login --name %s --server URL --token-file FILE`)", err, c.Name)
	}
	return tok, err
}

// readPrivateToken reads a token file that other users must not be able
// to read or write; what names where the path came from.
func readPrivateToken(what, path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if err := checkPrivate(what+": the token file", path, fi, 0o077, "accessible"); err != nil {
		return "", err
	}
	return readTokenFile(what, path)
}

// serverSet is a server list in the form the client compares
// (client.CanonicalServers).
func serverSet(list string) []string { return client.CanonicalServers(list) }

// sameServers reports whether every server of list is one of the
// context's: only then does a context's token go with the request.
func sameServers(list, contextList string) bool {
	have := serverSet(contextList)
	want := serverSet(list)
	if len(want) == 0 {
		return false
	}
	for _, s := range want {
		if !slices.Contains(have, s) {
			return false
		}
	}
	return true
}

// firstHost is the host:port of a server list's first URL, for default
// context names.
func firstHost(list string) string {
	s := serverSet(list)
	if len(s) == 0 {
		return "server"
	}
	if u, err := url.Parse(s[0]); err == nil && u.Host != "" {
		return u.Host
	}
	return s[0]
}

// validContextName: 1 to 128 printable characters, no spaces.
func validContextName(n string) bool {
	return n != "" && len(n) <= 128 && !strings.ContainsFunc(n, func(r rune) bool { return r <= ' ' || r == 0x7f })
}
