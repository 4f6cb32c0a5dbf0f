package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/store"
)

// Tokens (issue 12). Every token has a public ID, a name, a role (admin,
// tenant T, node N, metrics), a creation time, an optional expiry and a
// last-use time; only the SHA-256 of its secret is stored, as the key, so
// authenticating a request stays one Get (cached by the tokens' kind
// revision, see tokenCache). Revoking or rotating a token is one commit,
// and the next request reads the new revision: the old secret is refused
// at once.
//
// The admin token file's secret is the bootstrap admin token, with the
// fixed ID "admin": a restart with the same secret changes nothing, one
// with a new secret replaces that token only. Every other token — node,
// tenant, other admin and metrics tokens — survives restarts.

// bootstrapAdminID is the ID of the admin token file's token.
const bootstrapAdminID = "admin"

// lastUseFlush is how often last-use times go from memory to the store.
const lastUseFlush = time.Minute

// newTokenID returns a fresh public token ID.
func newTokenID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return "tok_" + hex.EncodeToString(b[:])
}

// principalOf is who a stored token acts for.
func principalOf(tok *store.Token) principal {
	role := tok.RoleOf()
	return principal{admin: role == store.RoleAdmin, role: role, id: tok.ID, tenant: tok.Tenant, node: tok.Node, hash: tok.Hash, expires: tok.ExpiresAt}
}

// tokenOut is the API form of a stored token (never its hash).
func tokenOut(t *store.Token) api.Token {
	return api.Token{ID: t.ID, Name: t.Name, Role: t.RoleOf(), Tenant: t.Tenant, Node: t.Node, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt, LastUsedAt: t.LastUsedAt}
}

// setAdminToken makes secret the bootstrap admin token and gives tokens
// stored before IDs existed an ID and a role. Only the bootstrap admin
// token is ever replaced; node, tenant and other tokens are kept.
func setAdminToken(tx store.WriteTx, secret string, now time.Time) error {
	hash := HashToken(secret)
	toks, err := store.List[store.Token](tx, "")
	if err != nil {
		return err
	}
	var boot *store.Token
	for _, t := range toks {
		if t.ID == "" {
			// Before IDs, the only token without tenant and node was the
			// admin token file's.
			t.Role = t.RoleOf()
			t.ID = newTokenID()
			if t.Role == store.RoleAdmin {
				t.ID = bootstrapAdminID
			}
			if err := store.Put(tx, t, t.Meta.Revision); err != nil {
				return err
			}
		}
		if t.ID == bootstrapAdminID {
			boot = t
		}
	}
	if boot != nil && boot.Hash == hash {
		return nil
	}
	if other, err := store.Get[store.Token](tx, hash); err == nil {
		return fmt.Errorf("server: the admin token is already the secret of token %s (%s); choose another", other.ID, other.RoleOf())
	}
	if boot != nil {
		if err := store.Delete(tx, store.KindToken, boot.Hash); err != nil {
			return err
		}
	}
	return store.Put(tx, &store.Token{Hash: hash, ID: bootstrapAdminID, Role: store.RoleAdmin, Name: "admin", CreatedAt: now}, store.MustNotExist)
}

// revokeTokensOf deletes every token of a tenant (tenant != "") or of a
// node (node != ""), in the transaction that deletes it.
func revokeTokensOf(tx store.WriteTx, tenant, node string) error {
	toks, err := store.List[store.Token](tx, "")
	if err != nil {
		return err
	}
	for _, t := range toks {
		if (tenant != "" && t.Tenant == tenant) || (node != "" && t.Node == node) {
			if err := store.Delete(tx, store.KindToken, t.Hash); err != nil {
				return err
			}
		}
	}
	return nil
}

// tokenByID finds a token the caller may manage: any for the admin, its
// own tenant's for a tenant token. Others answer 404, as missing ones.
func tokenByID(tx store.ReadTx, p principal, id string) (*store.Token, error) {
	toks, err := store.List[store.Token](tx, "")
	if err != nil {
		return nil, err
	}
	for _, t := range toks {
		if t.ID == id && canManage(p, t) {
			return t, nil
		}
	}
	return nil, notFound("token", id)
}

// canManage: the admin manages every token, a tenant token its own
// tenant's tenant tokens; node and metrics tokens manage none.
func canManage(p principal, t *store.Token) bool {
	switch p.role {
	case store.RoleAdmin:
		return true
	case store.RoleTenant:
		return t.RoleOf() == store.RoleTenant && t.Tenant == p.tenant
	}
	return false
}

