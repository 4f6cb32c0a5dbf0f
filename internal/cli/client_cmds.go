package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/yamlfile"
)

// conn holds the flags every client command shares: server, token and
// tenant (flags, environment or the context: connect.go), the context and
// the output format; at is what client() resolved.
type conn struct {
	server, token, tokenFile, tenant, output, context string
	at                                                target
	watching                                          bool // --watch (bindWatch)
}

func (c *conn) bind(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&c.server, "server", "", "server URL, or several replicas' URLs separated by commas: the client follows the leader and retries idempotent calls on the next (env ARBITER_SERVER; default: the context's, else "+defaultServer+")")
	f.StringVar(&c.token, "token", "", "bearer token (visible to other users in ps: prefer --token-file; env ARBITER_TOKEN)")
	f.StringVar(&c.tokenFile, "token-file", "", "file holding the bearer token (env ARBITER_TOKEN_FILE; default: the context's)")
	f.StringVar(&c.tenant, "tenant", "", "tenant to act on (env ARBITER_TENANT; default: the context's, else the token's tenant)")
	f.StringVar(&c.context, "context", "", "context to use (env ARBITER_CONTEXT; default: the current one, see `arbiter config`)")
	f.StringVarP(&c.output, "output", "o", "table", "output format: "+strings.Join(outputFormats, ", ")+" (wide: the table with more columns; json, yaml: one document; jsonl: one JSON document a line, for streams)")
}

func firstNonEmpty(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}

func limitStr(l *float64) string {
	if l == nil {
		return "unlimited"
	}
	return strconv.FormatFloat(*l, 'g', -1, 64)
}

func gpuStr(g api.GPUs) string {
	b, _ := g.MarshalJSON()
	return string(b)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ---- usage ----

func newUsageCmd() *cobra.Command {
	var c conn
	cmd := &cobra.Command{Use: "usage", Short: "Quota usage: each quota family's current value and limit", Args: cobra.NoArgs}
	c.bind(cmd)
	var region string
	list := &cobra.Command{
		Use:   "list [--region R]",
		Short: "List quota families with their current value and limit, in GPUs",
		Args:  cobra.NoArgs,
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			return c.show(ctx, cl, out, func(ctx context.Context) (view, error) {
				us, err := cl.Usage(ctx, c.givenTenant(), region)
				return view{us, func(tw *tabwriter.Writer) {
					fmt.Fprintln(tw, "NAME\tCURRENT VALUE\tRESERVED\tLIMIT\tGUARANTEED\tBORROWED\tIDLE\tLENT\tTENANT\tPARENT\tREGION")
					num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
					for _, u := range us {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", u.Name, num(u.CurrentValue), num(u.Reserved), limitStr(u.Limit),
							num(u.Guaranteed), num(u.Borrowed), num(u.Idle), num(u.Lent), u.Tenant, dash(u.Parent), u.Region)
					}
				}}, err
			})
		}),
	}
	list.Flags().StringVar(&region, "region", "", "region (default: all)")
	c.bindWatch(list)
	cmd.AddCommand(list)
	return cmd
}

// ---- reservations ----

