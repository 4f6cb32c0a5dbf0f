// Command arbiter is the GPU capacity arbiter: scheduler, simulator,
// benchmarks, server and agent in one binary. All logic lives in
// internal/cli and the packages it wires together.
package main

import (
	"os"

	"github.com/arbiterhq/arbiter/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
