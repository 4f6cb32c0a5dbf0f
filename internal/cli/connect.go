package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

// How a client command connects. Each part is taken from the first that
// gives it:
//
//	server: --server, ARBITER_SERVER, the context, http://127.0.0.1:7070
//	token:  --token, --token-file, ARBITER_TOKEN_FILE, ARBITER_TOKEN, the context's token file
//	tenant: --tenant, ARBITER_TENANT, the context's tenant, the token's own
//
// The context is --context, ARBITER_CONTEXT or the current one. Its token
// and tenant apply only when every server the command talks to is one of
// the context's: a context's token never goes to a server named for
// something else (--server http://elsewhere needs its own token).

// target is where a command connects and with which token, with where
// each came from, for messages.
type target struct {
	server, serverFrom string // serverFrom: "--server", "ARBITER_SERVER", `context "x"` or "" (the default)
	token, tokenFrom   string
	context            *cliContext // the context in use; nil when none applies
}

// resolve finds the command's server, token and context.
func (c *conn) resolve() (target, error) {
	var at target
	cx, err := selectedContext(c.context)
	if err != nil {
		return at, err
	}
	switch env := os.Getenv("ARBITER_SERVER"); {
	case c.server != "":
		at.server, at.serverFrom = c.server, "--server"
	case env != "":
		at.server, at.serverFrom = env, "ARBITER_SERVER"
	case cx != nil:
		at.server, at.serverFrom = cx.Server, fmt.Sprintf("context %q", cx.Name)
	default:
		at.server = defaultServer
	}
	if cx != nil && sameServers(at.server, cx.Server) {
		at.context = cx
	}
	if at.token, at.tokenFrom, err = resolveTokenFrom(c.token, c.tokenFile); err != nil {
		return at, err
	}
	if at.token == "" && at.context != nil {
		if at.token, err = readContextToken(at.context); err != nil {
			return at, err
		}
		at.tokenFrom = fmt.Sprintf("context %q (token file %s)", at.context.Name, at.context.TokenFile)
	}
	if at.token == "" {
		if cx != nil {
			return at, fmt.Errorf("no token for %s: context %q is for %s, and its token is sent to its own servers only; pass --token-file FILE, or run `arbiter login --server %s --token-file FILE`", at.server, cx.Name, cx.Server, at.server)
		}
		return at, fmt.Errorf("no token: run `arbiter login --server %s --token-file FILE` once, or pass --token-file FILE or set ARBITER_TOKEN_FILE (`arbiter serve` writes the admin token to DATA/admin.token)", at.server)
	}
	return at, nil
}

// selectedContext returns the context named by --context, ARBITER_CONTEXT
// or the configuration's current context; nil when there is none.
func selectedContext(flag string) (*cliContext, error) {
	path, _, err := configPath()
	if err != nil {
		return nil, err
	}
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, err
	}
	name, from := flag, "--context"
	if name == "" {
		name, from = os.Getenv("ARBITER_CONTEXT"), "ARBITER_CONTEXT"
	}
	if name == "" {
		if cfg.CurrentContext == "" {
			return nil, nil
		}
		name, from = cfg.CurrentContext, "current-context"
	}
	cx := cfg.find(name)
	if cx == nil {
		return nil, fmt.Errorf("%s %q: no such context in %s; %s", from, name, path, cfg.names())
	}
	return cx, nil
}

// client returns the command's client, after checking the output format.
func (c *conn) client() (*client.Client, error) {
	if err := checkOutput(c.output); err != nil {
		return nil, err
	}
	at, err := c.resolve()
	if err != nil {
		return nil, err
	}
	c.at = at
	return client.New(at.server, at.token), nil
}

// givenTenant is the tenant named by --tenant, ARBITER_TENANT or the
// context in use; "" when none is.
func (c *conn) givenTenant() string {
	t := firstNonEmpty(c.tenant, os.Getenv("ARBITER_TENANT"))
	if t == "" && c.at.context != nil {
		t = c.at.context.Tenant
	}
	return t
}

// errNoTenant: the admin acts for no tenant.
var errNoTenant = errors.New("the admin token acts for no tenant: pass --tenant or set ARBITER_TENANT (or give the context a default tenant: `arbiter login --tenant T`)")

// tenantOf returns the tenant to act on; required means an admin token
// must name one.
func (c *conn) tenantOf(ctx context.Context, cl *client.Client, required bool) (string, error) {
	if t := c.givenTenant(); t != "" {
		return t, nil
	}
	me, err := cl.WhoAmI(ctx)
	if err != nil {
		return "", err
	}
	if me.Admin && required {
		return "", errNoTenant
	}
	return me.Tenant, nil
}