func newReservationCmd() *cobra.Command {
	var c conn
	cmd := &cobra.Command{Use: "reservation", Aliases: []string{"reservations"}, Short: "Capacity reservations: create (all or nothing), list, show, resize, delete", Args: cobra.NoArgs}
	c.bind(cmd)
	table := func(rs []api.Reservation) func(tw *tabwriter.Writer) {
		return func(tw *tabwriter.Writer) {
			wide := ""
			if c.wide() {
				wide = "\tZONE\tNODES"
			}
			fmt.Fprintln(tw, "NAME\tTENANT\tREGION\tSKU\tCAPACITY\tBOUND\tSTATE\tSTART\tEND\tRESERVED GPUS\tALLOCATED GPUS\tBORROWED GPUS"+wide)
			for _, r := range rs {
				if c.wide() {
					wide = "\t" + dash(r.Zone) + "\t" + dash(strings.Join(r.Nodes, ","))
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s%s\n", r.Name, r.Tenant, r.Region, r.SKU, r.Capacity, len(r.Nodes), r.State, windowCell(r.Start), windowCell(r.End), gpuStr(r.ReservedGPUs), gpuStr(r.AllocatedGPUs), gpuStr(r.BorrowedGPUs), wide)
			}
		}
	}
	var req api.ReservationRequest
	var start, end string
	create := &cobra.Command{
		Use:   "create --name NAME --sku SKU --capacity N --region R [--zone Z] [--start WHEN] [--end WHEN]",
		Short: "Reserve capacity, all or nothing, now or for a future window",
		Long: `Reserve capacity, all or nothing. Without --start the reservation starts
now; without --end it has no end. With a window (--start, --end: RFC 3339,
or a duration from now such as +2h, +90m, +3d) it is admitted against the
capacity calendar (the other reservations overlapping the window) for the
whole window or refused; its machines are chosen about an hour before the
window opens. Until then it is Scheduled, then Active, then Expired.`,
		Example: "  arbiter reservation create --name r1 --sku Standard_ND96isr_H100_v5 --capacity 4 --region eastus --start +2h --end +4h\n" +
			"  arbiter reservation create --name r2 --sku Standard_ND96isr_H100_v5 --capacity 4 --region eastus --start 2030-01-06T08:00:00Z --end 2030-01-13T08:00:00Z",
		Args: cobra.NoArgs,
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			var err error
			if req.Start, req.End, err = windowFlags(start, end, time.Now()); err != nil {
				return err
			}
			t, err := c.tenantOf(ctx, cl, true)
			if err != nil {
				return err
			}
			r, err := cl.CreateReservation(ctx, t, req)
			if err != nil {
				return err
			}
			return c.emit(out, r, table([]api.Reservation{r}))
		}),
	}
	cf := create.Flags()
	cf.StringVar(&req.Name, "name", "", "reservation name")
	cf.StringVar(&req.SKU, "sku", "", "machine size, e.g. Standard_ND96amsr_A100_v4")
	cf.IntVar(&req.Capacity, "capacity", 0, "number of machines")
	cf.StringVar(&req.Region, "region", "", "region")
	cf.StringVar(&req.Zone, "zone", "", "availability zone (optional)")
	cf.StringVar(&start, "start", "", "when the window opens: RFC 3339 or +DURATION from now (default now)")
	cf.StringVar(&end, "end", "", "when the window closes: RFC 3339 or +DURATION from now (default never)")
	listCmd := &cobra.Command{
		Use: "list", Short: "List reservations with their window, state (Scheduled, Active, Expired) and utilization (the admin without --tenant: every tenant's)", Args: cobra.NoArgs,
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			return c.show(ctx, cl, out, func(ctx context.Context) (view, error) {
				var rs []api.Reservation
				var err error
				if t := c.givenTenant(); t != "" {
					rs, err = cl.Reservations(ctx, t)
				} else {
					rs, err = cl.AllReservations(ctx) // the admin's: every tenant's; a tenant token's: its own
				}
				return view{rs, table(rs)}, err
			})
		}),
	}
	c.bindWatch(listCmd)
	show := &cobra.Command{
		Use: "show NAME", Short: "Show a reservation with its utilization (the admin without --tenant: the one tenant holding NAME)", Args: cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(reservationNames),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			t, err := c.tenantHolding(ctx, cl, "reservation", args[0], reservationTenants(cl))
			if err != nil {
				return err
			}
			r, err := cl.Reservation(ctx, t, args[0])
			if err != nil {
				return err
			}
			return c.emit(out, r, func(tw *tabwriter.Writer) {
				table([]api.Reservation{r})(tw)
				fmt.Fprintf(tw, "\nNODES\t%s\n", strings.Join(r.Nodes, ","))
			})
		}),
	}
	var capacity int
	resize := &cobra.Command{
		Use: "resize NAME --capacity N", Short: "Change a reservation's capacity (shrinking always succeeds)", Args: cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(reservationNames),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			t, err := c.tenantOf(ctx, cl, true)
			if err != nil {
				return err
			}
			r, err := cl.ResizeReservation(ctx, t, args[0], capacity)
			if err != nil {
				return err
			}
			return c.emit(out, r, table([]api.Reservation{r}))
		}),
	}
	resize.Flags().IntVar(&capacity, "capacity", 0, "new number of machines")
	del := &cobra.Command{
		Use: "delete NAME", Short: "Delete a reservation no live workload uses", Args: cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(reservationNames),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			t, err := c.tenantOf(ctx, cl, true)
			if err != nil {
				return err
			}
			if err := cl.DeleteReservation(ctx, t, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(out, "reservation %s deleted\n", args[0])
			return nil
		}),
	}
	cmd.AddCommand(create, listCmd, show, resize, del)
	return cmd
}

// ---- workloads ----

