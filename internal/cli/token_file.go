package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// ErrTokenTwice is returned when a token is given both inline and as a file.
var ErrTokenTwice = errors.New("give --token or --token-file, not both")

// maxTokenFile bounds a token file: tokens are short.
const maxTokenFile = 64 << 10

// resolveToken returns the bearer token from, in order: --token,
// --token-file, ARBITER_TOKEN_FILE, ARBITER_TOKEN. A secret on a command
// line is visible to every user of the machine (ps); files and the
// environment are not, so documentation uses --token-file.
func resolveToken(flagToken, flagFile string) (string, error) {
	tok, _, err := resolveTokenFrom(flagToken, flagFile)
	return tok, err
}

// resolveTokenFrom is resolveToken that also says where the token came
// from ("--token-file FILE", "ARBITER_TOKEN", ...), for messages.
func resolveTokenFrom(flagToken, flagFile string) (tok, from string, err error) {
	switch {
	case flagToken != "" && flagFile != "":
		return "", "", ErrTokenTwice
	case flagToken != "":
		return flagToken, "--token", nil
	case flagFile != "":
		tok, err := readTokenFile("--token-file", flagFile)
		return tok, "--token-file " + flagFile, err
	}
	envFile, envToken := os.Getenv("ARBITER_TOKEN_FILE"), os.Getenv("ARBITER_TOKEN")
	switch {
	case envFile != "" && envToken != "":
		return "", "", errors.New("set ARBITER_TOKEN_FILE or ARBITER_TOKEN, not both")
	case envFile != "":
		tok, err := readTokenFile("ARBITER_TOKEN_FILE", envFile)
		return tok, "ARBITER_TOKEN_FILE " + envFile, err
	case envToken != "":
		return envToken, "ARBITER_TOKEN", nil
	}
	return "", "", nil
}

// readTokenFile reads a token file; what names where the path came from.
func readTokenFile(what, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("%s: %s is larger than %d bytes; it should hold just the token", what, path, maxTokenFile)
	}
	tok, err := parseTokenFile(b)
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", what, path, err)
	}
	return tok, nil
}

// parseTokenFile returns the token a file holds: its content less one
// trailing newline (\n or \r\n). It must be one non-empty line.
func parseTokenFile(b []byte) (string, error) {
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	switch {
	case s == "":
		return "", errors.New("the token file is empty")
	case strings.ContainsAny(s, "\r\n"):
		return "", errors.New("the token file holds more than one line")
	case strings.TrimSpace(s) != s:
		return "", errors.New("the token has leading or trailing spaces")
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "", errors.New("the token contains control characters")
	}
	return s, nil
}