// tenantHolding returns the tenant of the kind ("workload",
// "reservation") named name: the tenant given, else the token's. The
// admin, acting for no tenant, gets the one tenant holding a kind of that
// name (tenantsOf lists them); none or several is an error saying which.
func (c *conn) tenantHolding(ctx context.Context, cl *client.Client, kind, name string, tenantsOf func(context.Context, string) ([]string, error)) (string, error) {
	if t := c.givenTenant(); t != "" {
		return t, nil
	}
	me, err := cl.WhoAmI(ctx)
	if err != nil {
		return "", err
	}
	if !me.Admin {
		return me.Tenant, nil
	}
	ts, err := tenantsOf(ctx, name)
	if err != nil {
		return "", err
	}
	slices.Sort(ts)
	switch len(ts) {
	case 0:
		return "", fmt.Errorf("no tenant has a %s named %q (`arbiter %s list` lists them all)", kind, name, kind)
	case 1:
		return ts[0], nil
	}
	return "", fmt.Errorf("%d tenants have a %s named %q: %s; pass --tenant to say which", len(ts), kind, name, strings.Join(ts, ", "))
}

// workloadTenants lists the tenants holding a workload named name.
func workloadTenants(cl *client.Client) func(context.Context, string) ([]string, error) {
	return func(ctx context.Context, name string) ([]string, error) {
		ws, err := cl.WorkloadsNamed(ctx, name)
		var ts []string
		for _, w := range ws {
			ts = append(ts, w.Tenant)
		}
		return ts, err
	}
}

// reservationTenants lists the tenants holding a reservation named name.
func reservationTenants(cl *client.Client) func(context.Context, string) ([]string, error) {
	return func(ctx context.Context, name string) ([]string, error) {
		rs, err := cl.ReservationsNamed(ctx, name)
		var ts []string
		for _, r := range rs {
			ts = append(ts, r.Tenant)
		}
		return ts, err
	}
}

// run wraps a command body with a client and a context of two minutes.
func (c *conn) run(fn func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error) func(*cobra.Command, []string) error {
	return c.runFor(2*time.Minute, fn)
}

// runFor wraps a command body with a client and a context ending after
// timeout (0: with the command). Its errors name the command and say what
// to do, not which REST call failed.
func (c *conn) runFor(timeout time.Duration, fn func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		name := commandName(cmd)
		cl, err := c.client()
		if err != nil {
			return named(name, err)
		}
		ctx := cmd.Context()
		if timeout > 0 && !c.watching { // a watch lasts until Ctrl-C
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		return c.explain(name, fn(ctx, cl, cmd.OutOrStdout(), args))
	}
}

// commandName is the command's path without the program's name
// ("workload show").
func commandName(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// named prefixes err with the command's name unless it already starts
// with it.
func named(name string, err error) error {
	if err == nil || strings.HasPrefix(err.Error(), name+":") {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}

// explain turns the client's errors into what the user can act on: an
// unreachable server, a refused token; and names the command.
func (c *conn) explain(name string, err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	var ae *api.Error
	var ue *url.Error
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusUnauthorized:
		hint := "pass it with --token-file, or run `arbiter login` with it"
		if name == "login" {
			hint = "log in with it"
		}
		err = &explained{fmt.Sprintf("the token was refused: %s (the token of %s): get a valid one from an admin (`arbiter token create`, `arbiter tenant token create`) and %s", ae.Message, c.at.tokenFrom, hint), err}
	case errors.As(err, &ue):
		err = c.unreachable(ue)
	}
	return named(name, err)
}

// explained is an error with a message of its own that still unwraps to
// the error it explains (errors.As finds the *api.Error).
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// unreachable explains a transport error without the REST call it came
// from.
func (c *conn) unreachable(ue *url.Error) error {
	where := c.at.server
	if c.at.serverFrom != "" && strings.HasPrefix(c.at.serverFrom, "context") {
		where += " (the server of " + c.at.serverFrom + ")"
	}
	var op *net.OpError
	switch {
	case errors.As(ue, &op) && op.Op == "dial":
		return &explained{fmt.Sprintf("cannot reach %s: is `arbiter serve` running? Set --server or run `arbiter login` (%v)", where, op.Err), ue}
	case ue.Timeout():
		return &explained{fmt.Sprintf("%s did not answer in time: the server may be overloaded, or --server names the wrong one", where), ue}
	}
	return &explained{fmt.Sprintf("the connection to %s failed: %v", where, ue.Err), ue}
}