// workloadTable prints workloads, one a row; AGE is the time since
// submission (age). Wide adds where it runs or last ran (NODES), its
// pools, when it ended, its replicas' exit codes and why it ended.
func workloadTable(ws []api.Workload, wide bool) func(tw *tabwriter.Writer) {
	return func(tw *tabwriter.Writer) {
		now := time.Now()
		head := "NAME\tTENANT\tSTATE\tKIND\tPRIORITY\tGPUS\tREPLICAS\tFLAVOR\tREGION\tPREEMPTIONS\tAGE"
		if wide {
			head += "\tNODES\tPOOLS\tENDED\tEXIT CODES\tEND REASON"
		}
		fmt.Fprintln(tw, head)
		for _, w := range ws {
			flavor, region := strings.Join(w.Flavors, ","), strings.Join(w.Regions, ",")
			if w.Running != nil {
				flavor, region = w.Running.Flavor, w.Running.Region
			}
			replicas := strconv.Itoa(w.Replicas)
			if e := w.Elastic; e != nil {
				replicas += fmt.Sprintf(" (%d-%d)", e.Min, e.Max) // an elastic workload's size and bounds
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s", w.Name, w.Tenant, w.State, w.Kind, shownPriority(w), gpuStr(w.GPUs), replicas, flavor, region, w.Preemptions, age(w.SubmittedAt, now))
			if wide {
				ended := "-"
				if !w.EndedAt.IsZero() {
					ended = age(w.EndedAt, now)
				}
				fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\t%s", dash(strings.Join(workloadNodes(w), ",")), dash(strings.Join(w.Pools, ",")), ended, dash(exitCodes(w.ExitCodes)), dash(w.EndReason))
			}
			fmt.Fprintln(tw)
		}
	}
}

// workloadNodes are the nodes a workload runs on, else those its last
// run ran on (ended workloads), in replica order.
func workloadNodes(w api.Workload) []string {
	if w.Running == nil {
		return w.EndNodes
	}
	var out []string
	for _, r := range w.Running.Replicas {
		out = append(out, r.Node)
	}
	return out
}

// exitCodes says the replicas' exit codes: "0" for one replica, "0:0,1:137"
// for several.
func exitCodes(es []api.ReplicaExit) string {
	if len(es) == 1 && es[0].Replica == 0 {
		return strconv.Itoa(es[0].Code)
	}
	var parts []string
	for _, e := range es {
		parts = append(parts, fmt.Sprintf("%d:%d", e.Replica, e.Code))
	}
	return strings.Join(parts, ",")
}

// age is the time from since to now in kubectl's short style, in its
// largest whole unit: 45s, 12m, 3h, 2d, 1y; "-" for an unknown time, and
// 0s for one a little ahead of this machine's clock.
func age(since, now time.Time) string {
	if since.IsZero() {
		return "-"
	}
	d := now.Sub(since)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int64(d/time.Second), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int64(d/time.Minute))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh", int64(d/time.Hour))
	case d < 365*24*time.Hour:
		return fmt.Sprintf("%dd", int64(d/(24*time.Hour)))
	}
	return fmt.Sprintf("%dy", int64(d/(365*24*time.Hour)))
}

// shownPriority is the priority the scheduler uses: the effective one
// where a policy set it ("high (policy)"), else the spec's.
func shownPriority(w api.Workload) string {
	if w.EffectivePriority != "" && w.EffectivePriority != w.Priority {
		return w.EffectivePriority + " (policy)"
	}
	return w.Priority
}

// printEffects prints the policy actions in force on a workload, one a
// line: "priority high, set by ops (rule busy) since 10:42 UTC".
// printPlanned prints a pending workload's planned start (`workload why`)
// and a running workload's overrun, when there is one.
func printPlanned(tw *tabwriter.Writer, y api.Why) {
	if !y.PlannedStart.IsZero() {
		where := y.PlannedRegion
		if y.PlannedBlock != "" {
			where += " block " + y.PlannedBlock
		} else if y.PlannedNodes > 0 {
			where += fmt.Sprintf(" on %d node(s)", y.PlannedNodes)
		}
		fmt.Fprintf(tw, "PLANNED START\t%s (%s, %s)\n", y.PlannedStart.UTC().Format(time.RFC3339), where, dash(y.PlannedFlavor))
		if y.Starving {
			fmt.Fprintf(tw, "STARVING\twaited %s, over its class's bound of %s: a block is drained for it\n", time.Duration(y.Waited), time.Duration(y.MaxWait))
		}
	}
	if y.Overrun > 0 {
		fmt.Fprintf(tw, "OVERRUN\t%s past its expected runtime of %s\n", time.Duration(y.Overrun), time.Duration(y.ExpectedRuntime))
	}
}

func printEffects(tw *tabwriter.Writer, effects []api.Effect, now time.Time) {
	for _, e := range effects {
		fmt.Fprintf(tw, "POLICY EFFECT\t%s\n", e.Format(now, time.UTC))
	}
}

// readWorkloadFile reads a workload spec in YAML (the config's workload
// format: name, kind, priority, gpus, replicas, flavors, regions, ...).
func readWorkloadFile(path string) (api.WorkloadSpec, error) {
	var s api.WorkloadSpec
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return s, err
	}
	return s, yamlfile.Decode(path, data, &s)
}

