package server

import (
	"sync"
	"time"
)

// authentication, per source address before it. It holds at most max
// buckets: when full, it drops the buckets that have refilled (they
// would start full anyway), and only if none has, all of them.
type limiter struct {
	rate  float64
	burst float64
	max   int
	now   func() time.Time
	mu    sync.Mutex
	b     map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(rate float64, burst int, now func() time.Time) *limiter {
	return &limiter{rate: rate, burst: float64(burst), max: 100_000, now: now, b: map[string]*bucket{}}
}

// empty reports whether key's bucket has no request left (without
// spending one).
func (l *limiter) empty(key string) bool {
	if l.rate < 0 {
		return false
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.b[key]
	return ok && min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate) < 1
}

// sweep drops the buckets that have refilled; l.mu is held.
func (l *limiter) sweep(now time.Time) {
	for k, b := range l.b {
		if b.tokens+now.Sub(b.last).Seconds()*l.rate >= l.burst {
			delete(l.b, k)
		}
	}
	if len(l.b) >= l.max {
		clear(l.b)
	}
}

func (l *limiter) allow(key string) bool {
	if l.rate < 0 {
		return true
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.b[key]
	if !ok {
		if len(l.b) >= l.max {
			l.sweep(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.b[key] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
