package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

func tokenScope(t api.Token) string {
	switch {
	case t.Tenant != "":
		return "tenant " + t.Tenant
	case t.Node != "":
		return "node " + t.Node
	}
	return "-"
}

func timeStr(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func tokenTable(ts []api.Token, secret bool) func(tw *tabwriter.Writer) {
	return func(tw *tabwriter.Writer) {
		head := "ID\tNAME\tROLE\tSCOPE\tCREATED\tLAST USED\tEXPIRES"
		if secret {
			head += "\tSECRET"
		}
		fmt.Fprintln(tw, head)
		for _, t := range ts {
			line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", t.ID, t.Name, t.Role, tokenScope(t), timeStr(t.CreatedAt), timeStr(t.LastUsedAt), timeStr(t.ExpiresAt))
			if secret {
				line += "\t" + t.Secret
			}
			fmt.Fprintln(tw, line)
		}
	}
}

// newTokenCmd: arbiter token list|create|revoke|rotate. The admin
// manages every token; a tenant token its own tenant's.
func newTokenCmd() *cobra.Command {
	var c conn
	cmd := &cobra.Command{Use: "token", Aliases: []string{"tokens"}, Short: "API tokens: list, create, revoke, rotate (secrets are shown once)", Args: cobra.NoArgs}
	c.bind(cmd)
	listCmd := &cobra.Command{
		Use: "list", Short: "List tokens with their role, scope, creation, last use and expiry", Args: cobra.NoArgs,
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			ts, err := cl.Tokens(ctx)
			if err != nil {
				return err
			}
			return c.emit(out, ts, tokenTable(ts, false))
		}),
	}
	var req api.TokenCreate
	var expiresIn, expiresAt string
	create := &cobra.Command{
		Use:   "create [--role admin|tenant|node|metrics] [--tenant T] [--node N] [--name NAME] [--expires-in 30d | --expires-at RFC3339]",
		Short: "Create a token; the secret is shown once",
		Long: `Creates a token of a role: tenant (the tenant of --tenant, ARBITER_TENANT or
the calling tenant token), node (--node: it may register and heartbeat that
node only), metrics (it may scrape /metrics only) or admin. A tenant token
may create tenant tokens of its own tenant only.`,
		Args: cobra.NoArgs,
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			r := req
			if r.Role == "" {
				r.Role = "tenant"
				if r.Node != "" {
					r.Role = "node"
				}
			}
			if r.Role == "tenant" {
				t, err := c.tenantOf(ctx, cl, true)
				if err != nil {
					return err
				}
				r.Tenant = t
			}
			if expiresIn != "" && expiresAt != "" {
				return errors.New("token create: pass --expires-in or --expires-at, not both")
			}
			if expiresIn != "" {
				if err := r.ExpiresIn.UnmarshalYAMLScalar(expiresIn); err != nil || r.ExpiresIn <= 0 {
					return fmt.Errorf("token create: --expires-in: want a positive duration such as 12h or 30d")
				}
			}
			if expiresAt != "" {
				at, err := time.Parse(time.RFC3339, expiresAt)
				if err != nil {
					return fmt.Errorf("token create: --expires-at: want a time such as 2026-12-31T00:00:00Z")
				}
				r.ExpiresAt = at
			}
			t, err := cl.CreateTokenOf(ctx, r)
			if err != nil {
				return err
			}
			return c.emit(out, t, tokenTable([]api.Token{t}, true))
		}),
	}
	cf := create.Flags()
	cf.StringVar(&req.Role, "role", "", "admin, tenant, node or metrics (default: node with --node, else tenant)")
	cf.StringVar(&req.Node, "node", "", "the node a node token acts for")
	cf.StringVar(&req.Name, "name", "", "token name (default: the role)")
	cf.StringVar(&expiresIn, "expires-in", "", "the token expires after this long (e.g. 12h, 30d)")
	cf.StringVar(&expiresAt, "expires-at", "", "the token expires at this time (RFC 3339)")
	revoke := &cobra.Command{
		Use: "revoke ID", Short: "Revoke a token: it is refused from the next request on", Args: cobra.ExactArgs(1),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			if err := cl.RevokeToken(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(out, "token %s revoked\n", args[0])
			return nil
		}),
	}
	rotate := &cobra.Command{
		Use: "rotate ID", Short: "Give a token a new secret (shown once); the old one is refused at once", Args: cobra.ExactArgs(1),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			t, err := cl.RotateToken(ctx, args[0])
			if err != nil {
				return err
			}
			return c.emit(out, t, tokenTable([]api.Token{t}, true))
		}),
	}
	cmd.AddCommand(listCmd, create, revoke, rotate)
	return cmd
}
