package kube

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// The annotations and labels Arbiter reads and writes (see the README's
// "Kubernetes" section).
const (
	// AnnotationPriority overrides the priority class the pod's
	// PriorityClass maps to: critical, high, normal, low or spot.
	AnnotationPriority = "arbiter.dev/priority"
	// AnnotationPreemptible marks a pod Arbiter may evict for others:
	// "true" or "false" (default false).
	AnnotationPreemptible = "arbiter.dev/preemptible"
	// AnnotationMilliGPU asks for a share of one GPU, 1–999 milli-GPU.
	AnnotationMilliGPU = "arbiter.dev/milli-gpu"
	// AnnotationFlavors lists acceptable GPU models, most preferred first
	// (default: every model of the cluster).
	AnnotationFlavors = "arbiter.dev/flavors"
	// AnnotationRegions lists acceptable regions, most preferred first
	// (default: every region of the cluster).
	AnnotationRegions = "arbiter.dev/regions"
	// AnnotationReservation names the ArbiterReservation the pod runs on.
	AnnotationReservation = "arbiter.dev/reservation"
	// AnnotationGPUIndices is written by Arbiter at binding: the GPU
	// device indices on the node it chose, e.g. "0,1" ("3" for a share).
	AnnotationGPUIndices = "arbiter.dev/gpu-indices"
	// AnnotationMilliGranted is written by Arbiter at binding for a share of
	// a GPU: the milli-GPU granted on that GPU.
	AnnotationMilliGranted = "arbiter.dev/milli-gpu-granted"

	// LabelPodGroup is the coscheduling plugin's pod-group label.
	LabelPodGroup = "scheduling.x-k8s.io/pod-group"
	// ResourceGPU is the NVIDIA device plugin's extended resource.
	ResourceGPU = "nvidia.com/gpu"
	// LabelGPUProduct and LabelGPUMemory are GPU feature discovery's labels.
	LabelGPUProduct = "nvidia.com/gpu.product"
	LabelGPUMemory  = "nvidia.com/gpu.memory"
	// LabelRegion and LabelZone are the well-known topology labels.
	LabelRegion = "topology.kubernetes.io/region"
	LabelZone   = "topology.kubernetes.io/zone"
)

// Bounds of what annotations may say.
const (
	maxAnnotationLen = 1024
	maxListItems     = 32
	// MaxNodeGPUs bounds a node's allocatable GPUs; a node reporting more is
	// left out of the fleet (a forged or broken device plugin).
	MaxNodeGPUs = 64
)

// ErrAnnotation is the sentinel of every annotation problem.
var ErrAnnotation = errors.New("kube: bad annotation")

// AnnotationError is a problem with one annotation's value.
type AnnotationError struct {
	Key, Value, Msg string
}

func (e *AnnotationError) Error() string {
	v := e.Value
	if len(v) > 64 {
		v = v[:64] + "..."
	}
	return fmt.Sprintf("annotation %s=%q: %s", e.Key, v, e.Msg)
}

// Is makes errors.Is(err, ErrAnnotation) true.
func (e *AnnotationError) Is(target error) bool { return target == ErrAnnotation }

func annErr(key, value, format string, args ...any) error {
	return &AnnotationError{Key: key, Value: value, Msg: fmt.Sprintf(format, args...)}
}

// ParsePriority parses the priority annotation.
func ParsePriority(v string) (workload.Priority, error) {
	p, err := workload.ParsePriority(strings.TrimSpace(v))
	if err != nil {
		return 0, annErr(AnnotationPriority, v, "write one of critical, high, normal, low, spot")
	}
	return p, nil
}

// ParsePreemptible parses the preemptible annotation.
func ParsePreemptible(v string) (bool, error) {
	switch strings.TrimSpace(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, annErr(AnnotationPreemptible, v, `write "true" or "false"`)
}

// ParseMilliGPU parses the milli-GPU annotation: an integer in 1–999.
func ParseMilliGPU(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 1 || n > 999 {
		return 0, annErr(AnnotationMilliGPU, v, "write a share of one GPU in milli-GPU, 1 to 999 (e.g. 250); whole GPUs go in resources.limits[nvidia.com/gpu]")
	}
	return n, nil
}

// ParseList parses a comma-separated annotation list: non-empty, distinct
// items of at most 63 characters, at most maxListItems of them.
func ParseList(key, v string) ([]string, error) {
	if len(v) > maxAnnotationLen {
		return nil, annErr(key, v, "longer than %d bytes", maxAnnotationLen)
	}
	var out []string
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "":
			return nil, annErr(key, v, "empty item: write a comma-separated list")
		case len(f) > 63 || strings.ContainsAny(f, " \t\n/"):
			return nil, annErr(key, v, "item %.64q is not a name", f)
		}
		for _, o := range out {
			if o == f {
				return nil, annErr(key, v, "%q listed twice", f)
			}
		}
		out = append(out, f)
	}
	if len(out) > maxListItems {
		return nil, annErr(key, v, "more than %d items", maxListItems)
	}
	return out, nil
}

// ParseFlavors parses the flavors annotation against the catalog.
func ParseFlavors(v string, cat *fleet.Catalog) ([]fleet.ModelID, error) {
	items, err := ParseList(AnnotationFlavors, v)
	if err != nil {
		return nil, err
	}
	out := make([]fleet.ModelID, 0, len(items))
	for _, it := range items {
		if _, ok := cat.Model(fleet.ModelID(it)); !ok {
			return nil, annErr(AnnotationFlavors, v, "unknown GPU model %q (models: %v)", it, cat.ModelNames())
		}
		out = append(out, fleet.ModelID(it))
	}
	return out, nil
}

// ParseGPUIndices parses the GPU indices annotation against a node's GPU
// count: distinct indices in [0, gpus).
func ParseGPUIndices(v string, gpus int) ([]int, error) {
	if len(v) > maxAnnotationLen {
		return nil, annErr(AnnotationGPUIndices, v, "longer than %d bytes", maxAnnotationLen)
	}
	var out []int
	seen := map[int]bool{}
	for _, f := range strings.Split(v, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || i < 0 || i >= gpus || seen[i] {
			return nil, annErr(AnnotationGPUIndices, v, "want distinct GPU indices 0..%d", gpus-1)
		}
		seen[i] = true
		out = append(out, i)
	}
	return out, nil
}

// FormatGPUIndices is the GPU indices annotation's value.
func FormatGPUIndices(gpus []int) string {
	s := make([]string, len(gpus))
	for i, g := range gpus {
		s[i] = strconv.Itoa(g)
	}
	return strings.Join(s, ",")
}
