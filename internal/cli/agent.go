package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/agent"
	"github.com/arbiterhq/arbiter/internal/client"
)

func newAgentCmd() *cobra.Command {
	var o agent.Options
	var gpus string
	var stopOnExit bool
	var tokenFile string
	cmd := &cobra.Command{
		Use:   "agent --server URL[,URL...] --token-file FILE [--run-as USER] [--region R --zone Z --block B --sku SKU] [--gpus auto|fake:8xA100-80G]",
		Short: "Run the node agent: register this machine, report its GPUs, run the work assigned to it",
		Long: `Runs the node agent. It registers the node (admin token), reports its GPUs
with every heartbeat and runs the replicas the server assigns to it, each
with CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES set to exactly its
GPUs and ARBITER_WORKLOAD, ARBITER_REPLICA, ARBITER_GANG_SIZE, ARBITER_HOSTS,
ARBITER_PEERS and ARBITER_CHECKPOINT_DIR. Output goes to DATA/logs
("arbiter workload logs NAME" fetches it through the server). A preempted
replica gets SIGTERM, its grace period, then SIGKILL; spot work first gets
the server's --spot-notice (30s), written to $ARBITER_NOTICE_FILE and served
at $ARBITER_EVENTS_URL as Azure-style scheduled events. Processes a previous
agent left running are stopped before the node takes work.

Replicas get a clean environment: PATH, HOME (the replica's own working
directory, DATA/work/...; command.dir is relative to it), their spec's
variables, the GPU variables and ARBITER_* (never the agent's own
environment or token). --run-as USER runs them as that user; the agent
refuses to run them as root unless --allow-root is given.

The node holds a lease (the server's --node-lost-after): if no heartbeat
has renewed it in time, say in a network partition, a watchdog process
("arbiter agent fence") stops the replicas (SIGTERM, grace, SIGKILL) before
the server may requeue them elsewhere, even when the agent itself is
stopped.

--server may list several replicas of the server, separated by commas:
the agent's heartbeats follow the leader among them (a follower's redirect,
a replica that is down or has no leader: the next one).

--gpus auto reads the GPUs through NVML (binaries built with -tags nvml);
--gpus fake:8xA100-80G pretends, for demos and tests (fake:8xA100-80G:mig:
GPUs in MIG mode, with made-up MIG device UUIDs; docs/gpus.md).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Server = firstNonEmpty(o.Server, os.Getenv("ARBITER_SERVER"), "http://127.0.0.1:7070")
			tok, err := resolveToken(o.Token, tokenFile)
			if err != nil {
				return err
			}
			o.Token = tok
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("agent: finding its own binary for the fence watchdog: %w", err)
			}
			o.FenceCommand = []string{exe, "agent", "fence"}
			inv, err := agent.ParseInventory(gpus, o.NodeID)
			if err != nil {
				return err
			}
			o.Inventory = inv
			o.Logger = slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			a, err := agent.New(o)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err = a.Run(ctx)
			if stopOnExit {
				a.Shutdown()
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Server, "server", "", "server URL, or several replicas' URLs separated by commas: heartbeats follow the leader (env ARBITER_SERVER, default http://127.0.0.1:7070)")
	fl.StringVar(&o.Token, "token", "", "the node's token (visible to other users in ps: prefer --token-file; env ARBITER_TOKEN)")
	fl.StringVar(&tokenFile, "token-file", "", "file holding the node's token (`arbiter node token create NODE`) (env ARBITER_TOKEN_FILE)")
	fl.StringVar(&o.RunAs, "run-as", "", "user (name or uid) replicas run as (default: the agent's user)")
	fl.BoolVar(&o.AllowRoot, "allow-root", false, "allow replicas to run as root")
	fl.StringVar(&o.NodeID, "node", "", "node ID (default: the host name)")
	fl.StringVar(&o.Region, "region", "local", "region of the node")
	fl.StringVar(&o.Zone, "zone", "", "availability zone")
	fl.StringVar(&o.Block, "block", "b0", "network block (nodes of a block are close)")
	fl.StringVar(&o.SKU, "sku", "", "machine size (default: the catalog's size with these GPUs)")
	fl.StringVar(&o.Host, "host", "", "host name other replicas reach this node at (default: the node ID)")
	fl.StringVar(&gpus, "gpus", "auto", "GPU inventory: auto (NVML) or fake:NxMODEL[:mig], e.g. fake:8xA100-80G")
	fl.StringVar(&o.DataDir, "data", "", "directory for logs, process records and checkpoints (default arbiter-agent-NODE)")
	fl.StringVar(&o.CheckpointRoot, "checkpoint-root", "", "where checkpoint directories live (default DATA/checkpoints; shared storage lets work resume on another node)")
	fl.StringVar(&o.Listen, "listen", "127.0.0.1:0", "address serving logs to the server")
	fl.StringVar(&o.LogURL, "log-url", "", "URL the server reaches the log listener at (default http://LISTEN)")
	fl.DurationVar(&o.Interval, "heartbeat", 5*time.Second, "heartbeat period")
	fl.DurationVar(&o.StaleGrace, "stale-grace", 10*time.Second, "grace given to processes a previous agent left running")
	fl.StringVar(&o.EventsListen, "events-listen", "127.0.0.1:0", "loopback address serving replicas their scheduled events (ARBITER_EVENTS_URL)")
	fl.BoolVar(&stopOnExit, "stop-on-exit", true, "stop the replicas (SIGTERM, grace, SIGKILL) when the agent is interrupted")
	cmd.AddCommand(newAgentFenceCmd())
	return cmd
}

// newAgentFenceCmd is the agent's watchdog (hidden: the agent starts it):
// it stops the replicas when the node's lease ends, also while the agent
// is stopped or stuck.
func newAgentFenceCmd() *cobra.Command {
	var o agent.FenceOptions
	var pid int
	cmd := &cobra.Command{
		Use: "fence --data DIR --owner ID --agent-pid PID", Short: "The agent's lease watchdog (started by the agent)", Hidden: true, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.DataDir == "" || o.Owner == "" || pid <= 0 {
				return fmt.Errorf("agent fence: --data, --owner and --agent-pid are required")
			}
			// A terminal's signals are the agent's business; the fence ends
			// when the agent is gone and nothing it started runs.
			signal.Ignore(os.Interrupt, syscall.SIGHUP, syscall.SIGPIPE)
			out := cmd.ErrOrStderr()
			o.AgentAlive = func() bool { return agent.ProcessAlive(pid) }
			o.Logf = func(format string, args ...any) {
				fmt.Fprintf(out, "%s fence: %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
			}
			agent.RunFence(cmd.Context(), o)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.DataDir, "data", "", "the agent's data directory")
	cmd.Flags().StringVar(&o.Owner, "owner", "", "the agent instance whose lease to enforce")
	cmd.Flags().IntVar(&pid, "agent-pid", 0, "the agent's process")
	return cmd
}

// newWorkloadLogsCmd is `arbiter workload logs NAME`.
func newWorkloadLogsCmd(c *conn) *cobra.Command {
	var replica int
	var tail int
	var follow bool
	cmd := &cobra.Command{
		Use: "logs NAME [--tail N] [--follow]", Short: "Print a replica's output (fetched from its node's agent; --follow keeps printing it)", Args: cobra.ExactArgs(1),
		Long: `Print a replica's output, fetched from its node's agent through the server.

--tail N prints only the last N lines. --follow (-f) then keeps printing
what the replica writes, as it writes it, until its run ends (the process
exited or was stopped, and all it wrote is printed: exit 0) or Ctrl-C.`,
		ValidArgsFunction: c.complete(workloadNames),
	}
	body := func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
		t, err := c.tenantHolding(ctx, cl, "workload", args[0], workloadTenants(cl))
		if err != nil {
			return err
		}
		b, end, err := cl.LogLinesAt(ctx, t, args[0], replica, tail)
		if err != nil {
			return err
		}
		if _, err := out.Write(b); err != nil || !follow {
			return err
		}
		err = cl.FollowLogs(ctx, t, args[0], replica, end, out)
		if errors.Is(err, context.Canceled) {
			return nil // the command was ended
		}
		return err
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		timeout := 2 * time.Minute
		if follow {
			timeout = 0 // until the run ends
		}
		return c.runFor(timeout, body)(cmd, args)
	}
	cmd.Flags().IntVar(&replica, "replica", 0, "replica")
	cmd.Flags().IntVar(&tail, "tail", 0, "only the last N lines, whole (the server tails by bytes: the CLI asks for enough and keeps the last N lines, looking at most 64 MiB back)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing what the replica writes until its run ends or Ctrl-C")
	return cmd
}