// workloadState returns the state s names, in any case ("running" is
// Running), as the API spells it; "" stays "" (every state).
func workloadState(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	for _, st := range api.WorkloadStates {
		if strings.EqualFold(strings.TrimSpace(s), st) {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown state %q: write one of %s", s, strings.Join(api.WorkloadStates, ", "))
}

func newWorkloadCmd() *cobra.Command {
	var c conn
	cmd := &cobra.Command{Use: "workload", Aliases: []string{"workloads"}, Short: "Workloads: submit, list, show, cancel, why, logs", Args: cobra.NoArgs,
		Long: `Workloads: submit, list, show, cancel, why, logs.

The admin without --tenant lists every tenant's workloads, and show, why,
cancel and logs find NAME in the one tenant that has a workload of that
name (when several have one, they are listed: pass --tenant). A tenant
token acts for its own tenant only.`}
	c.bind(cmd)
	var file string
	submit := &cobra.Command{
		Use: "submit -f FILE", Short: "Submit a workload from a YAML file (- for stdin)", Args: cobra.NoArgs,
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			if file == "" {
				return errors.New("workload submit: -f FILE is required")
			}
			spec, err := readWorkloadFile(file)
			if err != nil {
				return err
			}
			t := spec.Tenant
			if t == "" {
				if t, err = c.tenantOf(ctx, cl, true); err != nil {
					return err
				}
			}
			spec.Tenant = ""
			w, err := cl.Submit(ctx, t, spec)
			if err != nil {
				return err
			}
			return c.emit(out, w, workloadTable([]api.Workload{w}, c.wide()))
		}),
	}
	submit.Flags().StringVarP(&file, "file", "f", "", "workload YAML file")
	cmd.AddCommand(newWorkloadLogsCmd(&c))
	var state string
	listCmd := &cobra.Command{
		Use: "list [--state STATE]", Short: "List workloads", Args: cobra.NoArgs,
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			st, err := workloadState(state)
			if err != nil {
				return fmt.Errorf("workload list: --state: %w", err)
			}
			t, err := c.tenantOf(ctx, cl, false)
			if err != nil {
				return err
			}
			return c.show(ctx, cl, out, func(ctx context.Context) (view, error) {
				ws, err := cl.Workloads(ctx, t, st)
				return view{ws, workloadTable(ws, c.wide())}, err
			})
		}),
	}
	c.bindWatch(listCmd)
	listCmd.Flags().StringVar(&state, "state", "", "only workloads in this state, in any case: "+strings.Join(api.WorkloadStates, ", "))
	show := &cobra.Command{
		Use: "show NAME", Short: "Show a workload and where it runs", Args: cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(workloadNames),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			t, err := c.tenantHolding(ctx, cl, "workload", args[0], workloadTenants(cl))
			if err != nil {
				return err
			}
			return c.show(ctx, cl, out, func(ctx context.Context) (view, error) {
				w, err := cl.Workload(ctx, t, args[0])
				return view{w, workloadShow(w, c.wide())}, err
			})
		}),
	}
	c.bindWatch(show)
	cancel := &cobra.Command{
		Use: "cancel NAME", Short: "Cancel a workload", Args: cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(workloadNames),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			t, err := c.tenantHolding(ctx, cl, "workload", args[0], workloadTenants(cl))
			if err != nil {
				return err
			}
			w, err := cl.Cancel(ctx, t, args[0])
			if err != nil {
				return err
			}
			return c.emit(out, w, workloadTable([]api.Workload{w}, c.wide()))
		}),
	}
	why := &cobra.Command{
		Use: "why NAME", Short: "Say why a workload is pending (or where it runs)", Args: cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(workloadNames),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			t, err := c.tenantHolding(ctx, cl, "workload", args[0], workloadTenants(cl))
			if err != nil {
				return err
			}
			y, err := cl.Why(ctx, t, args[0])
			if err != nil {
				return err
			}
			return c.emit(out, y, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "WORKLOAD\t%s\nSTATE\t%s\nCODE\t%s\nREASON\t%s\n", y.Workload, y.State, dash(y.Code), y.Reason)
				for _, d := range y.Details {
					fmt.Fprintf(tw, "DETAIL\t%s\n", d)
				}
				printPlanned(tw, y)
				printEffects(tw, y.Effects, time.Now())
			})
		}),
	}
	cmd.AddCommand(submit, listCmd, show, cancel, why)
	return cmd
}

// workloadShow is workload show's table: the workload's row, its
// replicas, how it ended, and the policy effects on it.
func workloadShow(w api.Workload, wide bool) func(tw *tabwriter.Writer) {
	return func(tw *tabwriter.Writer) {
		workloadTable([]api.Workload{w}, wide)(tw)
		if w.Running != nil {
			fmt.Fprintln(tw, "\nREPLICA\tNODE\tGPUS\tMILLI")
			for i, r := range w.Running.Replicas {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\n", i, r.Node, intsString(r.GPUs), r.Milli)
			}
			for i, r := range w.Running.Replicas {
				if len(r.IdleGPUs) > 0 {
					fmt.Fprintf(tw, "IDLE GPUS\treplica %d: %s (under 5%% busy for 5 minutes)\n", i, intsString(r.IdleGPUs))
				}
			}
		}
		if w.LastPreemption != "" {
			fmt.Fprintf(tw, "\nLAST PREEMPTION\t%s\n", w.LastPreemption)
		}
		if len(w.Effects) > 0 {
			fmt.Fprintln(tw)
			if w.EffectivePriority != "" {
				fmt.Fprintf(tw, "EFFECTIVE PRIORITY\t%s (spec: %s)\n", w.EffectivePriority, dash(w.Priority))
			}
			if len(w.EffectiveRegions) > 0 {
				fmt.Fprintf(tw, "EFFECTIVE REGIONS\t%s (spec: %s)\n", strings.Join(w.EffectiveRegions, ","), dash(strings.Join(w.Regions, ",")))
			}
			if len(w.EffectivePools) > 0 {
				fmt.Fprintf(tw, "EFFECTIVE POOLS\t%s (spec: %s)\n", strings.Join(w.EffectivePools, ","), dash(strings.Join(w.Pools, ",")))
			}
			printEffects(tw, w.Effects, time.Now())
		}
		if !w.EndedAt.IsZero() {
			fmt.Fprintf(tw, "\nENDED\t%s\n", w.EndedAt.UTC().Format(time.RFC3339))
			fmt.Fprintf(tw, "END REASON\t%s\n", dash(w.EndReason))
			fmt.Fprintf(tw, "LAST NODES\t%s\n", dash(strings.Join(w.EndNodes, ",")))
			for _, e := range w.ExitCodes {
				fmt.Fprintf(tw, "EXIT CODE\treplica %d: %d\n", e.Replica, e.Code)
			}
		}
	}
}

