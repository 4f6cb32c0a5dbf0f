package server

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/fleet"
	"github.com/arbiterhq/arbiter/internal/policy"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/ui"
)

// The dashboard (docs/dashboard.md). /ui serves the single-page app
// embedded in the binary (internal/ui). Signing in posts a token to
// /ui/login from a form; the server answers with a session cookie
// (HttpOnly, SameSite=Strict) naming a session it keeps in memory, which
// holds the token's hash, never the token: each request looks the token
// up again, so a revoked or expired token ends its sessions at once. A
// session authenticates only GET and HEAD requests (the dashboard only
// reads), so a cookie can never make the browser change anything. The
// app reads the ordinary API (scoped as the token is) and three views
// made for it: /v1/ui/fleet, /v1/ui/queue and /v1/ui/series.

const (
	uiCookie      = "arbiter_session"
	uiSessionTTL  = 12 * time.Hour
	maxUISessions = 10_000
	maxLoginBody  = 8 << 10
)

// uiSessions are the dashboard's sign-ins, by the hash of their cookie.
type uiSessions struct {
	mu sync.Mutex
	by map[string]uiSession
}

type uiSession struct {
	tokenHash string
	expires   time.Time
}

// newSession keeps a session for a token's hash and returns its cookie
// value; the oldest sessions go when there are too many.
func (u *uiSessions) newSession(tokenHash string, now time.Time) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	id := base64.RawURLEncoding.EncodeToString(b[:])
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.by == nil {
		u.by = map[string]uiSession{}
	}
	for k, s := range u.by {
		if !now.Before(s.expires) {
			delete(u.by, k)
		}
	}
	for len(u.by) >= maxUISessions {
		var oldest string
		var at time.Time
		for k, s := range u.by {
			if oldest == "" || s.expires.Before(at) {
				oldest, at = k, s.expires
			}
		}
		delete(u.by, oldest)
	}
	u.by[HashToken(id)] = uiSession{tokenHash: tokenHash, expires: now.Add(uiSessionTTL)}
	return id
}

// lookup is the token hash of a live session.
func (u *uiSessions) lookup(cookie string, now time.Time) (string, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	s, ok := u.by[HashToken(cookie)]
	if !ok || !now.Before(s.expires) {
		return "", false
	}
	return s.tokenHash, true
}

func (u *uiSessions) end(cookie string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.by, HashToken(cookie))
}

// sessionHash is the token hash of the request's dashboard session, for
// reads only.
func (s *Server) sessionHash(r *http.Request) (string, bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return "", false
	}
	c, err := r.Cookie(uiCookie)
	if err != nil || c.Value == "" || len(c.Value) > 100 {
		return "", false
	}
	return s.ui.lookup(c.Value, s.now())
}

// uiHeaders keep the dashboard to its own origin: scripts, styles and
// requests from this server only, no framing, no referrer sent elsewhere.
func uiHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
}

// uiRoutes mounts the dashboard's pages and its sign-in.
func (s *Server) uiRoutes(mux *http.ServeMux) {
	assets := http.FileServerFS(ui.Assets())
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	})
	mux.HandleFunc("GET /ui/", func(w http.ResponseWriter, r *http.Request) {
		uiHeaders(w)
		r2 := r.Clone(r.Context())
		r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/ui")
		assets.ServeHTTP(w, r2)
	})
	mux.HandleFunc("GET /ui/session", s.uiSession)
	mux.HandleFunc("POST /ui/login", s.uiLogin)
	mux.HandleFunc("POST /ui/logout", s.uiLogout)
}

