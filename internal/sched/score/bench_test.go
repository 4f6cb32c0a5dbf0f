package score

import (
	"math/rand"
	"testing"
)

// benchTypical builds 35 typical pods like the openb default trace's: CPU-only,
// sharing and whole-GPU shapes, a few with model constraints.
func benchTypical() []TypicalPod {
	rng := rand.New(rand.NewSource(1))
	var reqs []Request
	for range 8000 {
		var r Request
		r.CPU = int64(1+rng.Intn(16)) * 1000
		switch x := rng.Intn(10); {
		case x < 1:
		case x < 5:
			r.GPUs, r.Milli = 1, int64(1+rng.Intn(9))*100
		default:
			r.GPUs, r.Milli = []int{1, 1, 1, 2, 4, 8}[rng.Intn(6)], 1000
		}
		if rng.Intn(10) == 0 {
			r.Models = []string{"T4"}
		}
		reqs = append(reqs, r)
	}
	tp := TypicalPods(reqs, 95)
	return tp[:min(35, len(tp))]
}

// BenchmarkScore measures one Score call (one node, one pod) per scorer on
// a half-used 8-GPU node, for a sharing pod (FGD and arbiter try every
// GPU) and a whole-GPU pod.
func BenchmarkScore(b *testing.B) {
	tp := benchTypical()
	n := node(48000, "T4", 500, 1000, 300, 1000, 1000, 0, 1000, 700)
	reqs := map[string]*Request{
		"share": {CPU: 4000, GPUs: 1, Milli: 400},
		"whole": {CPU: 8000, GPUs: 1, Milli: 1000},
	}
	for _, name := range Names() {
		for _, kind := range []string{"share", "whole"} {
			s, err := New(name, WithSeed(1), WithTypicalPods(tp))
			if err != nil {
				b.Fatal(err)
			}
			r := reqs[kind]
			buf := make([]int, 0, 8)
			if _, g := s.Score(n, r, buf[:0]); len(g) != 1 {
				b.Fatalf("%s: no GPU chosen", name)
			}
			b.Run(name+"/"+kind, func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					s.Score(n, r, buf[:0])
				}
			})
		}
	}
}