// ---- tenants ----

// parseQuota parses "flavor=A100-80G,region=eastus,guaranteed=16,limit=32".
func parseQuota(s string) (api.Quota, error) {
	var q api.Quota
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return q, fmt.Errorf("quota %q: write key=value pairs: flavor=A100-80G,region=eastus,guaranteed=16,limit=32", s)
		}
		var err error
		switch k {
		case "flavor":
			q.Flavor = v
		case "region":
			q.Region = v
		case "guaranteed":
			err = q.Guaranteed.UnmarshalYAMLScalar(v)
		case "limit":
			var g api.GPUs
			err = g.UnmarshalYAMLScalar(v)
			q.Limit = &g
		case "lendable":
			var g api.GPUs
			err = g.UnmarshalYAMLScalar(v)
			q.Lendable = &g
		case "weight":
			q.Weight, err = strconv.ParseFloat(v, 64)
		case "priority":
			q.Priority, err = strconv.Atoi(v)
		default:
			return q, fmt.Errorf("quota %q: unknown key %q (flavor, region, guaranteed, limit, lendable, weight, priority)", s, k)
		}
		if err != nil {
			return q, fmt.Errorf("quota %q: %s: %v", s, k, err)
		}
	}
	if q.Flavor == "" {
		return q, fmt.Errorf("quota %q: flavor= is required", s)
	}
	return q, nil
}

func parseQuotas(ss []string) ([]api.Quota, error) {
	var out []api.Quota
	for _, s := range ss {
		q, err := parseQuota(s)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

func tenantTable(ts []api.Tenant) func(tw *tabwriter.Writer) {
	return func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "NAME\tPARENT\tFLAVOR\tREGION\tGUARANTEED\tLIMIT")
		for _, t := range ts {
			if len(t.Quotas) == 0 {
				fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\n", t.Name, dash(t.Parent))
			}
			for _, q := range t.Quotas {
				lim := "unlimited"
				if q.Limit != nil {
					lim = gpuStr(*q.Limit)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, dash(t.Parent), q.Flavor, firstNonEmpty(q.Region, "*"), gpuStr(q.Guaranteed), lim)
			}
		}
	}
}

// fairShareTable prints a tenant's fair-share state under its quotas.
// entryUsageTable prints a tenant's quota entries as usage list shows
// them: at this level of the tree, guaranteed, used, borrowed beyond the
// guarantee, idle, and the part of idle that others' work occupies.
func entryUsageTable(tw *tabwriter.Writer, us []api.Usage) {
	if len(us) == 0 {
		return
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	fmt.Fprintln(tw, "\nFLAVOR\tREGION\tGUARANTEED\tUSED\tBORROWED\tIDLE\tLENT\tLIMIT")
	for _, u := range us {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", u.Flavor, u.Region, num(u.Guaranteed), num(u.CurrentValue-u.Reserved),
			num(u.Borrowed), num(u.Idle), num(u.Lent), limitStr(u.Limit))
	}
}

