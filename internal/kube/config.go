package kube

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// Config is how `arbiter kube` reads a cluster.
type Config struct {
	// SchedulerName is the spec.schedulerName of the pods Arbiter
	// schedules (default "arbiter").
	SchedulerName string
	// TenantLabel is the namespace label naming a namespace's tenant.
	TenantLabel string
	// TenantMapping maps namespaces to tenants; it wins over the label,
	// the ArbiterTenant's spec.namespaces and the namespace's own name.
	TenantMapping map[string]string
	// BlockLabel is the node label naming its block (NVLink/InfiniBand
	// domain); a node without it is a block of its own.
	BlockLabel string
	// Models maps GPU feature discovery's labels to Arbiter's models.
	Models ModelTable
	// PriorityClasses maps PriorityClass names to Arbiter's classes; see
	// PriorityOf for the defaults.
	PriorityClasses map[string]workload.Priority
	// Interval is the time between cycles (a cycle also runs soon after a
	// pod or node changes).
	Interval time.Duration
	// AssumeTTL is how long a binding Arbiter made counts before the pod
	// cache shows it (kept against a lagging cache; default 30 s).
	AssumeTTL time.Duration
	// Workers is how many API calls (bindings, conditions) a cycle has in
	// flight at once (default DefaultWorkers).
	Workers int
}

// DefaultWorkers is the default of Config.Workers. Measured against the
// real kube-apiserver at 1,000 nodes and a backlog of 10,000 pods
// (docs/perf.md): 16 bound 318 pods/s, 64 bound 506, 128 no more than 64.
const DefaultWorkers = 64

// Defaults fills what c leaves empty.
func (c *Config) Defaults() {
	if c.SchedulerName == "" {
		c.SchedulerName = "arbiter"
	}
	if c.TenantLabel == "" {
		c.TenantLabel = "arbiter.dev/tenant"
	}
	if c.BlockLabel == "" {
		c.BlockLabel = "arbiter.dev/block"
	}
	if c.Models == nil {
		c.Models = DefaultModels()
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.AssumeTTL <= 0 {
		c.AssumeTTL = 30 * time.Second
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
}

// ModelRule maps a GPU product to an Arbiter model: the first rule whose
// Product is a substring of the nvidia.com/gpu.product label (compared
// case-insensitively) and whose MinMemoryMiB is at most the
// nvidia.com/gpu.memory label wins. Exact rules match the whole label.
type ModelRule struct {
	Product      string
	Exact        bool
	MinMemoryMiB int
	Model        fleet.ModelID
}

// ModelTable is an ordered list of rules.
type ModelTable []ModelRule

// DefaultModels is the documented table (README "Kubernetes"): the
// product names GPU feature discovery writes, e.g. NVIDIA-H100-80GB-HBM3,
// NVIDIA-A100-SXM4-40GB, Tesla-T4.
func DefaultModels() ModelTable {
	return ModelTable{
		{Product: "H200", Model: "H200-141G"},
		{Product: "H100", Model: "H100-80G"},
		{Product: "A100", MinMemoryMiB: 60000, Model: "A100-80G"},
		{Product: "A100-SXM4-80GB", Model: "A100-80G"},
		{Product: "A100-PCIE-80GB", Model: "A100-80G"},
		{Product: "A100", Model: "A100-40G"},
		{Product: "A10", Model: "A10"},
		{Product: "T4", Model: "T4"},
		{Product: "MI300X", Model: "MI300X-192G"},
	}
}

// Lookup maps a node's product and memory labels to a model.
func (t ModelTable) Lookup(product, memory string) (fleet.ModelID, bool) {
	mem, _ := strconv.Atoi(strings.TrimSpace(memory))
	p := strings.ToUpper(product)
	for _, r := range t {
		rp := strings.ToUpper(r.Product)
		if r.Exact && p != rp || !r.Exact && !strings.Contains(p, rp) {
			continue
		}
		if r.MinMemoryMiB > 0 && mem < r.MinMemoryMiB {
			continue
		}
		return r.Model, true
	}
	return "", false
}

// ParseModelMap parses overrides "PRODUCT=MODEL,..." (exact product
// names) against the catalog; they go before the default rules.
func ParseModelMap(s string, cat *fleet.Catalog) (ModelTable, error) {
	var out ModelTable
	for _, kv := range splitPairs(s) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("--gpu-model-map: %q: write PRODUCT=MODEL", kv)
		}
		if _, ok := cat.Model(fleet.ModelID(v)); !ok {
			return nil, fmt.Errorf("--gpu-model-map: %q: unknown model %q (models: %v)", kv, v, cat.ModelNames())
		}
		out = append(out, ModelRule{Product: k, Exact: true, Model: fleet.ModelID(v)})
	}
	return append(out, DefaultModels()...), nil
}

// ParseMapping parses "KEY=VALUE,..." (the --tenant-mapping flag).
func ParseMapping(flag, s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range splitPairs(s) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%s: %q: write KEY=VALUE", flag, kv)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s: %q mapped twice", flag, k)
		}
		out[k] = v
	}
	return out, nil
}

// ParsePriorityMapping parses "PRIORITYCLASS=CLASS,..." (the
// --priority-class-mapping flag).
func ParsePriorityMapping(s string) (map[string]workload.Priority, error) {
	m, err := ParseMapping("--priority-class-mapping", s)
	if err != nil {
		return nil, err
	}
	out := map[string]workload.Priority{}
	for k, v := range m {
		p, err := workload.ParsePriority(v)
		if err != nil {
			return nil, fmt.Errorf("--priority-class-mapping: %s: %w", k, err)
		}
		out[k] = p
	}
	return out, nil
}

func splitPairs(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// PriorityOf maps a PriorityClass name to Arbiter's class: the configured
// mapping first; then a class named after an Arbiter class, bare or with
// the "arbiter-" prefix ("high", "arbiter-high"); the system classes are
// critical; anything else (or none) is normal.
func (c *Config) PriorityOf(class string) workload.Priority {
	if p, ok := c.PriorityClasses[class]; ok {
		return p
	}
	if p, err := workload.ParsePriority(strings.TrimPrefix(class, "arbiter-")); err == nil {
		return p
	}
	if class == "system-node-critical" || class == "system-cluster-critical" {
		return workload.PriorityCritical
	}
	return workload.DefaultPriority
}
