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
	var ac conn
	var file string
	apply := &cobra.Command{
		Use: "apply -f FILE", Short: "Replace the alert rules with a rules file", Args: cobra.NoArgs,
		RunE: ac.run(func(ctx context.Context, cl *client.Client, out io.Writer, _ []string) error {
			if file == "" {
				return errors.New("alert apply: -f FILE is required")
			}
			data, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			as, err := cl.ApplyAlerts(ctx, api.AlertsApply{File: filepath.Base(file), Source: string(data)})
			if err != nil {
				return err
			}
			return ac.emit(out, as, alertTable(as))
		}),
	}
	ac.bind(apply)
	apply.Flags().StringVarP(&file, "file", "f", "", "alert rules file (YAML)")
	cmd.AddCommand(listCmd, apply)
	return cmd
}