func fairShareTable(tw *tabwriter.Writer, fs *api.FairShare) {
	as := "no usage yet"
	if !fs.AsOf.IsZero() {
		as = "as of " + fs.AsOf.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(tw, "\nFair share (half-life %s, %s): factor 2^(-usage/share), 1 unused, 0.5 at its share\n", fs.HalfLife, as)
	fmt.Fprintln(tw, "FLAVOR\tREGION\tSHARE\tDECAYED GPU-H\tUSAGE\tFACTOR")
	for _, e := range fs.Entries {
		fmt.Fprintf(tw, "%s\t%s\t%.1f%%\t%.1f\t%.1f%%\t%.3f\n", e.Flavor, firstNonEmpty(e.Region, "*"), 100*e.Share, e.DecayedGPUHours, 100*e.Usage, e.Factor)
	}
}

func newTenantCmd() *cobra.Command {
	var c conn
	cmd := &cobra.Command{Use: "tenant", Aliases: []string{"tenants"}, Short: "Tenants, quotas and tokens (admin)", Args: cobra.NoArgs}
	c.bind(cmd)
	var parent string
	var quotas, allowed []string
	create := &cobra.Command{
		Use: "create NAME [--parent P] [--quota flavor=F,region=R,guaranteed=G,limit=L]...", Short: "Create a tenant", Args: cobra.ExactArgs(1),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			qs, err := parseQuotas(quotas)
			if err != nil {
				return err
			}
			t, err := cl.CreateTenant(ctx, api.Tenant{Name: args[0], Parent: parent, Quotas: qs, AllowedPriorities: allowed})
			if err != nil {
				return err
			}
			return c.emit(out, t, tenantTable([]api.Tenant{t}))
		}),
	}
	create.Flags().StringVar(&parent, "parent", "", "parent tenant")
	create.Flags().StringArrayVar(&quotas, "quota", nil, "quota entry flavor=F,region=R,guaranteed=G,limit=L (repeatable)")
	create.Flags().StringSliceVar(&allowed, "allowed-priorities", nil, "priority classes its workloads may use, e.g. critical,high,normal (default: all but critical)")
	var setAllowed []string
	setPrio := &cobra.Command{
		Use: "set-priorities NAME --allowed-priorities C1,C2...", Short: "Replace the priority classes a tenant's workloads may use", Args: cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(tenantNames),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			t, err := cl.SetAllowedPriorities(ctx, args[0], setAllowed)
			if err != nil {
				return err
			}
			return c.emit(out, t, tenantTable([]api.Tenant{t}))
		}),
	}
	setPrio.Flags().StringSliceVar(&setAllowed, "allowed-priorities", nil, "priority classes, e.g. critical,high,normal,low,spot")
	var setQuotas []string
	setQuota := &cobra.Command{
		Use: "set-quota NAME --quota flavor=F,region=R,guaranteed=G,limit=L...", Short: "Replace a tenant's quotas", Args: cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(tenantNames),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			qs, err := parseQuotas(setQuotas)
			if err != nil {
				return err
			}
			t, err := cl.SetQuotas(ctx, args[0], qs)
			if err != nil {
				return err
			}
			return c.emit(out, t, tenantTable([]api.Tenant{t}))
		}),
	}
	setQuota.Flags().StringArrayVar(&setQuotas, "quota", nil, "quota entry (repeatable)")
	listCmd := &cobra.Command{
		Use: "list", Short: "List tenants and their quotas", Args: cobra.NoArgs,
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			ts, err := cl.Tenants(ctx)
			if err != nil {
				return err
			}
			return c.emit(out, ts, tenantTable(ts))
		}),
	}
	show := &cobra.Command{
		Use: "show NAME", Short: "Show a tenant", Args: cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(tenantNames),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			t, err := cl.Tenant(ctx, args[0])
			if err != nil {
				return err
			}
			us, err := cl.Usage(ctx, t.Name, "")
			if err != nil {
				return err
			}
			return c.emit(out, t, func(tw *tabwriter.Writer) {
				tenantTable([]api.Tenant{t})(tw)
				entryUsageTable(tw, us)
				if fs := t.FairShare; fs != nil {
					fairShareTable(tw, fs)
				}
			})
		}),
	}
	del := &cobra.Command{
		Use: "delete NAME", Short: "Delete a tenant without workloads, reservations or children", Args: cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(tenantNames),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			if err := cl.DeleteTenant(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(out, "tenant %s deleted\n", args[0])
			return nil
		}),
	}
	token := &cobra.Command{Use: "token", Short: "Tenant tokens", Args: cobra.NoArgs}
	var tokName string
	tokCreate := &cobra.Command{
		Use: "create TENANT [--name N]", Short: "Create a token for a tenant; the secret is shown once", Args: cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(tenantNames),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			t, err := cl.CreateToken(ctx, args[0], tokName)
			if err != nil {
				return err
			}
			return c.emit(out, t, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "ID\tTENANT\tNAME\tSECRET")
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.Tenant, t.Name, t.Secret)
			})
		}),
	}
	tokCreate.Flags().StringVar(&tokName, "name", "default", "token name")
	token.AddCommand(tokCreate)
	cmd.AddCommand(create, setQuota, setPrio, listCmd, show, del, token)
	return cmd
}

// ---- fleet ----