// requireManager lets the admin and tenant tokens through.
func requireManager(r *http.Request) error {
	if p := who(r); p.role != store.RoleAdmin && p.role != store.RoleTenant {
		return apiErr(http.StatusForbidden, api.CodeForbidden, "", "this token may not manage tokens")
	}
	return nil
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) error {
	if err := requireManager(r); err != nil {
		return err
	}
	p := who(r)
	var toks []*store.Token
	err := s.st.View(r.Context(), func(tx store.ReadTx) error {
		var err error
		toks, err = store.List[store.Token](tx, "")
		return err
	})
	if err != nil {
		return err
	}
	out := api.List[api.Token]{Items: []api.Token{}}
	for _, t := range toks {
		if !canManage(p, t) {
			continue
		}
		if u := s.tokens.lastUsed(t.Hash); u.After(t.LastUsedAt) {
			t.LastUsedAt = u
		}
		out.Items = append(out.Items, tokenOut(t))
	}
	// Pages in creation order, keyed by (creation time, ID): stable while
	// tokens come and go, and the continue token carries no hash.
	key := func(t api.Token) string { return fmt.Sprintf("%020d/%s", t.CreatedAt.UnixNano(), t.ID) }
	sort.Slice(out.Items, func(i, j int) bool { return key(out.Items[i]) < key(out.Items[j]) })
	pg, err := s.newPage(r)
	if err != nil {
		return err
	}
	for _, t := range out.Items {
		if pg.skip(key(t)) {
			continue
		}
		if !pg.add(key(t), t) {
			break
		}
	}
	pg.write(w)
	return nil
}

// expiry resolves expires_in / expires_at (at most one; none: never).
func expiry(now time.Time, in api.Duration, at time.Time) (time.Time, error) {
	switch {
	case in != 0 && !at.IsZero():
		return time.Time{}, apiErr(http.StatusBadRequest, api.CodeInvalid, "expires_at", "send expires_in or expires_at, not both")
	case in < 0:
		return time.Time{}, apiErr(http.StatusBadRequest, api.CodeInvalid, "expires_in", "expires_in must be positive")
	case in > 0:
		return now.Add(time.Duration(in)), nil
	case !at.IsZero() && !at.After(now):
		return time.Time{}, apiErr(http.StatusBadRequest, api.CodeInvalid, "expires_at", "expires_at %s is not in the future", at.Format(time.RFC3339))
	}
	return at, nil
}

// createTokenOfRole is POST /v1/tokens. The admin creates any role; a
// tenant token creates tenant tokens of its own tenant only, expiring no
// later than itself (least privilege: it can hand out no more than it
// has, for no longer).
func (s *Server) createTokenOfRole(w http.ResponseWriter, r *http.Request) error {
	if err := requireManager(r); err != nil {
		return err
	}
	p := who(r)
	var req api.TokenCreate
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	tok := store.Token{Role: req.Role}
	var check func(store.ReadTx) error
	switch req.Role {
	case store.RoleTenant:
		if req.Node != "" {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, "node", "a tenant token has no node")
		}
		if req.Tenant == "" && !p.admin {
			req.Tenant = p.tenant
		}
		if req.Tenant == "" {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, "tenant", "a tenant token needs its tenant")
		}
		if !p.admin && req.Tenant != p.tenant {
			return notFound("tenant", req.Tenant)
		}
		tok.Tenant = req.Tenant
		check = func(tx store.ReadTx) error { return tenantExists(tx, req.Tenant) }
	case store.RoleNode:
		if req.Tenant != "" {
			return apiErr(http.StatusBadRequest, api.CodeInvalid, "tenant", "a node token has no tenant")
		}
		if !validName(req.Node) {
			return badName("node", req.Node)
		}
		tok.Node = req.Node
	case store.RoleAdmin, store.RoleMetrics:
		if req.Tenant != "" || req.Node != "" {
			field := "tenant"
			if req.Node != "" {
				field = "node"
			}
			return apiErr(http.StatusBadRequest, api.CodeInvalid, field, "an %s token has no tenant or node", req.Role)
		}
	default:
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "role", "unknown role %q: use admin, tenant, node or metrics", req.Role)
	}
	if !p.admin && req.Role != store.RoleTenant {
		return apiErr(http.StatusForbidden, api.CodeForbidden, "role", "a tenant token may only create tenant tokens of its own tenant")
	}
	if req.Name == "" {
		req.Name = req.Role
	}
	return s.mintToken(w, r, tok, req.Name, req.ExpiresIn, req.ExpiresAt, check)
}

// issueToken is the tenant and node token routes (admin): tok's tenant
// or node comes from the path, its name from the request (default name
// otherwise), and check runs in the writing transaction.
func (s *Server) issueToken(w http.ResponseWriter, r *http.Request, tok store.Token, name string, check func(store.ReadTx) error) error {
	var req api.TokenRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		req.Name = name
	}
	tok.Role = tok.RoleOf()
	return s.mintToken(w, r, tok, req.Name, req.ExpiresIn, req.ExpiresAt, check)
}

