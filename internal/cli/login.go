package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/client"
)

// newLoginCmd: arbiter login --server URL --token-file FILE [--name NAME]
// [--tenant T]. It checks the token against the server, stores the context
// (the token file's path, never the token) and makes it current.
func newLoginCmd() *cobra.Command {
	var server, tokenFile, name, tenant string
	cmd := &cobra.Command{
		Use:   "login --server URL --token-file FILE [--name NAME] [--tenant T]",
		Short: "Store a context (server, token file, default tenant) and make it current: later commands need no --server or token",
		Long: `Checks the token in FILE against the server, then stores a context in the
user's configuration (` + "`arbiter config get-contexts`" + ` shows where) and makes it
current. The context keeps the token file's absolute path, not the token:
the token is read from the file at each command, so keep the file (mode
0600; a file other users may read is refused). A token is never taken from
the command line, where other users see it in ps.

--server may list several replicas' URLs separated by commas. The context's
token is sent only to its own servers: a command given another --server
needs a token of its own. Flags and environment variables (ARBITER_SERVER,
ARBITER_TOKEN_FILE, ARBITER_TENANT, ...) override the context.

The context's name is --name, or WHO@HOST:PORT (admin@127.0.0.1:7070,
contoso@arbiter.example.com:443); logging in again under a name replaces
that context.`,
		Example: "  arbiter login --server http://127.0.0.1:7070 --token-file arbiter-data/admin.token\n" +
			"  arbiter login --server https://a:7070,https://b:7070 --token-file ~/.config/arbiter/contoso.token --name prod --tenant contoso",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			server = firstNonEmpty(server, os.Getenv("ARBITER_SERVER"), defaultServer)
			tokenFile = firstNonEmpty(tokenFile, os.Getenv("ARBITER_TOKEN_FILE"))
			if tokenFile == "" {
				return errors.New("login: --token-file FILE is required: the file holding the token (login stores its path; a token is never taken from the command line)")
			}
			abs, err := filepath.Abs(tokenFile)
			if err != nil {
				return fmt.Errorf("login: --token-file: %w", err)
			}
			if name != "" && !validContextName(name) {
				return fmt.Errorf("login: --name %q: use 1 to 128 printable characters without spaces", name)
			}
			tok, err := readPrivateToken("--token-file", abs)
			if err != nil {
				return named("login", err)
			}
			// Check the token, and learn whom it acts for.
			c := conn{at: target{server: server, serverFrom: "--server", tokenFrom: "--token-file " + tokenFile}}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			cl := client.New(server, tok)
			me, err := cl.WhoAmI(ctx)
			if err != nil {
				return c.explain("login", err)
			}
			who := "admin"
			switch {
			case me.Admin:
			case me.Role == "tenant":
				who = me.Tenant
				if tenant != "" && tenant != me.Tenant {
					return fmt.Errorf("login: --tenant %s: this token acts for tenant %s only", tenant, me.Tenant)
				}
			case me.Role == "node":
				return fmt.Errorf("login: this is node %s's token: it is for `arbiter agent --token-file`, not for the CLI", me.Node)
			default:
				return fmt.Errorf("login: this %s token may only scrape /metrics; log in with an admin or tenant token", me.Role)
			}
			if tenant != "" && me.Admin {
				if _, err := cl.Tenant(ctx, tenant); err != nil {
					return c.explain("login", fmt.Errorf("--tenant: %w", err))
				}
			}
			if name == "" {
				name = who + "@" + firstHost(server)
			}
			path, owned, err := configPath()
			if err != nil {
				return named("login", err)
			}
			cfg, err := loadConfig(path)
			if err != nil {
				return named("login", err)
			}
			cx := cliContext{Name: name, Server: server, TokenFile: abs, Tenant: tenant}
			if old := cfg.find(name); old != nil {
				*old = cx
			} else {
				cfg.Contexts = append(cfg.Contexts, cx)
			}
			cfg.CurrentContext = name
			if err := saveConfig(path, owned, cfg); err != nil {
				return named("login", err)
			}
			as := "admin"
			if !me.Admin {
				as = "tenant " + me.Tenant
			}
			fmt.Fprintf(cmd.OutOrStdout(), "logged in to %s as %s: context %q is current (in %s; its token is read from %s)\n", server, as, name, path, abs)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&server, "server", "", "server URL, or several replicas' URLs separated by commas (env ARBITER_SERVER, default "+defaultServer+")")
	f.StringVar(&tokenFile, "token-file", "", "file holding the token; the context stores its path (env ARBITER_TOKEN_FILE)")
	f.StringVar(&name, "name", "", "the context's name (default: WHO@HOST:PORT)")
	f.StringVar(&tenant, "tenant", "", "the tenant commands act on by default (for an admin token)")
	return cmd
}