func newNodeCmd() *cobra.Command {
	var c conn
	cmd := &cobra.Command{Use: "node", Aliases: []string{"nodes"}, Short: "Machines of the fleet (admin)", Args: cobra.NoArgs}
	c.bind(cmd)
	var region string
	listCmd := &cobra.Command{
		Use: "list [--region R]", Short: "List machines with their allocation", Args: cobra.NoArgs,
		Long: `List machines with their allocation and state: ready; cordoned (takes no
new work, its running work stays: node cordon); drained (out of service:
its work evicted, it takes none: node drain); lost (its agent stopped
heartbeating); down (registered down). -o wide adds the labels.`,
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			return c.show(ctx, cl, out, func(ctx context.Context) (view, error) {
				ns, err := cl.Nodes(ctx, region)
				return view{ns, nodeTable(ns, c.wide())}, err
			})
		}),
	}
	listCmd.Flags().StringVar(&region, "region", "", "only this region")
	c.bindWatch(listCmd)
	show := &cobra.Command{
		Use: "show NODE", Short: "Show a machine with its allocation, state and labels", Args: cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(nodeNames),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			n, err := cl.Node(ctx, args[0])
			if err != nil {
				return err
			}
			return c.emit(out, n, nodeTable([]api.Node{n}, true))
		}),
	}
	token := &cobra.Command{Use: "token", Short: "Node (agent) tokens", Args: cobra.NoArgs}
	var tokName string
	tokCreate := &cobra.Command{
		Use: "create NODE [--name N]", Short: "Create the token of a node's agent: it may register and heartbeat that node only; the secret is shown once", Args: cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(nodeNames),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			t, err := cl.CreateNodeToken(ctx, args[0], tokName)
			if err != nil {
				return err
			}
			return c.emit(out, t, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "ID\tNODE\tNAME\tSECRET")
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.Node, t.Name, t.Secret)
			})
		}),
	}
	tokCreate.Flags().StringVar(&tokName, "name", "agent", "token name")
	token.AddCommand(tokCreate)
	setState := func(use, short string, update func(on bool) api.NodeUpdate, on bool) *cobra.Command {
		return &cobra.Command{
			Use: use + " NODE", Short: short, Args: cobra.ExactArgs(1),
			ValidArgsFunction: c.complete(nodeNames),
			RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
				n, err := cl.UpdateNode(ctx, args[0], update(on))
				if err != nil {
					return err
				}
				return c.emit(out, n, nodeTable([]api.Node{n}, c.wide()))
			}),
		}
	}
	drained := func(on bool) api.NodeUpdate { return api.NodeUpdate{Drained: &on} }
	cordoned := func(on bool) api.NodeUpdate { return api.NodeUpdate{Cordoned: &on} }
	del := &cobra.Command{
		Use: "delete NODE", Short: "Remove a node that runs nothing and no reservation or partition holds (drain it first; stop its agent)", Args: cobra.ExactArgs(1),
		ValidArgsFunction: c.complete(nodeNames),
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			if err := cl.DeleteNode(ctx, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(out, "node %s deleted\n", args[0])
			return nil
		}),
	}
	cmd.AddCommand(listCmd, show, token, del,
		setState("cordon", "Close a node to new work: nothing new is placed there, the work running there stays", cordoned, true),
		setState("uncordon", "Open a cordoned node to new work again", cordoned, false),
		setState("drain", "Take a node out of service: its work is evicted and requeued, it takes none", drained, true),
		setState("undrain", "Return a drained node to service", drained, false))
	return cmd
}

// nodeTable prints nodes, one a row, with their state (ready, cordoned,
// drained, lost, down); wide adds their labels.
func nodeTable(ns []api.Node, wide bool) func(tw *tabwriter.Writer) {
	return func(tw *tabwriter.Writer) {
		head := "ID\tREGION\tZONE\tBLOCK\tSKU\tMODEL\tGPUS\tALLOCATED\tRESERVATION\tSTATE"
		if wide {
			head += "\tLABELS"
		}
		fmt.Fprintln(tw, head)
		for _, n := range ns {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s", n.ID, n.Region, dash(n.Zone), n.Block, n.SKU, n.Model, n.GPUs, gpuStr(n.Allocated), dash(n.Reservation), nodeStateOf(n))
			if wide {
				fmt.Fprintf(tw, "\t%s", dash(labelsString(n.Labels)))
			}
			fmt.Fprintln(tw)
		}
	}
}

// nodeStateOf is the state the server gives, else the one its flags say
// (a server from before states were named).
func nodeStateOf(n api.Node) string {
	switch {
	case n.State != "":
		return n.State
	case n.Drained:
		return "drained"
	case n.Down:
		return "down"
	case n.Cordoned:
		return "cordoned"
	}
	return "ready"
}

// labelsString writes labels as k=v pairs in key order.
func labelsString(ls map[string]string) string {
	keys := make([]string, 0, len(ls))
	for k := range ls {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		keys[i] = k + "=" + ls[k]
	}
	return strings.Join(keys, ",")
}

func newRegionCmd() *cobra.Command {
	var c conn
	cmd := &cobra.Command{Use: "region", Aliases: []string{"regions"}, Short: "Regions of the fleet", Args: cobra.NoArgs}
	c.bind(cmd)
	cmd.AddCommand(&cobra.Command{
		Use: "list", Short: "List regions", Args: cobra.NoArgs,
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			rs, err := cl.Regions(ctx)
			if err != nil {
				return err
			}
			return c.emit(out, rs, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tZONES\tNODES\tGPUS")
				for _, r := range rs {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", r.Name, strings.Join(r.Zones, ","), r.Nodes, r.GPUs)
				}
			})
		}),
	})
	return cmd
}

