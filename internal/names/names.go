// Package names holds the one rule for the names of tenants,
// reservations, partitions, workloads, tokens, regions, zones, blocks and
// node IDs, shared by the API and the config files: 1-63 letters, digits,
// '-', '_' and '.', starting with a letter or digit. Names are parts of
// store keys ("tenant/name"), so a '/' in one would let a tenant named
// "a" reach the objects of a tenant named "a/b".
package names

import "fmt"

// MaxLen is the longest valid name.
const MaxLen = 63

// Rule says what a valid name is, for messages.
const Rule = "use 1-63 letters, digits, '-', '_' or '.', starting with a letter or digit"

// Valid reports whether n follows the rule.
func Valid(n string) bool {
	if n == "" || len(n) > MaxLen {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || (c != '-' && c != '_' && c != '.')) {
			return false
		}
	}
	return true
}

// Check returns an error naming n when it breaks the rule.
func Check(n string) error {
	if Valid(n) {
		return nil
	}
	return fmt.Errorf("invalid name %q: %s", n, Rule)
}