// contextRow is a context as get-contexts shows it.
type contextRow struct {
	Current   bool   `json:"current" yaml:"current"`
	Name      string `json:"name" yaml:"name"`
	Server    string `json:"server" yaml:"server"`
	TokenFile string `json:"token_file" yaml:"token_file"`
	Tenant    string `json:"tenant,omitempty" yaml:"tenant,omitempty"`
}

// newConfigCmd: arbiter config get-contexts|use-context|current-context|delete-context.
func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Client contexts: get-contexts, use-context, current-context, delete-context (`arbiter login` adds them)",
		Long: `Client contexts, stored mode 0600 in the user's configuration directory:
~/.config/arbiter/config.yaml on Linux ($XDG_CONFIG_HOME/arbiter when set),
~/Library/Application Support/arbiter/config.yaml on macOS; ARBITER_CONFIG
names another file. ` + "`arbiter login`" + ` adds a context and makes it current.
A context holds the server(s), the path of the token's file (never the
token) and optionally a default tenant. --context NAME (env ARBITER_CONTEXT)
picks another one for one command.`,
		Args: cobra.NoArgs,
	}
	load := func() (string, bool, *clientConfig, error) {
		path, owned, err := configPath()
		if err != nil {
			return "", false, nil, err
		}
		cfg, err := loadConfig(path)
		return path, owned, cfg, err
	}
	var output string
	get := &cobra.Command{
		Use: "get-contexts", Short: "List the contexts: CURRENT, NAME, SERVER, TOKEN FILE, TENANT (never a token)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, _, cfg, err := load()
			if err != nil {
				return named("config get-contexts", err)
			}
			rows := []contextRow{}
			for _, c := range cfg.Contexts {
				rows = append(rows, contextRow{Current: c.Name == cfg.CurrentContext, Name: c.Name, Server: c.Server, TokenFile: c.TokenFile, Tenant: c.Tenant})
			}
			out := cmd.OutOrStdout()
			if err := checkOutput(output); err != nil {
				return named("config get-contexts", err)
			}
			if len(rows) == 0 && (output == "table" || output == "wide") {
				fmt.Fprintf(out, "no contexts in %s: run `arbiter login --server URL --token-file FILE`\n", path)
				return nil
			}
			return (&conn{output: output}).emit(out, rows, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "CURRENT\tNAME\tSERVER\tTOKEN FILE\tTENANT")
				for _, r := range rows {
					cur := ""
					if r.Current {
						cur = "*"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cur, r.Name, r.Server, r.TokenFile, dash(r.Tenant))
				}
			})
		},
	}
	get.Flags().StringVarP(&output, "output", "o", "table", "output format: "+strings.Join(outputFormats, ", "))
	use := &cobra.Command{
		Use: "use-context NAME", Short: "Make a context the current one", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, owned, cfg, err := load()
			if err != nil {
				return named("config use-context", err)
			}
			if cfg.find(args[0]) == nil {
				return fmt.Errorf("config use-context: no context %q in %s; %s", args[0], path, cfg.names())
			}
			cfg.CurrentContext = args[0]
			if err := saveConfig(path, owned, cfg); err != nil {
				return named("config use-context", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "context %q is current\n", args[0])
			return nil
		},
	}
	current := &cobra.Command{
		Use: "current-context", Short: "Print the current context's name", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			path, _, cfg, err := load()
			if err != nil {
				return named("config current-context", err)
			}
			if cfg.CurrentContext == "" {
				return fmt.Errorf("config current-context: no current context in %s: run `arbiter login --server URL --token-file FILE` or `arbiter config use-context NAME`", path)
			}
			fmt.Fprintln(cmd.OutOrStdout(), cfg.CurrentContext)
			return nil
		},
	}
	del := &cobra.Command{
		Use: "delete-context NAME", Short: "Delete a context (its token file is left as it is)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, owned, cfg, err := load()
			if err != nil {
				return named("config delete-context", err)
			}
			cx := cfg.find(args[0])
			if cx == nil {
				return fmt.Errorf("config delete-context: no context %q in %s; %s", args[0], path, cfg.names())
			}
			file := cx.TokenFile
			cfg.Contexts = removeContext(cfg.Contexts, args[0])
			note := ""
			if cfg.CurrentContext == args[0] {
				cfg.CurrentContext = ""
				note = "; no context is current now"
			}
			if err := saveConfig(path, owned, cfg); err != nil {
				return named("config delete-context", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "context %q deleted%s (its token file %s is left as it is)\n", args[0], note, file)
			return nil
		},
	}
	cmd.AddCommand(get, use, current, del)
	return cmd
}

func removeContext(cs []cliContext, name string) []cliContext {
	out := cs[:0]
	for _, c := range cs {
		if c.Name != name {
			out = append(out, c)
		}
	}
	return out
}
