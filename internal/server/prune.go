package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/store"
)

// The event log grows by one event per write of a workload, reservation,
// tenant or node; the pruner keeps it bounded. It deletes, oldest first,
// the events older than Options.EventRetention and those more than
// Options.EventHistory revisions behind the store's revision, in
// transactions of at most pruneBatch events so that submissions never wait
// long behind it, and records the highest sequence deleted (a setting, in
// the same transaction). Readers that follow the log from a revision
// older than that mark have missed events: the live cache then reads
// every workload again, and the events API answers 410.

const (
	settingEventsPruned = "events-pruned"
	pruneBatch          = 5000
	pruneEvery          = time.Minute
)

type prunedMark struct {
	Through int64 `json:"through"`
}

// eventsPrunedThrough returns the highest event sequence the pruner has
// deleted in tx's snapshot (0: none).
func eventsPrunedThrough(tx store.ReadTx) int64 {
	s, err := store.Get[store.Setting](tx, settingEventsPruned)
	if err != nil {
		return 0
	}
	var m prunedMark
	if json.Unmarshal(s.Value, &m) != nil {
		return 0
	}
	return m.Through
}

// errEventsPruned answers a reader that asked for events after a
// sequence the pruner has passed.
func errEventsPruned(after, through int64) error {
	return apiErr(http.StatusGone, api.CodeGone, "after",
		"events up to sequence %d were pruned (asked for those after %d); read the objects again and follow from after=%d", through, after, through)
}

// checkPruned returns errEventsPruned when events after `after` may have
// been pruned. after 0 means "from the oldest kept" and is always served.
func checkPruned(tx store.ReadTx, after int64) error {
	if after == 0 {
		return nil
	}
	if through := eventsPrunedThrough(tx); after < through {
		return errEventsPruned(after, through)
	}
	return nil
}

// pruneLoop prunes every pruneEvery until ctx ends: the events past
// retention (when there is one) and the idempotency keys past their 24
// hours.
func (s *Server) pruneLoop(ctx context.Context) {
	events := s.opts.EventRetention > 0 || s.opts.EventHistory > 0
	t := time.NewTicker(pruneEvery)
	defer t.Stop()
	for {
		if events {
			s.logPruned(ctx, "events", func() (int, error) { return s.PruneEvents(ctx) })
		}
		s.logPruned(ctx, "idempotency keys", func() (int, error) { return s.PruneIdempotencyKeys(ctx, s.now()) })
		if s.opts.UsageRetention > 0 {
			s.logPruned(ctx, "usage records", func() (int, error) { return s.PruneUsage(ctx) })
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// logPruned runs one pruning and logs what it did.
func (s *Server) logPruned(ctx context.Context, what string, prune func() (int, error)) {
	if n, err := prune(); err != nil && ctx.Err() == nil {
		s.log.Error("pruning "+what, "err", err)
	} else if n > 0 {
		s.log.Info("pruned "+what, "deleted", n)
	}
}

// PruneEvents deletes the events that are past retention now and returns
// how many it deleted.
func (s *Server) PruneEvents(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.pruneBatch(ctx, s.now())
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
}

// pruneBatch deletes at most pruneBatch events past retention in one
// transaction.
func (s *Server) pruneBatch(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := s.st.Update(ctx, func(tx store.WriteTx) error {
		n = 0
		cutoff := now.Add(-s.opts.EventRetention)
		var oldest int64 // the revision window's lower bound
		if s.opts.EventHistory > 0 {
			oldest = tx.Revision() - s.opts.EventHistory
		}
		type doomedEvent struct {
			seq    int64
			tenant string
		}
		var doomed []doomedEvent
		var through int64
		var derr error
		tx.ScanRaw(store.KindEvent, "", "", func(_ string, data []byte) bool {
			var e struct {
				Seq    int64     `json:"seq"`
				Time   time.Time `json:"time"`
				Tenant string    `json:"tenant"`
			}
			if derr = json.Unmarshal(data, &e); derr != nil {
				return false
			}
			old := s.opts.EventRetention > 0 && e.Time.Before(cutoff)
			behind := s.opts.EventHistory > 0 && e.Seq <= oldest
			if !old && !behind {
				return false
			}
			doomed, through = append(doomed, doomedEvent{e.Seq, e.Tenant}), e.Seq
			return len(doomed) < pruneBatch
		})
		if derr != nil || len(doomed) == 0 {
			return derr
		}
		for _, d := range doomed {
			if err := store.DeleteEvent(tx, d.seq, d.tenant); err != nil {
				return err
			}
		}
		mark, err := json.Marshal(prunedMark{Through: through})
		if err != nil {
			return err
		}
		n = len(doomed)
		return store.Put(tx, &store.Setting{Name: settingEventsPruned, Value: mark}, store.Any)
	})
	return n, err
}

// usagePruneBatch bounds the usage records one pruning transaction looks
// at.
const usagePruneBatch = 5000

// PruneUsage deletes the usage records that ended more than
// Options.UsageRetention ago (none when it is 0), in transactions of at
// most usagePruneBatch records looked at, and returns how many it
// deleted.
func (s *Server) PruneUsage(ctx context.Context) (int, error) {
	if s.opts.UsageRetention <= 0 {
		return 0, nil
	}
	cutoff := s.now().Add(-s.opts.UsageRetention)
	total, after := 0, ""
	for {
		var n int
		err := s.st.Update(ctx, func(tx store.WriteTx) error {
			var err error
			n, after, err = store.PruneUsage(tx, cutoff, after, usagePruneBatch)
			return err
		})
		total += n
		if err != nil || after == "" {
			return total, err
		}
	}
}
