package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

// The output grammar of every client command (-o): table (with a header),
// wide (the table with more columns where a command has them), json (one
// document: a list prints one array), yaml (one document) and jsonl (one
// JSON document a line: each event of a stream, each change of a watch).

// outputFormats are the values -o accepts.
var outputFormats = []string{"table", "wide", "json", "yaml", "jsonl"}

// checkOutput refuses an -o value that is not one of outputFormats.
func checkOutput(o string) error {
	for _, f := range outputFormats {
		if o == f {
			return nil
		}
	}
	return fmt.Errorf("-o: unknown output format %q: use %s", o, strings.Join(outputFormats, ", "))
}

// wide reports whether tables get their extra columns (-o wide).
func (c *conn) wide() bool { return c.output == "wide" }

// emit writes v in the output format: a JSON or YAML document, a JSON
// line, or the table (table and wide: table consults c.wide()).
func (c *conn) emit(w io.Writer, v any, table func(tw *tabwriter.Writer)) error {
	switch c.output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "jsonl":
		return json.NewEncoder(w).Encode(v) // compact: one line
	case "yaml":
		b, err := json.Marshal(v) // YAML keys follow the JSON names
		if err != nil {
			return err
		}
		var generic any
		if err := json.Unmarshal(b, &generic); err != nil {
			return err
		}
		out, err := yaml.Marshal(generic)
		if err != nil {
			return err
		}
		_, err = w.Write(out)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// bindWatch adds --watch to a read command that shows through c.show.
func (c *conn) bindWatch(cmd *cobra.Command) {
	cmd.Flags().BoolVarP(&c.watching, "watch", "w", false, "after printing, print again each time the server's event stream reports a change that alters it (until Ctrl-C): the table again, or one more document (-o jsonl: one a line)")
}

// view is what a read command shows: the value for json, yaml and jsonl,
// and its table.
type view struct {
	v     any
	table func(tw *tabwriter.Writer)
}

// show prints what get returns; with --watch, again each time the
// server's event stream (the events the token sees, of c.givenTenant()
// when one is given) reports something and what get returns then differs
// from what was last printed, until ctx ends (Ctrl-C): no polling.
func (c *conn) show(ctx context.Context, cl *client.Client, out io.Writer, get func(context.Context) (view, error)) error {
	if !c.watching {
		x, err := get(ctx)
		if err != nil {
			return err
		}
		return c.emit(out, x.v, x.table)
	}
	if c.output != "table" && c.output != "wide" && c.output != "jsonl" {
		return fmt.Errorf("--watch prints a stream: use -o table, wide or jsonl (one document a line), not %s", c.output)
	}
	tenant := c.givenTenant()
	head, err := eventHead(ctx, cl, tenant)
	if err != nil {
		return err
	}
	changed := make(chan struct{}, 1)
	streamErr := make(chan error, 1)
	go func() { streamErr <- followEvents(ctx, cl, tenant, head, func(api.Event) { poke(changed) }) }()
	var last []byte
	for first := true; ; first = false {
		x, err := get(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		b, err := json.Marshal(x.v)
		if err != nil {
			return err
		}
		if !bytes.Equal(b, last) {
			if !first && c.output != "jsonl" {
				fmt.Fprintln(out) // a blank line between tables
			}
			if err := c.emit(out, x.v, x.table); err != nil {
				return err
			}
			last = b
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-streamErr:
			if ctx.Err() != nil {
				return nil
			}
			return err
		case <-changed:
		}
	}
}

// poke notes a change without blocking: changes that come while one is
// being printed are printed together.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// eventHead is the sequence number of the last event the token sees (of
// tenant when one is given): a watch starts after it.
func eventHead(ctx context.Context, cl *client.Client, tenant string) (int64, error) {
	var after int64
	for {
		ev, err := cl.TenantEvents(ctx, tenant, after, 0, 1000)
		if err != nil {
			return 0, err
		}
		if len(ev.Items) == 0 || ev.Next <= after {
			return after, nil
		}
		after = ev.Next
	}
}

// followEvents calls fn for each event after after, reconnecting when the
// stream ends, until ctx ends (nil) or the server refuses the stream (its
// error).
func followEvents(ctx context.Context, cl *client.Client, tenant string, after int64, fn func(api.Event)) error {
	for {
		var err error
		after, err = cl.StreamTenantEvents(ctx, tenant, after, func(e api.Event) error {
			fn(e)
			return nil
		})
		if ctx.Err() != nil {
			return nil
		}
		var ae *api.Error
		if errors.As(err, &ae) {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(2 * time.Second): // the stream broke: reconnect after the last event seen
		}
	}
}
