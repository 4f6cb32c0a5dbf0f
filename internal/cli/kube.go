package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/kube"
)

// kubeFlags are the flags of `arbiter kube`.
type kubeFlags struct {
	kubeconfig, schedulerName, tenantLabel, tenantMapping, blockLabel string
	modelMap, priorityMapping                                         string
	leaseName, leaseNamespace, identity                               string
	interval                                                          time.Duration
	noLeaderElection                                                  bool
	workers, burst                                                    int
	qps                                                               float64
}

func newKubeCmd() *cobra.Command {
	var f kubeFlags
	cmd := &cobra.Command{
		Use:   "kube",
		Short: "Schedule a Kubernetes cluster's GPU pods (those with spec.schedulerName arbiter)",
		Long: `kube connects to a cluster (--kubeconfig, else the in-cluster config), watches
Nodes, Pods, Namespaces, ArbiterTenants, ArbiterReservations and PodGroups, and
schedules the pods whose spec.schedulerName is --scheduler-name with Arbiter's
core: binding, preemption through the Eviction API, why-pending as the pod's
PodScheduled condition. Replicas elect a leader on a Lease; only it schedules.
Install the CRDs and the Deployment from deploy/ (see the README, "Kubernetes").`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runKube(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else the in-cluster config)")
	fl.DurationVar(&f.interval, "interval", time.Second, "time between scheduling cycles (a change to a watched object also starts one)")
	fl.StringVar(&f.schedulerName, "scheduler-name", "arbiter", "schedule the pods whose spec.schedulerName is this")
	fl.StringVar(&f.tenantLabel, "tenant-label", "arbiter.dev/tenant", "namespace label naming the namespace's tenant")
	fl.StringVar(&f.tenantMapping, "tenant-mapping", "", "NAMESPACE=TENANT,... (wins over ArbiterTenant spec.namespaces and --tenant-label)")
	fl.StringVar(&f.blockLabel, "block-label", "arbiter.dev/block", "node label naming the node's block (NVLink/InfiniBand domain) for gangs")
	fl.StringVar(&f.modelMap, "gpu-model-map", "", "PRODUCT=MODEL,... exact nvidia.com/gpu.product values mapped to Arbiter models, before the built-in table")
	fl.StringVar(&f.priorityMapping, "priority-class-mapping", "", "PRIORITYCLASS=CLASS,... PriorityClass names mapped to critical|high|normal|low|spot")
	fl.StringVar(&f.leaseName, "lease-name", "arbiter-kube", "name of the coordination.k8s.io Lease for leader election")
	fl.StringVar(&f.leaseNamespace, "lease-namespace", "arbiter-system", "namespace of the Lease")
	fl.StringVar(&f.identity, "identity", "", "this replica's identity in the Lease (default: hostname)")
	fl.IntVar(&f.workers, "workers", kube.DefaultWorkers, "API calls (bindings, conditions) in flight at once")
	fl.Float64Var(&f.qps, "kube-api-qps", 1000, "client-side limit on requests per second to the API server")
	fl.IntVar(&f.burst, "kube-api-burst", 2000, "client-side burst of requests to the API server")
	fl.BoolVar(&f.noLeaderElection, "no-leader-election", false, "schedule without a Lease (only when exactly one replica runs)")
	return cmd
}

// kubeConfig turns the flags into the translation's configuration.
func kubeConfig(f kubeFlags) (kube.Config, error) {
	cfg := kube.Config{SchedulerName: f.schedulerName, TenantLabel: f.tenantLabel, BlockLabel: f.blockLabel, Interval: f.interval, Workers: f.workers}
	var err error
	if cfg.TenantMapping, err = kube.ParseMapping("--tenant-mapping", f.tenantMapping); err != nil {
		return cfg, err
	}
	if cfg.Models, err = kube.ParseModelMap(f.modelMap, fleet.Builtin()); err != nil {
		return cfg, err
	}
	if cfg.PriorityClasses, err = kube.ParsePriorityMapping(f.priorityMapping); err != nil {
		return cfg, err
	}
	if f.interval <= 0 {
		return cfg, fmt.Errorf("--interval must be positive, got %v", f.interval)
	}
	if f.workers < 1 || f.workers > 1024 {
		return cfg, fmt.Errorf("--workers must be 1 to 1024, got %d", f.workers)
	}
	if f.qps <= 0 || f.burst < 1 {
		return cfg, fmt.Errorf("--kube-api-qps and --kube-api-burst must be positive, got %v and %d", f.qps, f.burst)
	}
	return cfg, nil
}

// restConfig is the kubeconfig's, $KUBECONFIG's or the in-cluster config.
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	if path == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", path)
}

func runKube(cmd *cobra.Command, f kubeFlags) error {
	cfg, err := kubeConfig(f)
	if err != nil {
		return err
	}
	rc, err := restConfig(f.kubeconfig)
	if err != nil {
		return fmt.Errorf("kube: connecting: %w", err)
	}
	rc.QPS, rc.Burst = float32(f.qps), f.burst
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	run := func(ctx context.Context) error {
		c, err := kube.NewController(cfg, client, dyn, log)
		if err != nil {
			return err
		}
		return c.Run(ctx)
	}
	if f.noLeaderElection {
		return run(ctx)
	}
	id := f.identity
	if id == "" {
		if id, err = os.Hostname(); err != nil {
			return err
		}
	}
	var runErr error
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lerr := kube.RunLeader(lctx, client, kube.Lease{Name: f.leaseName, Namespace: f.leaseNamespace, Identity: id}, log,
		func(ctx context.Context) { runErr = run(ctx); cancel() })
	if runErr != nil {
		return runErr
	}
	return lerr
}
