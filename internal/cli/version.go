package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Version and Commit are set at build time; scripts/release.sh passes
//
//	-ldflags "-X github.com/arbiterhq/arbiter/internal/cli.Version=v1.2.0 -X github.com/arbiterhq/arbiter/internal/cli.Commit=0123abc"
//
// Without them a binary is "dev", and its commit is the one go build
// stamped from the checkout, if any.
var (
	Version = "dev"
	Commit  = ""
)

// VersionLine is what `arbiter version` prints: version, commit, Go version
// and platform.
func VersionLine() string {
	return fmt.Sprintf("arbiter %s (commit %s, %s, %s/%s)", Version, binaryCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// binaryCommit is Commit, or the one go build stamped when none was set.
func binaryCommit() string {
	if Commit != "" {
		return Commit
	}
	return vcsCommit()
}

// vcsCommit is the revision go build stamped into the binary, "-dirty" when
// the checkout had changes; "unknown" when there is none (go run, go test,
// -buildvcs=false).
func vcsCommit() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", ""
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "unknown"
	}
	return rev[:min(len(rev), 12)] + dirty
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), VersionLine())
			return nil
		},
	}
}
