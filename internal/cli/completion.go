package cli

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/client"
)

// Shell completion: cobra's `arbiter completion bash|zsh|fish|powershell`
// writes the script; the commands that take a name complete it from the
// server of the configured context (or --server, --token-file, --tenant
// as given on the line being completed), quietly offering nothing when the
// server cannot be reached or refuses the token.

// completeTimeout bounds the server call behind one completion: a shell
// waiting on Tab should not hang on an unreachable server.
const completeTimeout = 3 * time.Second

// complete returns a ValidArgsFunction offering, for the first argument,
// the names names lists that start with what was typed.
func (c *conn) complete(names func(ctx context.Context, c *conn, cl *client.Client) ([]string, error)) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		at, err := c.resolve()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c.at = at
		ctx, cancel := context.WithTimeout(cmd.Context(), completeTimeout)
		defer cancel()
		ns, err := names(ctx, c, client.New(at.server, at.token))
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, n := range ns {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		slices.Sort(out)
		return slices.Compact(out), cobra.ShellCompDirectiveNoFileComp
	}
}

// workloadNames are the names of the workloads the command would find:
// the given tenant's, else the token's (the admin's: every tenant's).
func workloadNames(ctx context.Context, c *conn, cl *client.Client) ([]string, error) {
	t, err := c.tenantOf(ctx, cl, false)
	if err != nil {
		return nil, err
	}
	ws, err := cl.Workloads(ctx, t, "")
	var out []string
	for _, w := range ws {
		out = append(out, w.Name)
	}
	return out, err
}

// reservationNames are the names of the reservations the command would
// find, as workloadNames.
func reservationNames(ctx context.Context, c *conn, cl *client.Client) ([]string, error) {
	var out []string
	var err error
	if t := c.givenTenant(); t != "" {
		rs, e := cl.Reservations(ctx, t)
		for _, r := range rs {
			out = append(out, r.Name)
		}
		err = e
	} else {
		rs, e := cl.AllReservations(ctx)
		for _, r := range rs {
			out = append(out, r.Name)
		}
		err = e
	}
	return out, err
}

// nodeNames are the fleet's node IDs (admin).
func nodeNames(ctx context.Context, _ *conn, cl *client.Client) ([]string, error) {
	ns, err := cl.Nodes(ctx, "")
	var out []string
	for _, n := range ns {
		out = append(out, n.ID)
	}
	return out, err
}

// tenantNames are the tenants' names (admin).
func tenantNames(ctx context.Context, _ *conn, cl *client.Client) ([]string, error) {
	ts, err := cl.Tenants(ctx)
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	return out, err
}
