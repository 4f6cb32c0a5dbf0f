package server

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/sched"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/tenancy"
)

// Fair share over time (options.fair_share): the decayed usage of every
// quota entry (tenancy.History) is the core's input and output. The
// leader keeps it in memory from cycle to cycle and writes it to the
// setting settingFairShare at most once per fairSaveEvery, and at
// shutdown. A leader that starts (after a restart or a failover) reads it
// back; its first cycle integrates the usage of the time since the last
// write (tenancy.Decay), so a crash loses no usage, only its precise
// timing over that interval.

// settingFairShare names the setting that holds the decayed usage.
const settingFairShare = "fair-share"

// fairSaveEvery is how often at most a cycle writes the history: each
// write is a store write that ends the quiet cycles (settled).
const fairSaveEvery = time.Minute

// fairState is the leader's copy of the history.
type fairState struct {
	mu        sync.Mutex
	h         *tenancy.History
	writtenAt time.Time // when h was last written (the server's clock)
	dirty     bool
}

// current returns the history the next cycle starts from.
func (f *fairState) current() *tenancy.History {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.h
}

// set records a cycle's history.
func (f *fairState) set(h *tenancy.History) {
	if h == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.h, f.dirty = h, true
}

// readFairShare reads the stored history; nil when there is none or it
// does not decode.
func readFairShare(tx store.ReadTx) (*tenancy.History, error) {
	st, err := store.Get[store.Setting](tx, settingFairShare)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var h tenancy.History
	if err := json.Unmarshal(st.Value, &h); err != nil {
		return nil, nil
	}
	return &h, nil
}

// loadFairShare takes up the stored history when it is newer than the
// replica's own: at start, and again when a replica becomes the leader
// (another leader may have written since).
func (s *Server) loadFairShare(ctx context.Context) {
	if s.opts.Scheduling.FairShare.HalfLife <= 0 {
		return
	}
	var h *tenancy.History
	err := s.st.View(ctx, func(tx store.ReadTx) error {
		var err error
		h, err = readFairShare(tx)
		return err
	})
	if err != nil {
		s.log.Warn("fair share: reading the usage history; starting from none", "err", err)
		return
	}
	s.fair.mu.Lock()
	defer s.fair.mu.Unlock()
	// The newer of the two: a replica that leads again keeps what it
	// computed since its last write unless another leader wrote later.
	if h != nil && (s.fair.h == nil || h.At.After(s.fair.h.At)) {
		s.fair.h, s.fair.dirty = h, false
	}
}

// saveFairShare writes the history when it changed and (unless force) the
// last write is fairSaveEvery old at now. A failed write is logged; the
// next cycle tries again.
func (s *Server) saveFairShare(ctx context.Context, now time.Time, force bool) {
	s.fair.mu.Lock()
	h, due := s.fair.h, s.fair.dirty && (force || now.Sub(s.fair.writtenAt) >= fairSaveEvery)
	s.fair.mu.Unlock()
	if h == nil || !due {
		return
	}
	data, err := json.Marshal(h)
	if err == nil {
		err = s.st.Update(ctx, func(tx store.WriteTx) error {
			return store.Put(tx, &store.Setting{Name: settingFairShare, Value: data}, store.Any)
		})
	}
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("fair share: saving the usage history", "err", err)
		}
		return
	}
	s.fair.mu.Lock()
	if s.fair.h == h {
		s.fair.dirty = false
	}
	s.fair.writtenAt = now
	s.fair.mu.Unlock()
}

// fairShareOut is tenant name's fair-share state for `tenant show`: the
// newer of this replica's history and the stored one (on a follower at
// most fairSaveEvery old); nil when fair share over time is off.
func (s *Server) fairShareOut(tx store.ReadTx, name string) (*api.FairShare, error) {
	hl := s.opts.Scheduling.FairShare.HalfLife
	if hl <= 0 {
		return nil, nil
	}
	// The newer of the replica's own copy and the stored one: a replica
	// that led before may hold an older copy than the leader wrote since.
	h := s.fair.current()
	stored, err := readFairShare(tx)
	if err != nil {
		return nil, err
	}
	if stored != nil && (h == nil || stored.At.After(h.At)) {
		h = stored
	}
	ts, err := store.List[store.Tenant](tx, "")
	if err != nil {
		return nil, err
	}
	tree, err := buildTree(ts)
	if err != nil {
		return nil, err
	}
	i, ok := tree.Lookup(name)
	if !ok {
		return nil, nil
	}
	out := &api.FairShare{HalfLife: sched.ShortDuration(hl), Entries: []api.FairShareEntry{}}
	at := time.Time{}
	if h != nil {
		at = h.At
		out.AsOf = h.At
	}
	dec, _ := tree.Decay(h, tenancy.NewLedger(tree), at, hl) // as of h.At: nothing added
	for _, f := range tree.FairShares(i, dec) {
		out.Entries = append(out.Entries, api.FairShareEntry{
			Flavor: string(f.Key.Model), Region: f.Key.Region, Share: f.Share,
			DecayedGPUHours: f.GPUHours, Usage: f.Usage, Factor: f.Factor,
		})
	}
	return out, nil
}
