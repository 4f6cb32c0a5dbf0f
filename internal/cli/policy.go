package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/arbiterhq/arbiter/internal/policy"
)

func newPolicyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Check and explain metric-driven scheduling policies",
		Long: `Policies are rules that watch metrics (utilization, latency percentiles,
queue wait, pending GPUs, spot price, capacity failures) and switch actions
on and off (scale_down, migrate, reallocate, set_priority, set_limit,
set_spot_price, drain, notify). Files may use the operators' format
(scheduling_policies:) or the native format (policies:); see
examples/policies/.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(newPolicyExplainCmd(), newPolicyValidateCmd(), newPolicyTestCmd())
	return cmd
}

func newPolicyExplainCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "explain -f FILE",
		Short: "Print what each rule of a policy file will do, in plain words",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := loadPolicyFlag(file)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d %s (%s format)\n\n%s", p.File, len(p.Rules), pluralWord(len(p.Rules), "rule"), p.Format, p.Explain())
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "policy file")
	return cmd
}

func newPolicyValidateCmd() *cobra.Command {
	var file string
	var known policy.Targets
	cmd := &cobra.Command{
		Use:   "validate -f FILE [--tenant T,...] [--class C,...] [--pool P,...] [--service S,...] [--flavor F,...] [--region R,...]",
		Short: "Check a policy file and list every problem with its file:line:column",
		Long: `Checks units, names, action types, required fields and CEL expressions.
With any of --tenant, --class, --pool, --service, --flavor or --region, it
also checks that every target the rules name exists among those given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := loadPolicyFlag(file)
			if err != nil {
				return err
			}
			checked := known.Tenants != nil || known.Classes != nil || known.Pools != nil ||
				known.Services != nil || known.Flavors != nil || known.Regions != nil
			if checked {
				if err := p.Validate(known); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d %s (%s format): ok\n", p.File, len(p.Rules), pluralWord(len(p.Rules), "rule"), p.Format)
			if !checked {
				fmt.Fprintln(cmd.OutOrStdout(), "targets not checked: pass --tenant, --class, --pool, --service, --flavor or --region to check them")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&file, "file", "f", "", "policy file")
	f.StringSliceVar(&known.Tenants, "tenant", nil, "known tenants")
	f.StringSliceVar(&known.Classes, "class", nil, "known workload classes")
	f.StringSliceVar(&known.Pools, "pool", nil, "known pools")
	f.StringSliceVar(&known.Services, "service", nil, "known inference services")
	f.StringSliceVar(&known.Flavors, "flavor", nil, "known flavors (GPU models)")
	f.StringSliceVar(&known.Regions, "region", nil, "known regions")
	return cmd
}

func loadPolicyFlag(file string) (*policy.Policy, error) {
	if strings.TrimSpace(file) == "" {
		return nil, errors.New("policy: -f FILE is required (try examples/policies/operators.yaml)")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return policy.Load(file, data)
}

func pluralWord(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
