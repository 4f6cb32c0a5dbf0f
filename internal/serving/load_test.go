package serving

import (
	"math"
	"testing"
	"time"
)

func TestLoadCodingAssistant(t *testing.T) {
	const seed = 21
	p := CodingAssistantLoad(15)
	l, err := NewLoad(p, seed, 14*24*time.Hour, time.Monday)
	if err != nil {
		t.Fatal(err)
	}
	// Requests per day: Monday at full scale is tens of millions; Saturday
	// is about WeekendFactor of it.
	perDay := func(day int) float64 {
		var n float64
		for m := 0; m < 1440; m++ {
			n += float64(l.Rate(time.Duration(day)*24*time.Hour+time.Duration(m)*time.Minute)) * 60
		}
		return n
	}
	mon, sat := perDay(0), perDay(5)
	if mon < 25e6 || mon > 40e6 {
		t.Errorf("seed %d: %.1fM requests on Monday, want tens of millions (≈30M)", seed, mon/1e6)
	}
	if r := sat / mon; r < 0.25 || r > 0.5 {
		t.Errorf("seed %d: Saturday/Monday = %.2f, want ≈0.35", seed, r)
	}
	// The daily peak is at 15:00 UTC and the trough at 03:00 (without
	// bursts and noise; hourly means on a weekday).
	p.BurstsPerDay, p.Noise = 0, 0
	smooth, _ := NewLoad(p, seed, 14*24*time.Hour, time.Monday)
	hourly := func(h int) float64 {
		return float64(smooth.MeanRate(time.Duration(24+h)*time.Hour-30*time.Minute, time.Duration(24+h)*time.Hour+30*time.Minute))
	}
	peak, trough := 0, 0
	for h := 0; h < 24; h++ {
		if hourly(h) > hourly(peak) {
			peak = h
		}
		if hourly(h) < hourly(trough) {
			trough = h
		}
	}
	if peak != 15 || trough != 3 {
		t.Errorf("seed %d: peak hour %d, trough hour %d; want ≈15 and ≈3", seed, peak, trough)
	}
}

func TestLoadDeterministicAndBursty(t *testing.T) {
	p := CodingAssistantLoad(10)
	p.BurstsPerDay = 6
	a, _ := NewLoad(p, 1, 7*24*time.Hour, time.Sunday)
	b, _ := NewLoad(p, 1, 7*24*time.Hour, time.Sunday)
	c, _ := NewLoad(p, 2, 7*24*time.Hour, time.Sunday)
	same, differ := true, false
	for m := 0; m < 7*1440; m += 7 {
		t0 := time.Duration(m) * time.Minute
		same = same && a.Rate(t0) == b.Rate(t0)
		differ = differ || a.Rate(t0) != c.Rate(t0)
		if a.Rate(t0) < 0 {
			t.Fatalf("negative rate at %v", t0)
		}
	}
	if !same || !differ {
		t.Fatalf("same seed same rates: %v; other seed differs: %v", same, differ)
	}
	bursts := a.Bursts()
	if len(bursts) < 20 || len(bursts) > 70 { // Poisson mean 42
		t.Fatalf("%d bursts in a week at 6/day", len(bursts))
	}
	// During a burst the rate is BurstFactor times the same minute without
	// bursts (same seed, same noise).
	p0 := p
	p0.BurstsPerDay = 0
	plain, _ := NewLoad(p0, 1, 7*24*time.Hour, time.Sunday)
	for _, bu := range bursts {
		mid := (bu.Start + bu.End) / 2
		if got := float64(a.Rate(mid) / plain.Rate(mid)); math.Abs(got-p.BurstFactor) > 1e-9 {
			t.Fatalf("burst %+v: factor %.3f at its middle", bu, got)
		}
	}
}

func TestLoadValidate(t *testing.T) {
	bad := []func(*LoadProfile){
		func(p *LoadProfile) { p.MeanRate = -1 },
		func(p *LoadProfile) { p.DailyAmplitude = 1.5 },
		func(p *LoadProfile) { p.PeakHourUTC = 24 },
		func(p *LoadProfile) { p.WeekendFactor = math.NaN() },
		func(p *LoadProfile) { p.BurstFactor = 0.5 },
		func(p *LoadProfile) { p.BurstDuration = 0 },
		func(p *LoadProfile) { p.Noise = 2 },
	}
	for i, f := range bad {
		p := CodingAssistantLoad(12)
		f(&p)
		if _, err := NewLoad(p, 1, time.Hour, time.Monday); err == nil {
			t.Errorf("case %d: invalid profile accepted", i)
		}
	}
}
