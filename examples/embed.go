// Package examples embeds the example files users copy and edit, so that
// the binary can run them on a machine with nothing but itself.
package examples

import "embed"

// Strategies holds strategies/*.yaml: static, dynamic and hybrid.
//
//go:embed strategies/*.yaml
var Strategies embed.FS

// Policies holds policies/*.yaml.
//
//go:embed policies/*.yaml
var Policies embed.FS

// FS holds both, as they lie in this directory, so that a strategy can
// name its policy file relative to itself ("../policies/operators.yaml").
//
//go:embed strategies/*.yaml policies/*.yaml
var FS embed.FS
