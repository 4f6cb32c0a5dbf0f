package openb

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/arbiterhq/arbiter/internal/sched/score"
)

// ExpectedFile is the published allocation curves, one row per run.
const ExpectedFile = "analysis_allo_discrete.csv"

// ExpectedDir returns where the published results sit for a trace folder:
// the sibling folder fgd-expected-results.
func ExpectedDir(traceDir string) string {
	return filepath.Join(filepath.Dir(filepath.Clean(traceDir)), "fgd-expected-results")
}

// Published is one published run.
type Published struct {
	Workload  string // our name ("default"), without the openb_pod_list_ prefix
	Policy    string // registry name ("fgd")
	Seed      int64
	TotalGPUs int
	Curve     []float64 // Columns values; NaN for empty cells
}

// PublishedSet indexes published runs by workload, policy and seed.
type PublishedSet map[PublishedKey]*Published

// PublishedKey identifies one published run.
type PublishedKey struct {
	Workload, Policy string
	Seed             int64
}

// Runs returns the published runs of a workload and policy, any seed.
func (ps PublishedSet) Runs(workload, policy string) []*Published {
	var out []*Published
	for k, p := range ps {
		if k.Workload == workload && k.Policy == policy {
			out = append(out, p)
		}
	}
	return out
}

// ReadPublished reads analysis_allo_discrete.csv from dir. A missing file
// returns an error wrapping os.ErrNotExist.
func ReadPublished(dir string) (PublishedSet, error) {
	path := filepath.Join(dir, ExpectedFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParsePublished(f, path)
}

// ParsePublished parses the published curves (columns workload, sc_policy,
// tune, seed, optional total_gpus, then 0..130).
func ParsePublished(r io.Reader, name string) (PublishedSet, error) {
	cr := csv.NewReader(r)
	hdr, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("openb: %s: %w", name, err)
	}
	col := map[string]int{}
	for i, h := range hdr {
		col[strings.TrimSpace(h)] = i
	}
	for _, need := range []string{"workload", "sc_policy", "seed", "0", "130"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("openb: %s: missing column %q", name, need)
		}
	}
	out := PublishedSet{}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("openb: %s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		seed, err := strconv.ParseInt(rec[col["seed"]], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("openb: %s:%d: seed: %w", name, line, err)
		}
		p := &Published{
			Workload:  strings.TrimPrefix(rec[col["workload"]], PodFilePrefix),
			Policy:    score.Canonical(rec[col["sc_policy"]]),
			Seed:      seed,
			TotalGPUs: 0,
			Curve:     make([]float64, Columns),
		}
		if i, ok := col["total_gpus"]; ok {
			if p.TotalGPUs, err = strconv.Atoi(rec[i]); err != nil {
				return nil, fmt.Errorf("openb: %s:%d: total_gpus: %w", name, line, err)
			}
		}
		for x := range p.Curve {
			i, ok := col[strconv.Itoa(x)]
			if !ok || strings.TrimSpace(rec[i]) == "" {
				p.Curve[x] = math.NaN()
				continue
			}
			if p.Curve[x], err = strconv.ParseFloat(strings.TrimSpace(rec[i]), 64); err != nil {
				return nil, fmt.Errorf("openb: %s:%d: column %d: %w", name, line, x, err)
			}
		}
		out[PublishedKey{p.Workload, p.Policy, p.Seed}] = p
	}
	return out, nil
}

// MaxAbsDev returns the largest |ours − published| over the columns and the
// column where it occurs. A column empty in one curve and not in the other
// counts as an infinite deviation; empty in both, as none.
func MaxAbsDev(ours, published []float64) (dev float64, col int) {
	col = -1
	for x := 0; x < len(ours) && x < len(published); x++ {
		a, b := ours[x], published[x]
		var d float64
		switch {
		case math.IsNaN(a) && math.IsNaN(b):
			continue
		case math.IsNaN(a) || math.IsNaN(b):
			d = math.Inf(1)
		default:
			d = math.Abs(a - b)
		}
		if col < 0 || d > dev {
			dev, col = d, x
		}
	}
	return dev, col
}

// UnallocatedGPUs converts an allocation % into idle GPUs of the cluster,
// as the published summary does: gpus × (100 − alloc) / 100.
func UnallocatedGPUs(allocPct float64, gpus int) float64 {
	return float64(gpus) * (100 - allocPct) / 100
}