// sameOrigin reports whether a form post comes from this server's own
// pages: a browser says so in Sec-Fetch-Site, or sends an Origin with
// the POST.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true // not a browser: a cookie it cannot use elsewhere
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (s *Server) uiLogin(w http.ResponseWriter, r *http.Request) {
	uiHeaders(w)
	src := sourceOf(r)
	fail := func(code string) {
		s.sources.allow(src)
		http.Redirect(w, r, "/ui/#signin="+code, http.StatusSeeOther)
	}
	if s.sources.empty(src) {
		http.Redirect(w, r, "/ui/#signin=limited", http.StatusSeeOther)
		return
	}
	if !sameOrigin(r) {
		http.Error(w, "sign in from the dashboard's own page", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		fail("invalid")
		return
	}
	secret := strings.TrimSpace(r.PostForm.Get("token"))
	if secret == "" || len(secret) > 512 {
		fail("invalid")
		return
	}
	hash := HashToken(secret)
	var p principal
	err := s.st.View(r.Context(), func(tx store.ReadTx) error {
		var err error
		p, err = s.tokens.lookup(tx, hash)
		return err
	})
	switch {
	case errors.Is(err, store.ErrNotFound):
		fail("unknown")
		return
	case err != nil:
		http.Error(w, "the store does not answer", http.StatusServiceUnavailable)
		return
	case !p.expires.IsZero() && !s.now().Before(p.expires):
		fail("expired")
		return
	case p.role != store.RoleAdmin && p.role != store.RoleTenant:
		// Node and metrics tokens have no dashboard.
		fail("role")
		return
	}
	id := s.ui.newSession(hash, s.now())
	http.SetCookie(w, &http.Cookie{Name: uiCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: int(uiSessionTTL / time.Second)})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// uiSession is who the request's session signs in as ({} without one):
// 200 either way, so that a page not signed in logs no failed request.
func (s *Server) uiSession(w http.ResponseWriter, r *http.Request) {
	uiHeaders(w)
	out := api.WhoAmI{}
	if hash, ok := s.sessionHash(r); ok {
		_ = s.st.View(r.Context(), func(tx store.ReadTx) error {
			p, err := s.tokens.lookup(tx, hash)
			if err == nil && (p.expires.IsZero() || s.now().Before(p.expires)) {
				out = api.WhoAmI{Admin: p.admin, Role: p.role, TokenID: p.id, Tenant: p.tenant}
			}
			return nil
		})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) uiLogout(w http.ResponseWriter, r *http.Request) {
	uiHeaders(w)
	if !sameOrigin(r) {
		http.Error(w, "sign out from the dashboard's own page", http.StatusForbidden)
		return
	}
	if c, err := r.Cookie(uiCookie); err == nil {
		s.ui.end(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: uiCookie, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// ---- the dashboard's views ----

// uiFleet is GET /v1/ui/fleet.
func (s *Server) uiFleet(w http.ResponseWriter, r *http.Request) error {
	caller := who(r)
	var out api.UIFleet
	err := s.st.View(r.Context(), func(tx store.ReadTx) error {
		wd, err := loadWorldWith(tx, s.cat.Load(), true, &s.live)
		if err != nil {
			return err
		}
		out = fleetView(wd, caller)
		out.Revision = wd.Revision
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// fleetView draws the world for caller: a tenant sees its own holders
// and reservations by name, everyone else's as anonymous.
func fleetView(wd *world, caller principal) api.UIFleet {
	out := api.UIFleet{Tenants: []string{}, Regions: []api.UIRegion{}}
	tenantIdx := map[string]int{}
	holder := func(t string) int {
		if !caller.admin && t != caller.tenant {
			return -2
		}
		i, ok := tenantIdx[t]
		if !ok {
			i = len(out.Tenants)
			tenantIdx[t] = i
			out.Tenants = append(out.Tenants, t)
		}
		return i
	}
	if !caller.admin {
		holder(caller.tenant)
	}
	type gpuUse struct {
		holder, kind, milli int
	}
	resOf := map[fleet.NodeID]*store.Reservation{}
	for _, rv := range wd.Reservations {
		for _, n := range rv.Nodes {
			resOf[n] = rv
		}
	}
	// Each GPU's holder: the largest share's, with the shares summed.
	byGPU := map[fleet.NodeID]map[int]gpuUse{}
	for _, x := range wd.Workloads {
		if x.Running == nil {
			continue
		}
		for _, rep := range x.Running.Replicas {
			kind := api.UIBorrowed
			switch rv := resOf[rep.Node]; {
			case x.Running.OnReservation:
				kind = api.UIOwnResv
			case rv != nil && rv.Tenant != x.Tenant:
				kind = api.UILentResv
			case x.Running.Within:
				kind = api.UIGuaranteed
			}
			milli := int(rep.Milli)
			if milli <= 0 || milli > int(resource.PerGPU) {
				milli = int(resource.PerGPU)
			}
			u := gpuUse{holder: holder(x.Tenant), kind: kind, milli: milli}
			if u.holder == -2 {
				u.kind = api.UIFree // another tenant's: how it is charged is not the caller's to see
			}
			m := byGPU[rep.Node]
			if m == nil {
				m = map[int]gpuUse{}
				byGPU[rep.Node] = m
			}
			for _, g := range rep.GPUs {
				old, ok := m[g]
				switch {
				case !ok:
					m[g] = u
				case u.milli > old.milli:
					u2 := u
					u2.milli = min(int(resource.PerGPU), u.milli+old.milli)
					m[g] = u2
				default:
					old.milli = min(int(resource.PerGPU), old.milli+u.milli)
					m[g] = old
				}
			}
		}
	}
	var region *api.UIRegion
	var zone *api.UIZone
	var block *api.UIBlock
	nodes := slices.Clone(wd.Nodes)
	sort.SliceStable(nodes, func(i, j int) bool {
		a, b := nodes[i], nodes[j]
		if a.Region != b.Region {
			return a.Region < b.Region
		}
		if a.Zone != b.Zone {
			return a.Zone < b.Zone
		}
		if a.Block != b.Block {
			return a.Block < b.Block
		}
		return a.Seq < b.Seq
	})
	for _, n := range nodes {
		if region == nil || region.Name != n.Region {
			out.Regions = append(out.Regions, api.UIRegion{Name: n.Region})
			region, zone, block = &out.Regions[len(out.Regions)-1], nil, nil
		}
		if zone == nil || zone.Name != n.Zone {
			region.Zones = append(region.Zones, api.UIZone{Name: n.Zone})
			zone, block = &region.Zones[len(region.Zones)-1], nil
		}
		if block == nil || block.Name != string(n.Block) {
			zone.Blocks = append(zone.Blocks, api.UIBlock{Name: string(n.Block)})
			block = &zone.Blocks[len(zone.Blocks)-1]
		}
		gpus, model := 0, ""
		if sku, ok := wd.Catalog.SKU(n.SKU); ok {
			gpus, model = sku.GPUs, string(sku.Model)
		}
		un := api.UINode{ID: string(n.ID), Model: model, State: nodeState(n), Holder: make([]int, gpus), Kind: make([]int, gpus), Milli: make([]int, gpus)}
		if rv := resOf[n.ID]; rv != nil {
			un.Reserved = "other"
			if caller.admin || rv.Tenant == caller.tenant {
				un.Reserved, un.Reservation = "own", rv.Key()
			}
		}
		for g := range gpus {
			un.Holder[g] = -1
			if u, ok := byGPU[n.ID][g]; ok {
				un.Holder[g], un.Kind[g], un.Milli[g] = u.holder, u.kind, u.milli
			}
		}
		block.Nodes = append(block.Nodes, un)
		out.Nodes++
		out.GPUs += gpus
	}
	return out
}

// uiQueue is GET /v1/ui/queue: the caller's pending work, oldest first,
// with the last cycle's reason.
func (s *Server) uiQueue(w http.ResponseWriter, r *http.Request) error {
	caller := who(r)
	idx := s.why.Load()
	show := nameShown(caller)
	out := api.UIQueue{Items: []api.UIPending{}, PlanRevision: idx.Revision}
	err := s.st.View(r.Context(), func(tx store.ReadTx) error {
		wd, err := loadWorldWith(tx, s.cat.Load(), true, &s.live)
		if err != nil {
			return err
		}
		for _, x := range wd.Workloads {
			if x.State != store.StatePending || (!caller.admin && x.Tenant != caller.tenant) {
				continue
			}
			it := api.UIPending{Tenant: x.Tenant, Name: string(x.Spec.Name), Priority: x.Spec.Priority.String(), GPUs: api.GPUs(x.Spec.GPUs),
				Replicas: x.Spec.Replicas, SubmittedAt: x.SubmittedAt}
			if p, ok := idx.Pending(x.Key()); ok {
				it.Code, it.Reason = string(p.Code), pendingReason(p, caller.admin, show)
				if p.Planned != nil {
					it.PlannedStart = p.Planned.Start.UTC().Truncate(time.Second)
				}
			}
			out.Items = append(out.Items, it)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.SliceStable(out.Items, func(i, j int) bool { return out.Items[i].SubmittedAt.Before(out.Items[j].SubmittedAt) })
	writeJSON(w, http.StatusOK, out)
	return nil
}

// history keeps one point a minute of what the dashboard charts, for
// historyLen minutes, sampled at each policy tick (see policyRunner.tick).
type history struct {
	mu     sync.Mutex
	times  []time.Time
	fleet  map[string][]float64 // utilization, busy_utilization, pending_gpus, p95 of each service
	tenant map[string][]float64 // "used/<tenant>", "pending/<tenant>"
}

const historyLen = 6 * 60

// observe records a point at now from the world and the policy windows
// (pr.mu held by the caller).
func (h *history) observe(now time.Time, wd *world, ws *policy.Windows) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fleet == nil {
		h.fleet, h.tenant = map[string][]float64{}, map[string][]float64{}
	}
	minute := now.Truncate(time.Minute)
	if n := len(h.times); n > 0 && !h.times[n-1].Before(minute) {
		// This minute has its point: the latest sample replaces it.
		h.drop()
	}
	h.times = append(h.times, minute)
	n := len(h.times)
	put := func(m map[string][]float64, name string, v float64, ok bool) {
		if !ok {
			v = math.NaN()
		}
		s := m[name]
		for len(s) < n-1 {
			s = append(s, math.NaN())
		}
		m[name] = append(s, v)
	}
	val := func(m policy.Metric, t policy.Target) (float64, bool) {
		return ws.Value(policy.Query{Metric: m, Target: t})
	}
	v, ok := val(policy.MetricUtilization, policy.Cluster)
	put(h.fleet, "utilization", v, ok)
	v, ok = val(policy.MetricBusyUtilization, policy.Cluster)
	put(h.fleet, "busy_utilization", v, ok)
	v, ok = val(policy.MetricPendingGPUs, policy.Cluster)
	put(h.fleet, "pending_gpus", v, ok)
	for _, t := range ws.Targets("latency") {
		if t.Kind == policy.TargetService {
			v, ok := val(policy.MetricP95Latency, t)
			put(h.fleet, "p95_latency/"+t.Name, v, ok)
		}
	}
	used := map[string]float64{}
	for _, x := range wd.Workloads {
		if x.Running != nil {
			for _, rep := range x.Running.Replicas {
				used[x.Tenant] += float64(replicaGPUs(rep.Milli, len(rep.GPUs), x.Spec.GPUs)) / resource.PerGPU
			}
		}
	}
	for _, t := range wd.Tenants {
		put(h.tenant, "used/"+t.Name, used[t.Name], true)
		v, ok := val(policy.MetricPendingGPUs, policy.Target{Kind: policy.TargetTenant, Name: t.Name})
		put(h.tenant, "pending/"+t.Name, v, ok)
	}
	for _, m := range []map[string][]float64{h.fleet, h.tenant} {
		for k, s := range m {
			for len(s) < n {
				s = append(s, math.NaN())
			}
			m[k] = s
		}
	}
	for len(h.times) > historyLen {
		h.times = h.times[1:]
		for _, m := range []map[string][]float64{h.fleet, h.tenant} {
			for k, s := range m {
				m[k] = s[1:]
			}
		}
	}
}

// drop removes the newest point.
func (h *history) drop() {
	n := len(h.times) - 1
	h.times = h.times[:n]
	for _, m := range []map[string][]float64{h.fleet, h.tenant} {
		for k, s := range m {
			if len(s) > n {
				m[k] = s[:n]
			}
		}
	}
}

// view is the caller's series.
func (h *history) view(caller principal) api.UISeries {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := api.UISeries{Times: slices.Clone(h.times), Series: []api.UISerie{}}
	if out.Times == nil {
		out.Times = []time.Time{}
	}
	add := func(name, unit string, s []float64) {
		vals := make([]*float64, len(s))
		for i, v := range s {
			if !math.IsNaN(v) {
				v := v
				vals[i] = &v
			}
		}
		out.Series = append(out.Series, api.UISerie{Name: name, Unit: unit, Values: vals})
	}
	if caller.admin {
		for _, name := range sortedKeys(h.fleet) {
			unit := "GPUs"
			switch {
			case strings.HasSuffix(name, "utilization"):
				unit = "ratio"
			case strings.HasPrefix(name, "p95_latency/"):
				unit = "seconds"
			}
			add(name, unit, h.fleet[name])
		}
		return out
	}
	for _, kind := range []string{"used", "pending"} {
		if s, ok := h.tenant[kind+"/"+caller.tenant]; ok {
			add(kind+"_gpus", "GPUs", s)
		}
	}
	return out
}

func (s *Server) uiSeries(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.hist.view(who(r)))
	return nil
}
