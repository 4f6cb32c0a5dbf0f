package serving

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// LoadProfile describes a service's request rate over time: a daily cycle,
// quieter weekends, random bursts and per-minute noise.
//
//	rate(t) = MeanRate · (1 + DailyAmplitude·cos(2π(hour(t) − PeakHourUTC)/24))
//	                   · (WeekendFactor on Saturday and Sunday)
//	                   · (BurstFactor while a burst is on)
//	                   · max(0, 1 + Noise·z(minute))
//
// with z a standard normal drawn per minute from the seed.
type LoadProfile struct {
	MeanRate       Rate          // weekday mean, before bursts
	DailyAmplitude float64       // in [0, 1]: peak is (1+A)·mean, trough (1−A)·mean
	PeakHourUTC    float64       // hour of the daily peak, UTC, in [0, 24)
	WeekendFactor  float64       // multiplier on Saturday and Sunday; 0 means 1
	BurstsPerDay   float64       // mean number of bursts a day (Poisson)
	BurstFactor    float64       // rate multiplier during a burst, ≥ 1
	BurstDuration  time.Duration // mean burst length (exponential)
	Noise          float64       // relative standard deviation of the per-minute noise
}

// CodingAssistantLoad is the coding-assistant load of one user region whose
// working day peaks at peakHourUTC: 350 requests/s on average on weekdays
// (about 30 million a day), peak-to-trough 4:1 (amplitude 0.6), weekends
// at 35%, two bursts a day of ×1.8 lasting 10 minutes on average, 5%
// per-minute noise. The shape follows developer working hours; the volume
// is the "tens of millions of requests a day at full scale".
func CodingAssistantLoad(peakHourUTC float64) LoadProfile {
	return LoadProfile{
		MeanRate:       350,
		DailyAmplitude: 0.6,
		PeakHourUTC:    peakHourUTC,
		WeekendFactor:  0.35,
		BurstsPerDay:   2,
		BurstFactor:    1.8,
		BurstDuration:  10 * time.Minute,
		Noise:          0.05,
	}
}

// Validate reports the first invalid field.
func (p LoadProfile) Validate() error {
	switch {
	case !(p.MeanRate >= 0) || math.IsInf(float64(p.MeanRate), 0):
		return fmt.Errorf("serving: load: mean rate %v must be ≥ 0", p.MeanRate)
	case !(p.DailyAmplitude >= 0 && p.DailyAmplitude <= 1):
		return fmt.Errorf("serving: load: daily amplitude %v not in [0, 1]", p.DailyAmplitude)
	case !(p.PeakHourUTC >= 0 && p.PeakHourUTC < 24):
		return fmt.Errorf("serving: load: peak hour %v not in [0, 24)", p.PeakHourUTC)
	case !(p.WeekendFactor >= 0) || math.IsInf(p.WeekendFactor, 0):
		return fmt.Errorf("serving: load: weekend factor %v must be ≥ 0", p.WeekendFactor)
	case !(p.BurstsPerDay >= 0 && p.BurstsPerDay <= 1e4):
		return fmt.Errorf("serving: load: bursts per day %v not in [0, 10000]", p.BurstsPerDay)
	case p.BurstsPerDay > 0 && (!(p.BurstFactor >= 1) || math.IsInf(p.BurstFactor, 0) || p.BurstDuration <= 0):
		return fmt.Errorf("serving: load: bursts need a factor ≥ 1 (%v) and a duration > 0 (%v)", p.BurstFactor, p.BurstDuration)
	case !(p.Noise >= 0 && p.Noise <= 1):
		return fmt.Errorf("serving: load: noise %v not in [0, 1]", p.Noise)
	}
	return nil
}

// Burst is one period of raised load.
type Burst struct {
	Start, End time.Duration // since the start of the simulation
	Factor     float64
}

// Load is a LoadProfile made concrete for one seed: the bursts are drawn
// once, the noise is a pure function of the seed and the minute. Rate is a
// pure function of time.
type Load struct {
	p       LoadProfile
	seed    uint64
	start   time.Weekday
	bursts  []Burst
	longest time.Duration
}

// NewLoad draws the bursts over [0, horizon) from seed. Time 0 is midnight
// UTC of a day that is start.
func NewLoad(p LoadProfile, seed uint64, horizon time.Duration, start time.Weekday) (*Load, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if horizon < 0 || start < time.Sunday || start > time.Saturday {
		return nil, fmt.Errorf("serving: load: bad horizon %v or weekday %d", horizon, start)
	}
	l := &Load{p: p, seed: seed, start: start}
	if p.BurstsPerDay > 0 {
		rng := rand.New(rand.NewPCG(seed, 0xb0b5))
		perSec := p.BurstsPerDay / 86400
		for t := rng.ExpFloat64() / perSec; t < horizon.Seconds(); t += rng.ExpFloat64() / perSec {
			d := seconds(rng.ExpFloat64() * p.BurstDuration.Seconds())
			b := Burst{Start: seconds(t), Factor: p.BurstFactor}
			b.End = b.Start + d
			l.bursts = append(l.bursts, b)
			l.longest = max(l.longest, d)
		}
	}
	return l, nil
}

// Bursts returns the drawn bursts in time order.
func (l *Load) Bursts() []Burst { return append([]Burst(nil), l.bursts...) }

// Rate is the request rate at time t since the start.
func (l *Load) Rate(t time.Duration) Rate {
	p := &l.p
	t = max(t, 0)
	day := int64(t / (24 * time.Hour))
	hour := (t - time.Duration(day)*24*time.Hour).Hours()
	r := float64(p.MeanRate) * (1 + p.DailyAmplitude*math.Cos(2*math.Pi*(hour-p.PeakHourUTC)/24))
	wd := time.Weekday((int64(l.start) + day) % 7)
	if (wd == time.Saturday || wd == time.Sunday) && p.WeekendFactor != 0 {
		r *= p.WeekendFactor
	}
	r *= l.burstFactor(t)
	if p.Noise > 0 {
		r *= max(0, 1+p.Noise*normal(l.seed, uint64(t/time.Minute)))
	}
	return Rate(r)
}

// MeanRate averages Rate over [from, to) by sampling each minute.
func (l *Load) MeanRate(from, to time.Duration) Rate {
	if to <= from {
		return l.Rate(from)
	}
	var s float64
	n := 0
	for t := from; t < to; t += time.Minute {
		s += float64(l.Rate(t))
		n++
	}
	return Rate(s / float64(n))
}

func (l *Load) burstFactor(t time.Duration) float64 {
	// Bursts are sorted by start; only those that started within the
	// longest burst's length before t can be on.
	i := sort.Search(len(l.bursts), func(i int) bool { return l.bursts[i].Start > t })
	f := 1.0
	for j := i - 1; j >= 0 && t-l.bursts[j].Start <= l.longest; j-- {
		if t < l.bursts[j].End {
			f = max(f, l.bursts[j].Factor)
		}
	}
	return f
}

// normal is a standard normal variate that depends only on (seed, k):
// Box–Muller over two SplitMix64 outputs.
func normal(seed, k uint64) float64 {
	a := splitmix(seed ^ splitmix(k))
	b := splitmix(a)
	u1 := (float64(a>>11) + 0.5) / (1 << 53)
	u2 := float64(b>>11) / (1 << 53)
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
