package server

import (
	"net/http"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/meter"
	"github.com/arbiterhq/arbiter/internal/store"
)

// The route table: every API route is one entry carrying its pattern,
// who may call it, its OpenAPI description and its handler. The router
// (route, http.go) enforces the access rule before the handler runs;
// handlers may check more (which node a registration names, which
// tenant's token a tenant token revokes), never less. The OpenAPI
// document (openapi.go) and the strict query parsing (query.go) read
// the same entries, so the document, the access rules and the server
// cannot disagree.

// access is who may call a route.
type access int

const (
	// adminOnly: the admin (403 for everyone else).
	adminOnly access = iota + 1
	// tenantScoped: the admin and tenant tokens. A {tenant} in the path
	// must be the token's own: another tenant's name answers 404, exactly
	// as a tenant that does not exist. Routes without {tenant} show a
	// tenant token its own objects only (the handler filters).
	tenantScoped
	// nodeSelf: the admin and node tokens. An {id} in the path must be
	// the token's node (403 otherwise).
	nodeSelf
	// catalogRead: the admin, tenant and node tokens (the catalog an
	// agent reads to register its machine).
	catalogRead
	// anyAuthenticated: every valid token, metrics tokens included.
	anyAuthenticated
	// metricsScrape: the admin and metrics tokens (GET /metrics).
	metricsScrape
)

// String names the rule as the OpenAPI document shows it.
func (a access) String() string {
	switch a {
	case adminOnly:
		return "admin"
	case tenantScoped:
		return "tenant-scoped"
	case nodeSelf:
		return "node-self"
	case catalogRead:
		return "catalog-read"
	case anyAuthenticated:
		return "any-authenticated"
	case metricsScrape:
		return "metrics"
	}
	return "unknown"
}

// description is the rule in words, for the OpenAPI document.
func (a access) description() string {
	switch a {
	case adminOnly:
		return "Needs the admin token (403 otherwise)."
	case tenantScoped:
		return "The admin token or a tenant token; a tenant token sees its own tenant only (another tenant answers 404)."
	case nodeSelf:
		return "The admin token or the node's own node token (403 otherwise)."
	case catalogRead:
		return "The admin token, a tenant token or a node token."
	case anyAuthenticated:
		return "Any valid token."
	case metricsScrape:
		return "The admin token or a metrics token."
	}
	return ""
}

// admits reports whether principal p's role may call a route of rule a at
// all (before the path is looked at).
func (a access) admits(p principal) bool {
	if p.admin {
		return true
	}
	switch a {
	case tenantScoped:
		return p.role == store.RoleTenant
	case nodeSelf:
		return p.role == store.RoleNode
	case catalogRead:
		return p.role == store.RoleTenant || p.role == store.RoleNode
	case anyAuthenticated:
		return true
	case metricsScrape:
		return p.role == store.RoleMetrics
	}
	return false
}

// authorize enforces rule a for p on request r: the role first, then the
// path's {tenant} or {id}. Its errors are the API's answers.
func (a access) authorize(p principal, r *http.Request) error {
	if !a.admits(p) {
		switch p.role {
		case store.RoleNode:
			return apiErr(http.StatusForbidden, api.CodeForbidden, "", "a node token may only register and heartbeat its node")
		case store.RoleMetrics:
			return apiErr(http.StatusForbidden, api.CodeForbidden, "", "a metrics token may only scrape /metrics")
		}
		switch a {
		case nodeSelf:
			return apiErr(http.StatusForbidden, api.CodeForbidden, "", "this needs the admin token or the node's token")
		case metricsScrape:
			return apiErr(http.StatusForbidden, api.CodeForbidden, "", "this needs the admin token or a %s token", store.RoleMetrics)
		}
		return errForbidden
	}
	if p.admin {
		return nil
	}
	switch a {
	case tenantScoped:
		if t := r.PathValue("tenant"); t != "" && t != p.tenant {
			return notFound("tenant", t)
		}
	case nodeSelf:
		if id := r.PathValue("id"); id != "" && id != p.node {
			return apiErr(http.StatusForbidden, api.CodeForbidden, "", "this token may not act for node %q", id)
		}
	}
	return nil
}

