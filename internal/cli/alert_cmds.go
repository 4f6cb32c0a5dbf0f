package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

func alertTable(as api.Alerts) func(tw *tabwriter.Writer) {
	return func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "NAME\tCONDITION\tWINDOW\tFREQUENCY\tSEVERITY\tSTATE\tVALUE")
		for _, a := range as.Items {
			var labels []string
			for k, v := range a.Labels {
				labels = append(labels, k+"="+v)
			}
			metric := a.Metric
			if a.Source == "prometheus" { // a PromQL expression, cut to fit a line
				q := a.Query
				if len(q) > 60 {
					q = q[:57] + "..."
				}
				metric = "prometheus " + strconv.Quote(q)
			}
			if a.Of != "" { // a policy metric of a target
				metric += " of " + a.Of
			} else if len(labels) > 0 {
				metric += "{" + strings.Join(sortStrings(labels), ",") + "}"
			}
			val := "-"
			if a.LastValue != nil {
				val = fmt.Sprintf("%g", *a.LastValue)
			}
			fmt.Fprintf(tw, "%s\t%s(%s) %s %g\t%s\t%s\tSev%d\t%s\t%s\n", a.Name, a.Aggregation, metric, a.Operator, a.Threshold,
				time.Duration(a.Window), time.Duration(a.Frequency), a.Severity, a.State, val)
			for _, in := range a.Instances { // a split rule's alerts, one line each
				var ls []string
				for k, v := range in.Labels {
					ls = append(ls, k+"="+v)
				}
				v := "-"
				if in.LastValue != nil {
					v = fmt.Sprintf("%g", *in.LastValue)
				}
				fmt.Fprintf(tw, "  %s\t{%s}\t\t\t\t%s\t%s\n", a.Name, strings.Join(sortStrings(ls), ","), in.State, v)
			}
		}
	}
}

func sortStrings(s []string) []string {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s
}

func newAlertCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "alert", Aliases: []string{"alerts"}, Short: "Metric alert rules on the server (admin)", Args: cobra.NoArgs}
	var lc conn
	listCmd := &cobra.Command{
		Use: "list", Short: "List the alert rules with their state", Args: cobra.NoArgs,
		RunE: lc.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			as, err := cl.Alerts(ctx)
			if err != nil {
				return err
			}
			return lc.emit(out, as, alertTable(as))
		}),
	}
	lc.bind(listCmd)
	apply := applyFileCmd("alert apply", "Replace the alert rules with a rules file", "alert rules file (YAML)",
		func(ctx context.Context, cl *client.Client, file string, data []byte) (api.Alerts, error) {
			return cl.ApplyAlerts(ctx, api.AlertsApply{File: file, Source: string(data)})
		}, alertTable)
	cmd.AddCommand(listCmd, apply)
	return cmd
}

// applyFileCmd is an `apply -f FILE` command that sends a file's text to
// the server (name in messages) and prints what it answers.
func applyFileCmd[T any](name, short, fileHelp string, apply func(ctx context.Context, cl *client.Client, file string, data []byte) (T, error),
	table func(T) func(*tabwriter.Writer)) *cobra.Command {
	var c conn
	var file string
	cmd := &cobra.Command{
		Use: "apply -f FILE", Short: short, Args: cobra.NoArgs,
		RunE: c.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			if file == "" {
				return errors.New(name + ": -f FILE is required")
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			v, err := apply(ctx, cl, filepath.Base(file), data)
			if err != nil {
				return err
			}
			return c.emit(out, v, table(v))
		}),
	}
	c.bind(cmd)
	cmd.Flags().StringVarP(&file, "file", "f", "", fileHelp)
	return cmd
}
