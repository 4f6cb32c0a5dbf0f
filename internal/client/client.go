// Package client is the Go client of Arbiter's REST API, used by the CLI
// and the tests.
//
//	c := client.New("http://127.0.0.1:7070", os.Getenv("ARBITER_TOKEN"))
//	w, err := c.Submit(ctx, "contoso", api.WorkloadSpec{Name: "job1", GPUs: 8, ...})
//	var ae *api.Error
//	if errors.As(err, &ae) && ae.Code == api.CodeNotFound { ... }
//
// Every error answer of the server comes back as an *api.Error with its
// HTTP status; transport problems come back as they are.
package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// Client talks to one control plane (one server, or the replicas of one,
// see failover.go) with one token.
type Client struct {
	servers  []server
	cur      atomic.Int32 // index of the current server
	token    string
	hc       *http.Client
	failover time.Duration
}

// New returns a client of the server at base (e.g. http://127.0.0.1:7070),
// or of several replicas: base may list URLs separated by commas
// (http://a:7070,http://b:7070); the client follows the leader among them.
func New(base, token string) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 256
	hc := &http.Client{Transport: tr, Timeout: 90 * time.Second,
		// Redirects are followed by send, to configured servers only.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Client{servers: parseServers(base), token: token, hc: hc, failover: defaultFailover}
}

// Do sends one request: in (when not nil) as the JSON body, the answer
// decoded into out (when not nil).
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	return c.do(ctx, &request{method: method, path: path}, in, out)
}

// do sends rq with in as its JSON body and decodes the answer into out.
func (c *Client) do(ctx context.Context, rq *request, in, out any) error {
	if rq.header == nil {
		rq.header = http.Header{}
	}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		rq.body = b
		rq.header.Set("Content-Type", "application/json")
	}
	ans, err := c.send(ctx, rq)
	if err != nil {
		return err
	}
	if ans.resp.StatusCode >= 300 { // a redirect send did not follow is an error too
		return apiError(ans.resp.StatusCode, ans.data)
	}
	if out != nil && len(ans.data) > 0 {
		if err := json.Unmarshal(ans.data, out); err != nil {
			return fmt.Errorf("client: decoding the answer of %s %s: %w", rq.method, rq.path, err)
		}
	}
	return nil
}

func esc(s string) string { return url.PathEscape(s) }

func tpath(tenant string, rest ...string) string {
	p := "/v1/tenants/" + esc(tenant)
	for _, r := range rest {
		p += "/" + r
	}
	return p
}

