package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

func partitionTable(ps []api.Partition) func(tw *tabwriter.Writer) {
	return func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "NAME\tTENANT\tBLOCKS\tNODES\tMACHINES\tGPUS")
		for _, p := range ps {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\n", p.Name, p.Tenant, dash(strings.Join(p.Blocks, ",")), dash(strings.Join(p.Nodes, ",")), p.Machines, p.GPUs)
		}
	}
}

// newPartitionCmd: arbiter partition list|set|delete (admin).
func newPartitionCmd() *cobra.Command {
	var c conn
	cmd := &cobra.Command{Use: "partition", Aliases: []string{"partitions"}, Short: "Partitions: machines only one tenant's subtree may use (admin)", Args: cobra.NoArgs}
	c.bind(cmd)
	listCmd := &cobra.Command{
		Use: "list", Short: "List partitions with their machines and GPUs", Args: cobra.NoArgs,
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			ps, err := cl.ListPartitions(ctx)
			if err != nil {
				return err
			}
			return c.emit(out, ps, partitionTable(ps))
		}),
	}
	var req api.PartitionRequest
	set := &cobra.Command{
		Use:   "set NAME --tenant T [--block B]... [--node N]...",
		Short: "Create or replace a partition",
		Args:  cobra.ExactArgs(1),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			if req.Tenant == "" {
				return errors.New("partition set: --tenant is required")
			}
			p, err := cl.SetPartition(ctx, args[0], req)
			if err != nil {
				return err
			}
			return c.emit(out, p, partitionTable([]api.Partition{p}))
		}),
	}
	sf := set.Flags()
	// A local --tenant: the partition's owner, never ARBITER_TENANT.
	sf.StringVar(&req.Tenant, "tenant", "", "tenant whose subtree alone may use the partition (required)")
	sf.StringArrayVar(&req.Blocks, "block", nil, "block whose machines, now and later, are in the partition (repeatable)")
	sf.StringArrayVar(&req.Nodes, "node", nil, "machine in the partition (repeatable)")
	del := &cobra.Command{
		Use: "delete NAME", Short: "Remove a partition; its machines return to the shared pool", Args: cobra.ExactArgs(1),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			if err := cl.DeletePartition(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(out, "partition %s deleted\n", args[0])
			return nil
		}),
	}
	cmd.AddCommand(listCmd, set, del)
	return cmd
}