// apiRoute is one entry of the route table.
type apiRoute struct {
	pattern string
	auth    access
	doc     routeDoc
	h       handlerFunc
}

// apiRoutes is the route table of the API (everything under /v1 but
// the OpenAPI document itself).
func (s *Server) apiRoutes() []apiRoute {
	return []apiRoute{
		// who am I
		{"GET /v1/whoami", anyAuthenticated, routeDoc{summary: "Who the token acts for", resp: api.WhoAmI{}}, s.whoami},
		{"GET /v1/cluster", catalogRead, routeDoc{summary: "The replicas sharing the store and which one leads (a follower answers reads from its copy of the store and sends other requests to the leader with a 307)", resp: api.ClusterInfo{}}, s.getCluster},

		// fleet
		{"GET /v1/regions", tenantScoped, routeDoc{summary: "List the fleet's regions", resp: api.List[api.Region]{}, query: pageQuery}, s.listRegions},
		{"GET /v1/advisor", tenantScoped, routeDoc{summary: "The advisor's recommendations over a window (default 30d): idle reservations (idle share above idle_threshold, default 50%), unused guarantees, steady on-demand baselines a 1- or 3-year reservation would serve cheaper, preemptible work at on-demand prices, pending work blocked by a quota limit; each with its evidence and estimated monthly saving (USD, a month of 730 h), by saving. A tenant token sees its own tenant's only", resp: api.List[meter.Recommendation]{}, query: []string{"window", "idle_threshold"}}, s.advisor},
		{"GET /v1/cost-report", tenantScoped, routeDoc{summary: "The cost report summed on the server: GPU-hours, cost (at the unit prices charged) and list cost (on-demand) per group of group_by (tenant, kind, region, sku, model, charge, class, workload, comma-separated; default tenant) over the records' intervals clipped to [since, until) (default: the last 30 days), with the total; since and until as for usage-records; tenant=T: T's subtree only. A tenant token sees its own subtree's only", resp: meter.Report{}, query: []string{"since", "until", "group_by", "tenant"}}, s.costReport},
		{"GET /v1/usage-records", tenantScoped, routeDoc{summary: "Usage records (one per replica of each run: tenant and its path, workload, kind, class, SKU, GPU model, region, node, milli-GPUs, start, end (none while open), charge and unit price) whose interval meets [since, until) (default: the last 30 days), in start order; since and until: a duration back from now (30d, 12h), an RFC 3339 time or a date. A tenant token sees its own tenant's only", resp: api.List[meter.Record]{}, query: append([]string{"since", "until"}, pageQuery...)}, s.listUsage},
		{"GET /v1/spot-prices", tenantScoped, routeDoc{summary: "List the spot price of each GPU model and region (catalog price moved by utilization, or set by a policy)", resp: api.List[api.SpotPrice]{}, query: pageQuery}, s.listSpotPrices},
		{"GET /v1/skus", catalogRead, routeDoc{summary: "List the catalog's machine sizes", resp: api.List[api.SKU]{}, query: pageQuery}, s.listSKUs},
		{"GET /v1/nodes", adminOnly, routeDoc{summary: "List machines with their allocation", resp: api.List[api.Node]{}, query: []string{"region", "limit", "continue"}}, s.listNodes},
		{"POST /v1/nodes", nodeSelf, routeDoc{summary: "Register a machine (a node token: its own node only)", req: api.NodeRegistration{}, resp: api.Node{}, status: 201}, s.registerNode},
		{"GET /v1/nodes/{id}", adminOnly, routeDoc{summary: "Show a machine", resp: api.Node{}}, s.getNode},
		{"PATCH /v1/nodes/{id}", adminOnly, routeDoc{summary: "Drain or undrain a node (a drained node's work is evicted and requeued; it takes none), cordon or uncordon it (a cordoned node takes no new work; its running work stays), or replace its labels", req: api.NodeUpdate{}, resp: api.Node{}}, s.updateNode},
		{"DELETE /v1/nodes/{id}", adminOnly, routeDoc{summary: "Remove a node that runs nothing and no reservation or partition holds (drain it first)"}, s.deleteNode},

		// the agent protocol
		{"POST /v1/nodes/{id}/heartbeat", nodeSelf, routeDoc{summary: "Agent heartbeat: GPUs, running replicas, reports; answers the node's tasks (long-polls with wait). Admin or the node's token", req: api.Heartbeat{}, resp: api.HeartbeatReply{}}, s.heartbeat},
		{"POST /v1/nodes/{id}/tokens", adminOnly, routeDoc{summary: "Create a node token for the node's agent: it may register and heartbeat that node only (the secret is returned once)", req: api.TokenRequest{}, resp: api.Token{}, status: 201}, s.createNodeToken},

		// tenants
		{"GET /v1/tenants", tenantScoped, routeDoc{summary: "List tenants (a tenant token sees itself)", resp: api.List[api.Tenant]{}, query: pageQuery}, s.listTenants},
		{"POST /v1/tenants", adminOnly, routeDoc{summary: "Create a tenant with quotas", req: api.Tenant{}, resp: api.Tenant{}, status: 201}, s.createTenant},
		{"GET /v1/tenants/{tenant}", tenantScoped, routeDoc{summary: "Show a tenant", resp: api.Tenant{}}, s.getTenant},
		{"DELETE /v1/tenants/{tenant}", adminOnly, routeDoc{summary: "Delete a tenant without workloads, reservations, partitions or children"}, s.deleteTenant},
		{"PUT /v1/tenants/{tenant}/quotas", adminOnly, routeDoc{summary: "Replace a tenant's quotas", req: api.QuotaList{}, resp: api.Tenant{}}, s.setQuotas},
		{"PUT /v1/tenants/{tenant}/allowed-priorities", adminOnly, routeDoc{summary: "Replace the priority classes a tenant's workloads may use (default: all but critical)", req: api.AllowedPriorities{}, resp: api.Tenant{}}, s.setAllowedPriorities},
		{"POST /v1/tenants/{tenant}/tokens", adminOnly, routeDoc{summary: "Create a tenant token (the secret is returned once)", req: api.TokenRequest{}, resp: api.Token{}, status: 201}, s.createToken},

		// usage
		{"GET /v1/tenants/{tenant}/usage", tenantScoped, routeDoc{summary: "Quota usage of a tenant: each quota family's current value and limit", resp: api.List[api.Usage]{}, query: []string{"region", "limit", "continue"}}, s.tenantUsage},
		{"GET /v1/usage", tenantScoped, routeDoc{summary: "Quota usage of every tenant the token sees", resp: api.List[api.Usage]{}, query: []string{"region", "tenant", "limit", "continue"}}, s.allUsage},

		// reservations
		{"GET /v1/reservations", tenantScoped, routeDoc{summary: "List reservations with utilization (the admin sees all tenants'; name: only those of that name, one per tenant at most)", resp: api.List[api.Reservation]{}, query: []string{"name", "limit", "continue"}}, s.listAllReservations},
		{"GET /v1/tenants/{tenant}/reservations", tenantScoped, routeDoc{summary: "List reservations with utilization", resp: api.List[api.Reservation]{}, query: pageQuery}, s.listReservations},
		{"POST /v1/tenants/{tenant}/reservations", tenantScoped, routeDoc{summary: "Create a capacity reservation, now or for a window (start, end), all or nothing against the capacity calendar (409 InsufficientCapacity)", req: api.ReservationRequest{}, resp: api.Reservation{}, status: 201}, s.createReservation},
		{"GET /v1/tenants/{tenant}/reservations/{name}", tenantScoped, routeDoc{summary: "Show a reservation with utilization", resp: api.Reservation{}}, s.getReservation},
		{"PATCH /v1/tenants/{tenant}/reservations/{name}", tenantScoped, routeDoc{summary: "Resize a reservation: shrinking always succeeds, growing is all or nothing", req: api.Resize{}, resp: api.Reservation{}}, s.resizeReservation},
		{"DELETE /v1/tenants/{tenant}/reservations/{name}", tenantScoped, routeDoc{summary: "Delete a reservation no live workload uses"}, s.deleteReservation},

		// workloads
		{"GET /v1/workloads", tenantScoped, routeDoc{summary: "List workloads (the admin sees all tenants'; name: only those of that name, one per tenant at most)", resp: api.List[api.Workload]{}, query: []string{"state", "name", "limit", "continue"}}, s.listAllWorkloads},
		{"GET /v1/tenants/{tenant}/workloads", tenantScoped, routeDoc{summary: "List a tenant's workloads", resp: api.List[api.Workload]{}, query: []string{"state", "limit", "continue"}}, s.listWorkloads},
		{"POST /v1/tenants/{tenant}/workloads", tenantScoped, routeDoc{summary: "Submit a workload (durable when answered). With an Idempotency-Key header (at most 128 of A-Z a-z 0-9 . _ : ~ -) a retry with the same key and body answers the first workload (Idempotent-Replayed: true) and creates nothing; the same key with another body is a 422. Keys are per tenant, kept 24 h", req: api.WorkloadSpec{}, resp: api.Workload{}, status: 201}, s.submitWorkload},
		{"GET /v1/tenants/{tenant}/workloads/{name}", tenantScoped, routeDoc{summary: "Show a workload", resp: api.Workload{}}, s.getWorkload},
		{"POST /v1/tenants/{tenant}/workloads/{name}/cancel", tenantScoped, routeDoc{summary: "Cancel a workload", resp: api.Workload{}}, s.cancelWorkload},
		{"GET /v1/tenants/{tenant}/workloads/{name}/why", tenantScoped, routeDoc{summary: "Why a workload is pending (structured reason)", resp: api.Why{}}, s.whyWorkload},
		{"GET /v1/tenants/{tenant}/workloads/{name}/logs", tenantScoped, routeDoc{summary: "A replica's output, fetched from its node's agent (text): tail=N the last N bytes, from=OFFSET the bytes from that offset (at most 64 MiB an answer); follow=true then streams what the replica writes until its run ends or 10 minutes pass (ask again from X-Log-Start plus the bytes read). X-Log-Start: the offset of the first byte; X-Log-Size: the log's size when the answer began; X-Log-Ended: true when the replica's process was not running then", query: []string{"replica", "tail", "from", "follow"}}, s.workloadLogs},

		// policies and metrics
		{"GET /v1/policies", adminOnly, routeDoc{summary: "List applied policies", resp: api.List[api.Policy]{}, query: pageQuery}, s.listPolicies},
		{"POST /v1/policies", adminOnly, routeDoc{summary: "Apply (create or replace) a policy from its YAML", req: api.PolicyApply{}, resp: api.Policy{}}, s.applyPolicy},
		{"GET /v1/policies/{name}", adminOnly, routeDoc{summary: "Show a policy", resp: api.Policy{}}, s.getPolicy},
		{"DELETE /v1/policies/{name}", adminOnly, routeDoc{summary: "Remove a policy"}, s.deletePolicy},
		{"GET /v1/policies/{name}/firings", adminOnly, routeDoc{summary: "A policy's firing log", resp: api.List[api.Firing]{}, query: pageQuery}, s.listFirings},
		{"POST /v1/metrics", adminOnly, routeDoc{summary: "Push measurements for the policies (latency, queue wait, spot price, capacity failures)", req: api.MetricSamples{}, resp: api.MetricsAccepted{}}, s.pushMetrics},

		// events
		{"GET /v1/events", tenantScoped, routeDoc{summary: "Events after a sequence number; long-polls with wait; with Accept: text/event-stream, a server-sent event stream (id: seq, event: type, data: Event; resumes from Last-Event-ID). tenant: only that tenant's events (a tenant token may name only itself)", resp: api.Events{}, query: []string{"after", "wait", "limit", "tenant"}}, s.events},

		// alerts
		{"GET /v1/alerts", adminOnly, routeDoc{summary: "List the alert rules with their state", resp: api.Alerts{}}, s.listAlerts},
		{"PUT /v1/alerts", adminOnly, routeDoc{summary: "Replace the alert rules with a rules file (YAML source)", req: api.AlertsApply{}, resp: api.Alerts{}}, s.applyAlerts},

		// probes
		{"GET /v1/probes", adminOnly, routeDoc{summary: "List the probes with what they measured over the policy window", resp: api.Probes{}}, s.listProbes},
		{"PUT /v1/probes", adminOnly, routeDoc{summary: "Replace the probes with a probes file (YAML source)", req: api.ProbesApply{}, resp: api.Probes{}}, s.applyProbes},

		// the dashboard's views (ui.go)
		{"GET /v1/ui/fleet", tenantScoped, routeDoc{summary: "The fleet as the dashboard draws it: every node of every block with each GPU's holder (a tenant token: its own by name, others anonymous), use (guaranteed, borrowed, own or lent reservation) and share", resp: api.UIFleet{}}, s.uiFleet},
		{"GET /v1/ui/queue", tenantScoped, routeDoc{summary: "Pending workloads the token sees, oldest first, with the last cycle's reason and planned start", resp: api.UIQueue{}}, s.uiQueue},
		{"GET /v1/ui/series", tenantScoped, routeDoc{summary: "What the dashboard charts, a point a minute over the last 6 hours: the admin the fleet's utilization, pending GPUs and services' p95 latency; a tenant its own GPUs used and pending", resp: api.UISeries{}}, s.uiSeries},

		// partitions
		{"GET /v1/partitions", adminOnly, routeDoc{summary: "List partitions: machines only one tenant's subtree may use", resp: api.List[api.Partition]{}, query: pageQuery}, s.listPartitions},
		{"PUT /v1/partitions/{name}", adminOnly, routeDoc{summary: "Create or replace a partition (its machines in no other partition and no reservation)", req: api.PartitionRequest{}, resp: api.Partition{}}, s.setPartition},
		{"DELETE /v1/partitions/{name}", adminOnly, routeDoc{summary: "Remove a partition; its machines return to the shared pool"}, s.deletePartition},

		// tokens (the handlers check which tokens a tenant token may manage)
		{"GET /v1/tokens", tenantScoped, routeDoc{summary: "List tokens (ID, name, role, scope, creation, last use, expiry; never secrets), oldest first. The admin sees all, a tenant token its own tenant's", resp: api.List[api.Token]{}, query: pageQuery}, s.listTokens},
		{"POST /v1/tokens", tenantScoped, routeDoc{summary: "Create a token of a role: admin, tenant (tenant), node (node) or metrics. The admin may create any; a tenant token only tenant tokens of its own tenant, expiring no later than itself. The secret is returned once", req: api.TokenCreate{}, resp: api.Token{}, status: 201}, s.createTokenOfRole},
		{"DELETE /v1/tokens/{id}", tenantScoped, routeDoc{summary: "Revoke a token: it is refused from the next request on. A tenant token may revoke its own tenant's tokens"}, s.revokeToken},
		{"POST /v1/tokens/{id}/rotate", tenantScoped, routeDoc{summary: "Give a token a new secret (same ID, name, role); the old secret is refused at once. The new secret is returned once", resp: api.Token{}}, s.rotateToken},
	}
}
