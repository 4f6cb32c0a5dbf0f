package server

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/store"
)

// Paging. Every list answer is a page: at most ?limit= items (default
// Limits.PageSize, at most Limits.MaxPageSize), and fewer when their JSON
// reaches Limits.PageBytes (a page holds at least one item). When more
// remain the answer carries "continue", an opaque token; the next page is
// the same request with ?continue=TOKEN (and any ?limit). Items are in key
// order and a page starts after the last key of the one before, so
// objects created or deleted meanwhile are seen at most once, as in a
// Kubernetes list.
//
// A token is the last key and a hash of the list it belongs to (the
// caller, the path and its filters), signed with a key derived from the admin token: a
// token that was altered, or that belongs to another list, is refused
// with 400 naming "continue". Tokens stay valid across restarts with the
// same admin token.
//
// A handler makes a page with newPage, offers items in key order with add
// (which says when the page is full), and answers with write:
//
//	pg, err := s.newPage(r)
//	for _, x := range sorted {
//		if pg.skip(x.key) { continue }
//		if !pg.add(x.key, out(x)) { break }
//	}
//	pg.write(w)
//
// scanPage does the same over a kind of the store.

// page is one page of a list answer being built.
type page struct {
	s     *Server
	list  string // the list's identity: path and filters
	limit int
	after string // the page starts after this key ("" : at the start)
	items []json.RawMessage
	size  int
	last  string
	more  bool
}

// pagingParams are the query parameters paging reads itself.
var pagingParams = map[string]bool{"limit": true, "continue": true}

// newPage reads ?limit and ?continue.
func (s *Server) newPage(r *http.Request) (*page, error) {
	q := r.URL.Query()
	p := &page{s: s, limit: s.limits.PageSize, list: listIdentity(who(r), r.URL.Path, q)}
	if _, ok := q["limit"]; ok {
		n, err := intParam(q, "limit", 1, int64(s.limits.MaxPageSize))
		if err != nil {
			return nil, err
		}
		p.limit = int(n)
	}
	if tok := q.Get("continue"); tok != "" {
		after, err := s.parseContinue(tok, p.list)
		if err != nil {
			return nil, err
		}
		p.after = after
	} else if _, ok := q["continue"]; ok {
		return nil, apiErr(http.StatusBadRequest, api.CodeInvalid, "continue", "continue is empty: pass the token of the previous page, or leave it out")
	}
	return p, nil
}

// listIdentity names a list: who reads it, its path and its other query
// parameters (a token of one caller's list is refused in another's).
func listIdentity(p principal, path string, q url.Values) string {
	rest := url.Values{}
	for k, v := range q {
		if !pagingParams[k] {
			rest[k] = v
		}
	}
	reader := "admin"
	if !p.admin {
		reader = "tenant:" + p.tenant
	}
	return reader + " " + path + "?" + rest.Encode()
}

// skip reports whether key is at or before the page's start.
func (p *page) skip(key string) bool { return key <= p.after }

// add appends the item with key (keys must come in increasing order) and
// reports whether the page takes more; when it is full the item is left
// for the next page.
func (p *page) add(key string, v any) bool {
	if len(p.items) >= p.limit || (len(p.items) > 0 && p.size >= p.s.limits.PageBytes) {
		p.more = true
		return false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("server: encoding a list item: %v", err)) // API types always encode
	}
	b := bytes.TrimRight(buf.Bytes(), "\n")
	if len(p.items) > 0 && p.size+len(b) > p.s.limits.PageBytes {
		p.more = true
		return false
	}
	p.items = append(p.items, b)
	p.size += len(b)
	p.last = key
	return true
}

// write answers the page.
func (p *page) write(w http.ResponseWriter) {
	out := api.List[json.RawMessage]{Items: p.items}
	if out.Items == nil {
		out.Items = []json.RawMessage{}
	}
	if p.more {
		out.Continue = p.s.continueToken(p.list, p.last)
	}
	writeJSON(w, http.StatusOK, out)
}

// scanPage fills the page from the objects of T's kind under prefix,
// from the page's start, in key order; conv returns an object's answer,
// or false to leave it out (a filter).
func scanPage[T any, PT interface {
	*T
	store.Object
}](tx store.ReadTx, p *page, prefix string, conv func(PT) (any, bool)) error {
	var zero PT
	var err error
	tx.ScanRaw(zero.Kind(), prefix, max(p.after, prefix), func(key string, data []byte) bool {
		if key == prefix {
			return true
		}
		v := PT(new(T))
		if err = json.Unmarshal(data, v); err != nil {
			err = fmt.Errorf("server: decoding %s %q: %w", zero.Kind(), key, err)
			return false
		}
		out, ok := conv(v)
		if !ok {
			return true
		}
		return p.add(key, out)
	})
	return err
}

// continueKey is the key that signs continue tokens: random, made once
// per store and kept in it (settingContinueKey), so that tokens outlive a
// restart and no credential is reused for it.
func (s *Server) continueKey() []byte { return s.pageKey }

// settingContinueKey names the stored key of continue tokens.
const settingContinueKey = "continue-key"

// loadContinueKey reads the continue tokens' key, creating it on first use.
func loadContinueKey(tx store.WriteTx) ([]byte, error) {
	if st, err := store.Get[store.Setting](tx, settingContinueKey); err == nil && len(st.Value) >= 32 {
		return st.Value, nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return key, store.Put(tx, &store.Setting{Name: settingContinueKey, Value: key}, store.Any)
}

type continuePayload struct {
	After string `json:"a"`
	List  string `json:"l"` // hash of the list's identity
}

func listHash(list string) string {
	h := sha256.Sum256([]byte(list))
	return base64.RawURLEncoding.EncodeToString(h[:9])
}

// continueToken signs the key a list's next page starts after.
func (s *Server) continueToken(list, after string) string {
	payload, _ := json.Marshal(continuePayload{After: after, List: listHash(list)})
	m := hmac.New(sha256.New, s.continueKey())
	m.Write(payload)
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:16])
}

// parseContinue checks a token and returns the key it starts after.
func (s *Server) parseContinue(tok, list string) (string, error) {
	bad := func(why string) error {
		return apiErr(http.StatusBadRequest, api.CodeInvalid, "continue", "invalid continue token: %s; start the list again without it", why)
	}
	if len(tok) > 4096 {
		return "", bad("too long")
	}
	enc, sig, ok := strings.Cut(tok, ".")
	if !ok {
		return "", bad("malformed")
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(enc)
	mac, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil {
		return "", bad("malformed")
	}
	m := hmac.New(sha256.New, s.continueKey())
	m.Write(payload)
	if !hmac.Equal(mac, m.Sum(nil)[:16]) {
		return "", bad("not issued by this server, or altered")
	}
	var p continuePayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return "", bad("malformed")
	}
	if p.List != listHash(list) {
		return "", bad("it belongs to another list (other path or filters)")
	}
	return p.After, nil
}

// writeSlice answers a list computed whole (small, derived lists: regions,
// SKUs, usage) as pages, keyed by position.
func writeSlice[T any](s *Server, w http.ResponseWriter, r *http.Request, items []T) error {
	pg, err := s.newPage(r)
	if err != nil {
		return err
	}
	for i, x := range items {
		key := fmt.Sprintf("%08d", i)
		if pg.skip(key) {
			continue
		}
		if !pg.add(key, x) {
			break
		}
	}
	pg.write(w)
	return nil
}
