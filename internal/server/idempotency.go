package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/store"
)

// Idempotent submissions (see api.HeaderIdempotencyKey). The key is
// recorded with the workload in the submission's transaction, scoped to
// the tenant of the path: another tenant's identical key is another key,
// and its answers say nothing of the first tenant's. Keys are kept
// idempotencyTTL, then pruned (pruneLoop); a tenant holds at most
// maxIdempotencyKeys of them, the oldest forgotten first.

const (
	idempotencyTTL = 24 * time.Hour
	// fieldIdempotencyKey is the Field of every error about the key.
	fieldIdempotencyKey = api.HeaderIdempotencyKey
)

// maxIdempotencyKeys bounds the keys a tenant holds at once (a variable
// for the tests): about 8 MB of store per tenant at most.
var maxIdempotencyKeys = 20000

// parseIdempotencyKey reads the request's Idempotency-Key: "" when there
// is none; a 400 naming the header when it is repeated, empty, longer
// than api.MaxIdempotencyKey or has a character outside
// [A-Za-z0-9._:~-]. A value quoted as a structured-field string
// ("...") is taken without its quotes.
func parseIdempotencyKey(h http.Header) (string, error) {
	vals := h.Values(api.HeaderIdempotencyKey)
	if len(vals) == 0 {
		return "", nil
	}
	if len(vals) > 1 {
		return "", apiErr(http.StatusBadRequest, api.CodeInvalid, fieldIdempotencyKey, "send one Idempotency-Key header, not %d", len(vals))
	}
	v := strings.TrimSpace(vals[0])
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	switch {
	case v == "":
		return "", apiErr(http.StatusBadRequest, api.CodeInvalid, fieldIdempotencyKey, "the Idempotency-Key header is empty; send a random value (e.g. 32 hex digits) or none")
	case len(v) > api.MaxIdempotencyKey:
		return "", apiErr(http.StatusBadRequest, api.CodeInvalid, fieldIdempotencyKey, "the Idempotency-Key is %d bytes long; at most %d", len(v), api.MaxIdempotencyKey)
	}
	for i := 0; i < len(v); i++ {
		if !keyChar(v[i]) {
			return "", apiErr(http.StatusBadRequest, api.CodeInvalid, fieldIdempotencyKey, "the Idempotency-Key has the character %q at byte %d; use letters, digits and . _ : ~ -", v[i], i)
		}
	}
	return v, nil
}

func keyChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("._:~-", c) >= 0
}

// submitFingerprint identifies a submission's body: a hash of the decoded
// spec encoded again, so that spacing and field order do not matter.
func submitFingerprint(req *api.WorkloadSpec) (string, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// idemClaim is one submission's key.
type idemClaim struct {
	tenant, key, fingerprint string
}

// replayOf returns the workload an earlier submission with c's key
// created, nil when the key is free (never used, expired, or left by a
// deleted tenant of the same name). The key used with another body is a
// 422; a key whose workload is gone a 409.
func (c *idemClaim) replayOf(tx store.ReadTx, now time.Time) (*store.Workload, error) {
	rec, live, err := c.record(tx, now)
	if err != nil || !live {
		return nil, err
	}
	if rec.Fingerprint != c.fingerprint {
		return nil, apiErr(http.StatusUnprocessableEntity, api.CodeIdempotencyMismatch, fieldIdempotencyKey,
			"this Idempotency-Key was used by another submission (workload %q) with a different body; use a new key for a new submission", rec.Workload)
	}
	x, err := store.Get[store.Workload](tx, store.WorkloadKey(c.tenant, rec.Workload))
	if err != nil || x.Meta.Created != rec.WorkloadCreated {
		return nil, apiErr(http.StatusConflict, api.CodeConflict, fieldIdempotencyKey,
			"the workload %q this Idempotency-Key created no longer exists; use a new key", rec.Workload)
	}
	return x, nil
}

// record returns the tenant's record of the key and whether it still
// holds (it is not past idempotencyTTL and its tenant is the one now
// under that name).
func (c *idemClaim) record(tx store.ReadTx, now time.Time) (*store.IdempotencyRecord, bool, error) {
	rec, err := store.GetIdempotency(tx, c.tenant, c.key)
	if err != nil || rec == nil {
		return rec, false, err
	}
	if now.Sub(rec.At) >= idempotencyTTL {
		return rec, false, nil
	}
	t, err := store.Get[store.Tenant](tx, c.tenant)
	if err != nil {
		return rec, false, nil
	}
	return rec, t.Meta.Created == rec.TenantCreated, nil
}

// keep records c's key for the workload x just written in tx, replacing
// a record that no longer holds; at the tenant's bound the tenant's
// oldest key is deleted.
func (c *idemClaim) keep(tx store.WriteTx, x *store.Workload, now time.Time) error {
	old, _, err := c.record(tx, now)
	if err != nil {
		return err
	}
	if old != nil { // replayOf ran first: this one no longer holds
		if err := store.DeleteIdempotency(tx, old); err != nil {
			return err
		}
	}
	// At the bound the oldest key is forgotten: retries come within
	// seconds, and a tenant's submissions are never refused for it.
	for n := store.IdempotencyKeys(tx, c.tenant); n >= int64(maxIdempotencyKeys); n-- {
		if err := store.EvictOldestIdempotency(tx, c.tenant); err != nil {
			return err
		}
	}
	t, err := store.Get[store.Tenant](tx, c.tenant)
	if err != nil {
		return notFound("tenant", c.tenant)
	}
	return store.PutIdempotency(tx, &store.IdempotencyRecord{Tenant: c.tenant, Key: c.key, Fingerprint: c.fingerprint,
		Workload: string(x.Spec.Name), WorkloadCreated: x.Meta.Created, TenantCreated: t.Meta.Created, At: now.UTC()})
}

// writeReplay answers a replayed submission as the first was answered.
func writeReplay(w http.ResponseWriter, x *store.Workload) {
	w.Header().Set(api.HeaderIdempotentReplayed, "true")
	writeJSON(w, http.StatusCreated, workloadOut(x))
}

// PruneIdempotencyKeys deletes the keys older than idempotencyTTL at now,
// in transactions of at most pruneBatch, and returns how many it deleted.
func (s *Server) PruneIdempotencyKeys(ctx context.Context, now time.Time) (int, error) {
	cutoff := now.Add(-idempotencyTTL)
	var due bool
	if err := s.st.View(ctx, func(tx store.ReadTx) error { due = store.IdempotencyExpired(tx, cutoff); return nil }); err != nil || !due {
		return 0, err
	}
	total := 0
	for {
		var n int
		err := s.st.Update(ctx, func(tx store.WriteTx) error {
			var err error
			n, err = store.PruneIdempotency(tx, cutoff, pruneBatch)
			return err
		})
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
}