// mintToken stores tok with a fresh secret and ID after check passes in
// the same transaction; the secret is answered once, only its hash kept.
// A token created by an expiring token expires no later than it.
func (s *Server) mintToken(w http.ResponseWriter, r *http.Request, tok store.Token, name string, in api.Duration, at time.Time, check func(store.ReadTx) error) error {
	if !validName(name) {
		return badName("name", name)
	}
	now := s.now()
	exp, err := expiry(now, in, at)
	if err != nil {
		return err
	}
	if p := who(r); !p.expires.IsZero() && (exp.IsZero() || exp.After(p.expires)) {
		exp = p.expires
	}
	secret := NewSecret()
	tok.Hash, tok.ID, tok.Name, tok.CreatedAt, tok.ExpiresAt = HashToken(secret), newTokenID(), name, now, exp
	err = s.st.Update(r.Context(), func(tx store.WriteTx) error {
		if check != nil {
			if err := check(tx); err != nil {
				return err
			}
		}
		return store.Put(tx, &tok, store.MustNotExist)
	})
	if err != nil {
		return err
	}
	out := tokenOut(&tok)
	out.Secret = secret
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// errBootstrap: the admin token file's token is changed through the file.
var errBootstrap = apiErr(http.StatusConflict, api.CodeConflict, "id", "token %q is the admin token file's: change the file and restart the server to replace it", bootstrapAdminID)

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) error {
	if err := requireManager(r); err != nil {
		return err
	}
	id := r.PathValue("id")
	err := s.st.Update(r.Context(), func(tx store.WriteTx) error {
		t, err := tokenByID(tx, who(r), id)
		if err != nil {
			return err
		}
		if t.ID == bootstrapAdminID {
			return errBootstrap
		}
		return store.Delete(tx, store.KindToken, t.Hash)
	})
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) rotateToken(w http.ResponseWriter, r *http.Request) error {
	if err := requireManager(r); err != nil {
		return err
	}
	id := r.PathValue("id")
	secret := NewSecret()
	var out api.Token
	err := s.st.Update(r.Context(), func(tx store.WriteTx) error {
		t, err := tokenByID(tx, who(r), id)
		if err != nil {
			return err
		}
		if t.ID == bootstrapAdminID {
			return errBootstrap
		}
		if err := store.Delete(tx, store.KindToken, t.Hash); err != nil {
			return err
		}
		n := *t
		n.Meta, n.Hash, n.LastUsedAt = store.Meta{}, HashToken(secret), time.Time{}
		if err := store.Put(tx, &n, store.MustNotExist); err != nil {
			return err
		}
		out = tokenOut(&n)
		return nil
	})
	if err != nil {
		return err
	}
	out.Secret = secret
	writeJSON(w, http.StatusOK, out)
	return nil
}

// lastUse keeps when each token last authenticated a request, in memory:
// writing on every request would turn every read into a commit. The
// times go to the store at most once a lastUseFlush (flushLastUse), and
// a token list merges in what is not flushed yet.
type lastUse struct {
	mu sync.Mutex
	at map[string]time.Time // token hash -> last use
}

// touch records a use; the map holds only valid tokens' hashes.
func (c *tokenCache) touch(hash string, now time.Time) {
	c.use.mu.Lock()
	defer c.use.mu.Unlock()
	if c.use.at == nil {
		c.use.at = map[string]time.Time{}
	}
	if now.After(c.use.at[hash]) {
		c.use.at[hash] = now
	}
}

func (c *tokenCache) lastUsed(hash string) time.Time {
	c.use.mu.Lock()
	defer c.use.mu.Unlock()
	return c.use.at[hash]
}

// flushLastUse writes the recorded last-use times of tokens that still
// exist in one commit; on failure they are kept for the next flush.
func (s *Server) flushLastUse(ctx context.Context) error {
	c := &s.tokens
	c.use.mu.Lock()
	pending := c.use.at
	c.use.at = nil
	c.use.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	err := s.st.Update(ctx, func(tx store.WriteTx) error {
		for hash, at := range pending {
			t, err := store.Get[store.Token](tx, hash)
			if errors.Is(err, store.ErrNotFound) {
				continue // revoked meanwhile
			}
			if err != nil {
				return err
			}
			if !at.After(t.LastUsedAt) {
				continue
			}
			t.LastUsedAt = at
			if err := store.Put(tx, t, t.Meta.Revision); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		for hash, at := range pending {
			c.touch(hash, at)
		}
	}
	return err
}

// lastUseLoop flushes last-use times every lastUseFlush, and once more
// when ctx ends.
func (s *Server) lastUseLoop(ctx context.Context) {
	t := time.NewTicker(lastUseFlush)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := s.flushLastUse(fctx); err != nil {
				s.log.Warn("flushing token last-use times", "err", err)
			}
			cancel()
			return
		case <-t.C:
			if err := s.flushLastUse(ctx); err != nil {
				s.log.Warn("flushing token last-use times", "err", err)
			}
		}
	}
}
