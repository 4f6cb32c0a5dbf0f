// Package cli holds the arbiter command tree. Each command lives in its own
// file and is registered in NewRoot; main only calls Main.
package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// NewRoot builds the full command tree writing to stdout and stderr.
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "arbiter",
		Short:         "Arbiter divides a multi-region GPU fleet between competing claimants",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(
		newVersionCmd(),
		newLoginCmd(),
		newConfigCmd(),
		newBenchCmd(),
		newScheduleCmd(),
		newValidateCmd(),
		newSimCmd(),
		withServerPolicyCmds(newPolicyCmd()),
		newServeCmd(),
		newUsageCmd(),
		newReservationCmd(),
		newWorkloadCmd(),
		newTenantCmd(),
		newPartitionCmd(),
		newNodeCmd(),
		newAgentCmd(),
		newRegionCmd(),
		newAlertCmd(),
		newProbeCmd(),
		newMetricCmd(),
		newEventsCmd(),
		newCostCmd(),
		newAdvisorCmd(),
		newTokenCmd(),
		newAdminCmd(),
		newKubeCmd(),
	)
	return root
}

// Main runs the command line and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	root := NewRoot(stdout, stderr)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintf(stderr, "arbiter: %v\n", err)
		return 1
	}
	return 0
}
