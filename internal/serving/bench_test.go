package serving

import (
	"testing"
	"time"
)

// BenchmarkStep is one step of the queueing model at a typical operating
// point (H100, 40 replicas, ρ = 0.8, code-trace sizes).
func BenchmarkStep(b *testing.B) {
	d, err := ProfileDist(h100(b), codeSizes(b))
	if err != nil {
		b.Fatal(err)
	}
	in := StepInput{Rate: 0.8 * d.Capacity(40), Replicas: 40, Step: time.Minute}
	if r := d.Step(in); r.P99 <= 0 || r.Overloaded || r.Response.c <= 0 {
		b.Fatalf("not a stationary step with queueing: %+v", r)
	}
	b.ReportAllocs()
	for b.Loop() {
		d.Step(in)
	}
}

// BenchmarkStepOverload is a step with a growing backlog (fluid phases and
// bisection for the percentiles).
func BenchmarkStepOverload(b *testing.B) {
	d, err := ProfileDist(h100(b), codeSizes(b))
	if err != nil {
		b.Fatal(err)
	}
	in := StepInput{Rate: 1.2 * d.Capacity(40), Replicas: 40, Step: time.Minute, Backlog: 100, MaxWait: 30 * time.Second}
	if r := d.Step(in); !r.Overloaded || r.Response.nf == 0 {
		b.Fatalf("not an overloaded step: %+v", r)
	}
	b.ReportAllocs()
	for b.Loop() {
		d.Step(in)
	}
}
