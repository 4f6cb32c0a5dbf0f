package server

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/arbiterhq/arbiter/internal/spot"
	"github.com/arbiterhq/arbiter/internal/store"
)

// The spot markets survive restarts: their state (spot.Saved: each
// market's moving average and utilization, and the time of the last step)
// is the setting settingSpotMarket, written by the scheduling cycle at
// most once per spotSaveEvery when it changed, and at shutdown. A server
// that starts reads it back and its markets step on from there, instead
// of starting again at their target prices.

// settingSpotMarket names the setting that holds the markets' state.
const settingSpotMarket = "spot-market"

const (
	// spotSaveEvery is how often at most a cycle writes the state (the
	// markets step once per spot.Step).
	spotSaveEvery = time.Minute
	// spotSaveTolerance is the change in a price ($/GPU-hour) or a
	// utilization below which the state is not written again: a settled
	// market writes nothing.
	spotSaveTolerance = 1e-9
)

// load reads the saved state, which the markets take up when they are
// built. A state that does not decode is logged and dropped.
func (sm *spotMarket) load(s *Server) func(tx store.ReadTx) error {
	return func(tx store.ReadTx) error {
		st, err := store.Get[store.Setting](tx, settingSpotMarket)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var saved spot.Saved
		if err := json.Unmarshal(st.Value, &saved); err != nil {
			s.log.Warn("stored spot market state unreadable; the markets start at their target prices", "err", err)
			return nil
		}
		sm.mu.Lock()
		defer sm.mu.Unlock()
		sm.restore, sm.written, sm.haveWritten = &saved, saved, true
		return nil
	}
}

// toSave returns the state to write now, if any: the markets have stepped,
// changed since the last write, and (unless force) the last write is
// spotSaveEvery old.
func (sm *spotMarket) toSave(now time.Time, force bool) (spot.Saved, bool) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	if sm.m == nil || (!force && sm.haveWritten && now.Sub(sm.writtenAt) < spotSaveEvery) {
		return spot.Saved{}, false
	}
	st, ok := sm.m.Save()
	if !ok || (sm.haveWritten && !st.Changed(sm.written, spotSaveTolerance)) {
		return spot.Saved{}, false
	}
	return st, true
}

// wrote records that st was written at now.
func (sm *spotMarket) wrote(st spot.Saved, now time.Time) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.written, sm.haveWritten, sm.writtenAt = st, true, now
}

// saveSpot writes the markets' state when it is due (see toSave). A failed
// write is logged; the next cycle tries again.
func (s *Server) saveSpot(ctx context.Context, now time.Time, force bool) {
	st, ok := s.spot.toSave(now, force)
	if !ok {
		return
	}
	data, err := json.Marshal(st)
	if err == nil {
		err = s.st.Update(ctx, func(tx store.WriteTx) error {
			return store.Put(tx, &store.Setting{Name: settingSpotMarket, Value: data}, store.Any)
		})
	}
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("spot: saving the market state", "err", err)
		}
		return
	}
	s.spot.wrote(st, now)
}
