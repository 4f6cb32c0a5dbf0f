package server

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// routeDoc describes one route for the OpenAPI document.
type routeDoc struct {
	summary string
	admin   bool // needs the admin token
	req     any  // body type, nil for none
	resp    any  // answer type, nil for 204
	status  int
	query   []string
}

// pageQuery are the paging parameters of every list (paging.go).
var pageQuery = []string{"limit", "continue"}

// docs describes every route of apiRoutes; TestOpenAPICoversRoutes keeps
// them in step.
var docs = map[string]routeDoc{
	"GET /v1/whoami":                                    {summary: "Who the token acts for", resp: api.WhoAmI{}},
	"GET /v1/regions":                                   {summary: "List the fleet's regions", resp: api.List[api.Region]{}, query: pageQuery},
	"GET /v1/spot-prices":                               {summary: "List the spot price of each GPU model and region (catalog price moved by utilization, or set by a policy)", resp: api.List[api.SpotPrice]{}, query: pageQuery},
	"GET /v1/skus":                                      {summary: "List the catalog's machine sizes", resp: api.List[api.SKU]{}, query: pageQuery},
	"GET /v1/nodes":                                     {summary: "List machines with their allocation", admin: true, resp: api.List[api.Node]{}, query: []string{"region", "limit", "continue"}},
	"POST /v1/nodes":                                    {summary: "Register a machine", admin: true, req: api.NodeRegistration{}, resp: api.Node{}, status: 201},
	"GET /v1/nodes/{id}":                                {summary: "Show a machine", admin: true, resp: api.Node{}},
	"GET /v1/tenants":                                   {summary: "List tenants (a tenant token sees itself)", resp: api.List[api.Tenant]{}, query: pageQuery},
	"POST /v1/tenants":                                  {summary: "Create a tenant with quotas", admin: true, req: api.Tenant{}, resp: api.Tenant{}, status: 201},
	"GET /v1/tenants/{tenant}":                          {summary: "Show a tenant", resp: api.Tenant{}},
	"DELETE /v1/tenants/{tenant}":                       {summary: "Delete a tenant without workloads, reservations, partitions or children", admin: true},
	"PUT /v1/tenants/{tenant}/quotas":                   {summary: "Replace a tenant's quotas", admin: true, req: api.QuotaList{}, resp: api.Tenant{}},
	"PUT /v1/tenants/{tenant}/allowed-priorities":       {summary: "Replace the priority classes a tenant's workloads may use (default: all but critical)", admin: true, req: api.AllowedPriorities{}, resp: api.Tenant{}},
	"POST /v1/tenants/{tenant}/tokens":                  {summary: "Create a tenant token (the secret is returned once)", admin: true, req: api.TokenRequest{}, resp: api.Token{}, status: 201},
	"GET /v1/tenants/{tenant}/usage":                    {summary: "Quota usage of a tenant: each quota family's current value and limit", resp: api.List[api.Usage]{}, query: []string{"region", "limit", "continue"}},
	"GET /v1/usage":                                     {summary: "Quota usage of every tenant the token sees", resp: api.List[api.Usage]{}, query: []string{"region", "tenant", "limit", "continue"}},
	"GET /v1/tenants/{tenant}/reservations":             {summary: "List reservations with utilization", resp: api.List[api.Reservation]{}, query: pageQuery},
	"POST /v1/tenants/{tenant}/reservations":            {summary: "Create a capacity reservation, all or nothing (409 InsufficientCapacity)", req: api.ReservationRequest{}, resp: api.Reservation{}, status: 201},
	"GET /v1/tenants/{tenant}/reservations/{name}":      {summary: "Show a reservation with utilization", resp: api.Reservation{}},
	"PATCH /v1/tenants/{tenant}/reservations/{name}":    {summary: "Resize a reservation: shrinking always succeeds, growing is all or nothing", req: api.Resize{}, resp: api.Reservation{}},
	"DELETE /v1/tenants/{tenant}/reservations/{name}":   {summary: "Delete a reservation no live workload uses"},
	"GET /v1/workloads":                                 {summary: "List workloads (the admin sees all tenants')", resp: api.List[api.Workload]{}, query: []string{"state", "limit", "continue"}},
	"GET /v1/tenants/{tenant}/workloads":                {summary: "List a tenant's workloads", resp: api.List[api.Workload]{}, query: []string{"state", "limit", "continue"}},
	"POST /v1/tenants/{tenant}/workloads":               {summary: "Submit a workload (durable when answered)", req: api.WorkloadSpec{}, resp: api.Workload{}, status: 201},
	"GET /v1/tenants/{tenant}/workloads/{name}":         {summary: "Show a workload", resp: api.Workload{}},
	"POST /v1/tenants/{tenant}/workloads/{name}/cancel": {summary: "Cancel a workload", resp: api.Workload{}},
	"GET /v1/tenants/{tenant}/workloads/{name}/why":     {summary: "Why a workload is pending (structured reason)", resp: api.Why{}},
	"GET /v1/policies":                                  {summary: "List applied policies", admin: true, resp: api.List[api.Policy]{}, query: pageQuery},
	"POST /v1/policies":                                 {summary: "Apply (create or replace) a policy from its YAML", admin: true, req: api.PolicyApply{}, resp: api.Policy{}},
	"GET /v1/policies/{name}":                           {summary: "Show a policy", admin: true, resp: api.Policy{}},
	"DELETE /v1/policies/{name}":                        {summary: "Remove a policy", admin: true},
	"GET /v1/policies/{name}/firings":                   {summary: "A policy's firing log", admin: true, resp: api.List[api.Firing]{}, query: pageQuery},
	"GET /v1/events":                                    {summary: "Events after a sequence number; long-polls with wait; with Accept: text/event-stream, a server-sent event stream (id: seq, event: type, data: Event; resumes from Last-Event-ID)", resp: api.Events{}, query: []string{"after", "wait", "limit"}},
	"GET /v1/alerts":                                    {summary: "List the alert rules with their state", admin: true, resp: api.Alerts{}},
	"PUT /v1/alerts":                                    {summary: "Replace the alert rules with a rules file (YAML source)", admin: true, req: api.AlertsApply{}, resp: api.Alerts{}},
	"POST /v1/metrics":                                  {summary: "Push measurements for the policies (latency, queue wait, spot price, capacity failures)", admin: true, req: api.MetricSamples{}, resp: api.MetricsAccepted{}},
	"GET /v1/partitions":                                {summary: "List partitions: machines only one tenant's subtree may use", admin: true, resp: api.List[api.Partition]{}, query: pageQuery},
	"PUT /v1/partitions/{name}":                         {summary: "Create or replace a partition (its machines in no other partition and no reservation)", admin: true, req: api.PartitionRequest{}, resp: api.Partition{}},
	"DELETE /v1/partitions/{name}":                      {summary: "Remove a partition; its machines return to the shared pool", admin: true},
}