func query(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// WhoAmI says whom the token acts for.
func (c *Client) WhoAmI(ctx context.Context) (api.WhoAmI, error) {
	var out api.WhoAmI
	return out, c.Do(ctx, "GET", "/v1/whoami", nil, &out)
}

// list reads a whole list, following its pages (the server's
// "continue" tokens) to the end.
func list[T any](c *Client, ctx context.Context, path string) ([]T, error) {
	var all []T
	next := ""
	for {
		p := path
		if next != "" {
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			p += sep + "continue=" + url.QueryEscape(next)
		}
		var out api.List[T]
		if err := c.Do(ctx, "GET", p, nil, &out); err != nil {
			return nil, err
		}
		all = append(all, out.Items...)
		switch {
		case out.Continue == "":
			return all, nil
		case out.Continue == next:
			return nil, fmt.Errorf("client: %s answered the same continue token twice", path)
		}
		next = out.Continue
	}
}

// Page reads one page of a list at path: at most limit items (0: the
// server's default) from the continue token cont ("" : the first page).
// Pass the answer's Continue to read the next; "" means it was the last.
func Page[T any](c *Client, ctx context.Context, path string, limit int, cont string) (api.List[T], error) {
	var out api.List[T]
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	if limit > 0 {
		path += sep + "limit=" + strconv.Itoa(limit)
		sep = "&"
	}
	if cont != "" {
		path += sep + "continue=" + url.QueryEscape(cont)
	}
	return out, c.Do(ctx, "GET", path, nil, &out)
}

// Regions lists the fleet's regions.
func (c *Client) Regions(ctx context.Context) ([]api.Region, error) {
	return list[api.Region](c, ctx, "/v1/regions")
}

// SKUs lists the catalog's machine sizes.
func (c *Client) SKUs(ctx context.Context) ([]api.SKU, error) {
	return list[api.SKU](c, ctx, "/v1/skus")
}

// Nodes lists machines (admin), optionally of one region.
func (c *Client) Nodes(ctx context.Context, region string) ([]api.Node, error) {
	return list[api.Node](c, ctx, "/v1/nodes"+query("region", region))
}

// RegisterNode registers a machine (admin).
func (c *Client) RegisterNode(ctx context.Context, n api.NodeRegistration) (api.Node, error) {
	var out api.Node
	return out, c.Do(ctx, "POST", "/v1/nodes", n, &out)
}

// Tenants lists tenants (all for the admin, itself for a tenant).
func (c *Client) Tenants(ctx context.Context) ([]api.Tenant, error) {
	return list[api.Tenant](c, ctx, "/v1/tenants")
}

// Tenant shows one tenant.
func (c *Client) Tenant(ctx context.Context, name string) (api.Tenant, error) {
	var out api.Tenant
	return out, c.Do(ctx, "GET", tpath(name), nil, &out)
}

// CreateTenant creates a tenant (admin).
func (c *Client) CreateTenant(ctx context.Context, t api.Tenant) (api.Tenant, error) {
	var out api.Tenant
	return out, c.Do(ctx, "POST", "/v1/tenants", t, &out)
}

// DeleteTenant deletes a tenant without workloads, reservations or children (admin).
func (c *Client) DeleteTenant(ctx context.Context, name string) error {
	return c.Do(ctx, "DELETE", tpath(name), nil, nil)
}

// SetQuotas replaces a tenant's quotas (admin).
func (c *Client) SetQuotas(ctx context.Context, tenant string, qs []api.Quota) (api.Tenant, error) {
	var out api.Tenant
	return out, c.Do(ctx, "PUT", tpath(tenant, "quotas"), api.QuotaList{Quotas: qs}, &out)
}

// SetAllowedPriorities replaces the priority classes a tenant may use (admin).
func (c *Client) SetAllowedPriorities(ctx context.Context, tenant string, classes []string) (api.Tenant, error) {
	var out api.Tenant
	return out, c.Do(ctx, "PUT", tpath(tenant, "allowed-priorities"), api.AllowedPriorities{AllowedPriorities: classes}, &out)
}

// CreateToken creates a token for a tenant (admin); the secret is only
// returned here.
// Node returns one machine with its allocation and state (admin).
func (c *Client) Node(ctx context.Context, id string) (api.Node, error) {
	var out api.Node
	return out, c.Do(ctx, "GET", "/v1/nodes/"+esc(id), nil, &out)
}

// UpdateNode drains or undrains, cordons or uncordons, or relabels a node
// (admin).
func (c *Client) UpdateNode(ctx context.Context, id string, u api.NodeUpdate) (api.Node, error) {
	var out api.Node
	return out, c.Do(ctx, "PATCH", "/v1/nodes/"+esc(id), u, &out)
}

// DeleteNode removes a node that nothing holds (admin).
func (c *Client) DeleteNode(ctx context.Context, id string) error {
	return c.Do(ctx, "DELETE", "/v1/nodes/"+esc(id), nil, nil)
}

// CreateNodeToken creates the token of one node's agent (admin).
func (c *Client) CreateNodeToken(ctx context.Context, node, name string) (api.Token, error) {
	var out api.Token
	return out, c.Do(ctx, "POST", "/v1/nodes/"+esc(node)+"/tokens", api.TokenRequest{Name: name}, &out)
}

func (c *Client) CreateToken(ctx context.Context, tenant, name string) (api.Token, error) {
	var out api.Token
	return out, c.Do(ctx, "POST", tpath(tenant, "tokens"), api.TokenRequest{Name: name}, &out)
}

// Usage lists each quota family's current value and limit for a tenant
// ("" for every tenant the token sees) in a region ("" for all).
func (c *Client) Usage(ctx context.Context, tenant, region string) ([]api.Usage, error) {
	if tenant == "" {
		return list[api.Usage](c, ctx, "/v1/usage"+query("region", region))
	}
	return list[api.Usage](c, ctx, tpath(tenant, "usage")+query("region", region))
}

// Reservations lists a tenant's reservations.
func (c *Client) Reservations(ctx context.Context, tenant string) ([]api.Reservation, error) {
	return list[api.Reservation](c, ctx, tpath(tenant, "reservations"))
}

// AllReservations lists every reservation the token sees: every tenant's
// for the admin, its own tenant's for a tenant token.
func (c *Client) AllReservations(ctx context.Context) ([]api.Reservation, error) {
	return list[api.Reservation](c, ctx, "/v1/reservations")
}

// ReservationsNamed lists the reservations named name in every tenant
// the token sees (one per tenant at most).
func (c *Client) ReservationsNamed(ctx context.Context, name string) ([]api.Reservation, error) {
	return list[api.Reservation](c, ctx, "/v1/reservations"+query("name", name))
}

// Reservation shows one reservation with its utilization.
func (c *Client) Reservation(ctx context.Context, tenant, name string) (api.Reservation, error) {
	var out api.Reservation
	return out, c.Do(ctx, "GET", tpath(tenant, "reservations", esc(name)), nil, &out)
}

// CreateReservation reserves capacity, all or nothing.
func (c *Client) CreateReservation(ctx context.Context, tenant string, r api.ReservationRequest) (api.Reservation, error) {
	var out api.Reservation
	return out, c.Do(ctx, "POST", tpath(tenant, "reservations"), r, &out)
}

// ResizeReservation changes a reservation's capacity.
func (c *Client) ResizeReservation(ctx context.Context, tenant, name string, capacity int) (api.Reservation, error) {
	var out api.Reservation
	return out, c.Do(ctx, "PATCH", tpath(tenant, "reservations", esc(name)), api.Resize{Capacity: capacity}, &out)
}

// DeleteReservation deletes a reservation no live workload uses.
func (c *Client) DeleteReservation(ctx context.Context, tenant, name string) error {
	return c.Do(ctx, "DELETE", tpath(tenant, "reservations", esc(name)), nil, nil)
}

// Workloads lists a tenant's workloads ("" tenant: every one the token
// sees), optionally in one state.
func (c *Client) Workloads(ctx context.Context, tenant, state string) ([]api.Workload, error) {
	if tenant == "" {
		return list[api.Workload](c, ctx, "/v1/workloads"+query("state", state))
	}
	return list[api.Workload](c, ctx, tpath(tenant, "workloads")+query("state", state))
}

// WorkloadsNamed lists the workloads named name in every tenant the
// token sees (one per tenant at most): how a caller finds which tenant
// holds a workload it knows by name.
func (c *Client) WorkloadsNamed(ctx context.Context, name string) ([]api.Workload, error) {
	return list[api.Workload](c, ctx, "/v1/workloads"+query("name", name))
}

// Workload shows one workload.
func (c *Client) Workload(ctx context.Context, tenant, name string) (api.Workload, error) {
	var out api.Workload
	return out, c.Do(ctx, "GET", tpath(tenant, "workloads", esc(name)), nil, &out)
}

// Submit submits a workload; it is durable when this returns nil. It
// carries a new random Idempotency-Key, the same on every retry, so that
// a submission retried on another server (or after a lost answer) creates
// one workload.
func (c *Client) Submit(ctx context.Context, tenant string, s api.WorkloadSpec) (api.Workload, error) {
	return c.SubmitWithKey(ctx, tenant, NewIdempotencyKey(), s)
}

// SubmitWithKey is Submit with the caller's idempotency key (a caller that
// retries across its own restarts keeps the key); "" sends none.
func (c *Client) SubmitWithKey(ctx context.Context, tenant, key string, s api.WorkloadSpec) (api.Workload, error) {
	var out api.Workload
	rq := &request{method: "POST", path: tpath(tenant, "workloads"), header: http.Header{}}
	if key != "" {
		rq.header.Set(api.HeaderIdempotencyKey, key)
	}
	return out, c.do(ctx, rq, s, &out)
}

// NewIdempotencyKey returns a random 128-bit key in hex.
func NewIdempotencyKey() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// Cancel cancels a workload (a no-op when it already ended).
func (c *Client) Cancel(ctx context.Context, tenant, name string) (api.Workload, error) {
	var out api.Workload
	// Cancelling twice is a no-op on the server: the call may be re-sent.
	return out, c.do(ctx, &request{method: "POST", path: tpath(tenant, "workloads", esc(name), "cancel"), repeatable: true}, nil, &out)
}

// Why says why a workload is where it is.
func (c *Client) Why(ctx context.Context, tenant, name string) (api.Why, error) {
	var out api.Why
	return out, c.Do(ctx, "GET", tpath(tenant, "workloads", esc(name), "why"), nil, &out)
}

// ApplyPolicy applies (creates or replaces) a policy (admin).
func (c *Client) ApplyPolicy(ctx context.Context, p api.PolicyApply) (api.Policy, error) {
	var out api.Policy
	return out, c.Do(ctx, "POST", "/v1/policies", p, &out)
}

// Policies lists applied policies (admin).
func (c *Client) Policies(ctx context.Context) ([]api.Policy, error) {
	return list[api.Policy](c, ctx, "/v1/policies")
}

// DeletePolicy removes a policy (admin).
func (c *Client) DeletePolicy(ctx context.Context, name string) error {
	return c.Do(ctx, "DELETE", "/v1/policies/"+esc(name), nil, nil)
}

// Firings lists a policy's firings (admin).
func (c *Client) Firings(ctx context.Context, name string) ([]api.Firing, error) {
	return list[api.Firing](c, ctx, "/v1/policies/"+esc(name)+"/firings")
}

// Events returns the events after seq, waiting up to wait for the first.
func (c *Client) Events(ctx context.Context, after int64, wait time.Duration, limit int) (api.Events, error) {
	return c.TenantEvents(ctx, "", after, wait, limit)
}

// TenantEvents is Events of one tenant ("": every event the token sees).
// A tenant token may name only its own tenant.
func (c *Client) TenantEvents(ctx context.Context, tenant string, after int64, wait time.Duration, limit int) (api.Events, error) {
	var out api.Events
	q := query("after", strconv.FormatInt(after, 10), "wait", durStr(wait), "limit", intStr(limit), "tenant", tenant)
	return out, c.Do(ctx, "GET", "/v1/events"+q, nil, &out)
}

func durStr(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return d.String()
}

func intStr(n int) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(n)
}
