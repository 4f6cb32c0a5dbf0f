package kube

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/resource"
)

// ErrNode is the sentinel of every node translation problem.
var ErrNode = errors.New("kube: node not schedulable by Arbiter")

// NodeError says why a node is left out of the fleet.
type NodeError struct{ Node, Msg string }

func (e *NodeError) Error() string        { return fmt.Sprintf("node %s: %s", e.Node, e.Msg) }
func (e *NodeError) Is(target error) bool { return target == ErrNode }

// DefaultRegion is the region of a node without the region label.
const DefaultRegion = "default"

// skuName is the synthetic SKU of nodes with gpus GPUs of model m (the
// cluster has no cloud SKUs; reservations count machines of one SKU).
func skuName(m fleet.ModelID, gpus int) fleet.SKUName {
	return fleet.SKUName(fmt.Sprintf("k8s-%s-x%d", m, gpus))
}

// translateNode is a Node in the scheduler's model. It returns nil, nil for
// a node without GPUs (not Arbiter's business) and a *NodeError for a GPU
// node Arbiter cannot use. down is true for a cordoned or not-Ready node.
func translateNode(n *corev1.Node, cfg *Config) (fn *fleet.Node, down bool, err error) {
	q, ok := n.Status.Allocatable[ResourceGPU]
	if !ok || q.IsZero() {
		return nil, false, nil
	}
	if q.Sign() < 0 || q.MilliValue()%1000 != 0 || q.Value() > MaxNodeGPUs {
		return nil, false, &NodeError{n.Name, fmt.Sprintf("status.allocatable[%s] = %s: want a whole number of GPUs, at most %d", ResourceGPU, q.String(), MaxNodeGPUs)}
	}
	product := n.Labels[LabelGPUProduct]
	model, ok := cfg.Models.Lookup(product, n.Labels[LabelGPUMemory])
	if !ok {
		return nil, false, &NodeError{n.Name, fmt.Sprintf("GPU product %q (label %s) maps to no Arbiter model: add it with --gpu-model-map PRODUCT=MODEL", product, LabelGPUProduct)}
	}
	gpus := int(q.Value())
	region := n.Labels[LabelRegion]
	if region == "" {
		region = DefaultRegion
	}
	block := fleet.BlockID(n.Labels[cfg.BlockLabel])
	if block == "" {
		block = fleet.BlockID("node:" + n.Name)
	}
	fn = &fleet.Node{
		ID: fleet.NodeID(n.Name), Region: region, Zone: n.Labels[LabelZone], Block: block,
		Model: model, GPUs: gpus, Labels: n.Labels,
	}
	if c, ok := n.Status.Allocatable[corev1.ResourceCPU]; ok {
		fn.CPU = resource.MilliCPU(c.MilliValue())
	}
	if m, ok := n.Status.Allocatable[corev1.ResourceMemory]; ok {
		fn.Memory = resource.MiB(m.Value() >> 20)
	}
	return fn, n.Spec.Unschedulable || !nodeReady(n), nil
}

// nodeReady reports whether the node's Ready condition is True.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// buildFleet translates the GPU nodes and makes the catalog that holds
// their synthetic SKUs. Problems are returned, one per node left out.
func buildFleet(nodes []*corev1.Node, cfg *Config) (*fleet.Fleet, []fleet.NodeID, []error, error) {
	cat := fleet.Builtin()
	var fns []*fleet.Node
	var down []fleet.NodeID
	var problems []error
	skus := map[fleet.SKUName]bool{}
	var extra fleet.Catalog
	for _, n := range nodes {
		fn, isDown, err := translateNode(n, cfg)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if fn == nil {
			continue
		}
		name := skuName(fn.Model, fn.GPUs)
		if !skus[name] {
			skus[name] = true
			extra.SKUs = append(extra.SKUs, fleet.SKU{Name: name, Model: fn.Model, GPUs: fn.GPUs,
				VCPUs: int(fn.CPU / 1000), MemoryGiB: int(fn.Memory / 1024)})
		}
		fns = append(fns, fn)
		if isDown {
			down = append(down, fn.ID)
		}
	}
	if err := cat.Merge(&extra); err != nil {
		return nil, nil, problems, fmt.Errorf("kube: node catalog: %w", err)
	}
	for _, fn := range fns {
		fn.SKU, _ = cat.SKU(skuName(fn.Model, fn.GPUs))
	}
	f, err := fleet.FromNodes(cat, fns)
	if err != nil {
		return nil, nil, problems, err
	}
	return f, down, problems, nil
}