// buildOpenAPI writes the OpenAPI 3.1 document of the routes.
func buildOpenAPI(routes []apiRoute) ([]byte, error) {
	schemas := map[string]any{}
	paths := map[string]map[string]any{}
	errResp := map[string]any{"description": "error", "content": map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(api.Error{}), schemas)}}}
	for _, rt := range routes {
		d, ok := docs[rt.pattern]
		if !ok {
			return nil, fmt.Errorf("server: route %s has no OpenAPI description", rt.pattern)
		}
		method, path, _ := strings.Cut(rt.pattern, " ")
		op := map[string]any{"summary": d.summary, "security": []any{map[string]any{"bearer": []string{}}}}
		var params []any
		for _, seg := range strings.Split(path, "/") {
			if strings.HasPrefix(seg, "{") {
				params = append(params, map[string]any{"name": strings.Trim(seg, "{}"), "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
			}
		}
		for _, q := range d.query {
			params = append(params, map[string]any{"name": q, "in": "query", "schema": map[string]any{"type": "string"}})
		}
		if params != nil {
			op["parameters"] = params
		}
		if d.req != nil {
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(d.req), schemas)}}}
		}
		responses := map[string]any{"default": errResp}
		switch {
		case d.resp == nil:
			responses["204"] = map[string]any{"description": "done"}
		default:
			st := d.status
			if st == 0 {
				st = 200
			}
			responses[fmt.Sprint(st)] = map[string]any{"description": "ok", "content": map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(d.resp), schemas)}}}
		}
		if d.admin {
			op["description"] = "Needs the admin token (403 otherwise)."
		}
		op["responses"] = responses
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(method)] = op
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "Arbiter control plane API", "version": "v1",
			"description": "GPU capacity arbiter. Every request carries Authorization: Bearer <token>. Errors are {code, message, field}. Another tenant's objects answer 404."},
		"paths": paths,
		"components": map[string]any{
			"schemas":         schemas,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
	return json.MarshalIndent(doc, "", "  ")
}

var (
	timeType     = reflect.TypeOf(time.Time{})
	gpusType     = reflect.TypeOf(api.GPUs(0))
	durationType = reflect.TypeOf(api.Duration(0))
)

// schemaOf returns a JSON schema for t; named structs go to schemas.
func schemaOf(t reflect.Type, schemas map[string]any) map[string]any {
	switch t {
	case timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case gpusType:
		return map[string]any{"description": "GPUs: a number (8, 0.5) or a string (\"8\", \"0.5\", \"500m\")", "oneOf": []any{map[string]any{"type": "number"}, map[string]any{"type": "string"}}}
	case durationType:
		return map[string]any{"type": "string", "description": "duration such as 90s, 5m, 2h or 7d"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaOf(t.Elem(), schemas)
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Int32:
		return map[string]any{"type": "integer"}
	case reflect.Float64, reflect.Float32:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem(), schemas)}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem(), schemas)}
	case reflect.Struct:
		name := t.Name()
		if i := strings.Index(name, "["); i >= 0 { // List[api.Region] → RegionList
			name = name[i+1 : len(name)-1]
			name = name[strings.LastIndex(name, ".")+1:] + "List"
		}
		ref := map[string]any{"$ref": "#/components/schemas/" + name}
		if _, ok := schemas[name]; ok {
			return ref
		}
		schemas[name] = map[string]any{} // placeholder against recursion
		props := map[string]any{}
		var required []string
		var addFields func(t reflect.Type)
		addFields = func(t reflect.Type) {
			for i := 0; i < t.NumField(); i++ {
				f := t.Field(i)
				if f.Anonymous {
					addFields(f.Type)
					continue
				}
				tag := f.Tag.Get("json")
				if tag == "-" || !f.IsExported() {
					continue
				}
				jn, opts, _ := strings.Cut(tag, ",")
				if jn == "" {
					jn = f.Name
				}
				props[jn] = schemaOf(f.Type, schemas)
				if !strings.Contains(opts, "omit") && f.Type.Kind() != reflect.Pointer {
					required = append(required, jn)
				}
			}
		}
		addFields(t)
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if len(required) > 0 {
			s["required"] = required
		}
		schemas[name] = s
		return ref
	}
	return map[string]any{}
}