func newEventsCmd() *cobra.Command {
	var c conn
	var after int64
	var follow bool
	cmd := &cobra.Command{
		Use:   "events [--after SEQ] [--follow] [--tenant T]",
		Short: "Print what changed (streams with --follow): SEQ, TIME, TYPE, TENANT, OBJECT, MESSAGE",
		Long: `Print what changed: a table of events (SEQ, TIME, TYPE, TENANT, OBJECT,
MESSAGE), one JSON array with -o json (or a YAML list with -o yaml), or
one JSON object a line with -o jsonl. --follow keeps printing new events
as they come (the server's event stream) until Ctrl-C: a table row or a
JSON line each (-o table, wide or jsonl). The admin sees every tenant's
events, or one tenant's with --tenant (or ARBITER_TENANT, or the
context's tenant); a tenant token sees its own.`,
		Args: cobra.NoArgs,
		RunE: c.runFor(0, func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			tenant := c.givenTenant()
			if follow && (c.output == "json" || c.output == "yaml") {
				return fmt.Errorf("--follow prints a stream: use -o table, wide or jsonl (one JSON object a line), not %s", c.output)
			}
			const head = "SEQ\tTIME\tTYPE\tTENANT\tOBJECT\tMESSAGE"
			row := func(w io.Writer, e api.Event) {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.Time.UTC().Format(time.RFC3339), e.Type, dash(e.Tenant), e.Object, e.Message)
			}
			if follow {
				if c.output != "jsonl" {
					fmt.Fprintln(out, head)
				}
				return followEvents(ctx, cl, tenant, after, func(e api.Event) {
					if c.output == "jsonl" {
						b, _ := json.Marshal(e)
						fmt.Fprintf(out, "%s\n", b)
						return
					}
					row(out, e)
				})
			}
			ev, err := cl.TenantEvents(ctx, tenant, after, 0, 1000)
			if err != nil {
				return err
			}
			if c.output == "jsonl" {
				for _, e := range ev.Items {
					b, _ := json.Marshal(e)
					fmt.Fprintf(out, "%s\n", b)
				}
				return nil
			}
			return c.emit(out, ev.Items, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, head)
				for _, e := range ev.Items {
					row(tw, e)
				}
			})
		}),
	}
	c.bind(cmd)
	cmd.Flags().Int64Var(&after, "after", 0, "print events after this sequence number")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events until Ctrl-C")
	return cmd
}

// ---- policies on the server ----

// withServerPolicyCmds adds the server-side policy commands (apply, list,
// firings) to the policy command group.
func withServerPolicyCmds(cmd *cobra.Command) *cobra.Command {
	var c conn
	var file, name string
	apply := &cobra.Command{
		Use: "apply -f FILE [--name N]", Short: "Apply a policy file to the server (admin)", Args: cobra.NoArgs,
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			if file == "" {
				return errors.New("policy apply: -f FILE is required")
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			n := firstNonEmpty(name, policyName(file))
			p, err := cl.ApplyPolicy(ctx, api.PolicyApply{Name: n, File: file, Source: string(data)})
			if err != nil {
				return err
			}
			return c.emit(out, p, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "policy %s applied: %d rule(s) (%s format): %s\n", p.Name, len(p.Rules), p.Format, strings.Join(p.Rules, ", "))
			})
		}),
	}
	c.bind(apply)
	apply.Flags().StringVarP(&file, "file", "f", "", "policy file")
	apply.Flags().StringVar(&name, "name", "", "policy name (default: the file name without extension)")
	var lc conn
	listCmd := &cobra.Command{
		Use: "list", Short: "List policies applied to the server (admin)", Args: cobra.NoArgs,
		RunE: lc.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			ps, err := cl.Policies(ctx)
			if err != nil {
				return err
			}
			return lc.emit(out, ps, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tFILE\tFORMAT\tRULES\tAPPLIED")
				for _, p := range ps {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", p.Name, p.File, p.Format, strings.Join(p.Rules, ","), p.AppliedAt.UTC().Format(time.RFC3339))
				}
			})
		}),
	}
	lc.bind(listCmd)
	var fc conn
	firings := &cobra.Command{
		Use: "firings NAME", Short: "Show a policy's firings on the server (admin)", Args: cobra.ExactArgs(1),
		RunE: fc.run(func(ctx context.Context, cl *client.Client, out io.Writer, args []string) error {
			fs, err := cl.Firings(ctx, args[0])
			if err != nil {
				return err
			}
			return fc.emit(out, fs, func(tw *tabwriter.Writer) {
				for _, f := range fs {
					fmt.Fprintln(tw, f.Text)
				}
			})
		}),
	}
	fc.bind(firings)
	cmd.AddCommand(apply, listCmd, firings)
	return cmd
}
