package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
)

// send sends one request to the handler and decodes an error answer.
func send(t *testing.T, h *harness, tok, method, path, body string, hdr ...string) (int, api.Error) {
	t.Helper()
	var rd *bytes.Reader
	if body != "" {
		rd = bytes.NewReader([]byte(body))
	} else {
		rd = bytes.NewReader(nil)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.s.Handler().ServeHTTP(rec, req)
	var e api.Error
	if rec.Code >= 400 {
		json.Unmarshal(rec.Body.Bytes(), &e)
	}
	return rec.Code, e
}

// job returns a valid workload body with one field replaced (raw JSON).
func job(field, raw string) string {
	m := map[string]json.RawMessage{
		"name": json.RawMessage(`"j"`), "gpus": json.RawMessage(`1`),
		"flavors": json.RawMessage(`["A100-80G"]`), "regions": json.RawMessage(`["eastus"]`),
	}
	m[field] = json.RawMessage(raw)
	b, _ := json.Marshal(m)
	return string(b)
}

func manyStrings(n int) string {
	xs := make([]string, n)
	for i := range xs {
		xs[i] = fmt.Sprintf("%q", fmt.Sprint("x", i))
	}
	return "[" + strings.Join(xs, ",") + "]"
}

func manyLabels(n int) string {
	xs := make([]string, n)
	for i := range xs {
		xs[i] = fmt.Sprintf(`"k%d":"v"`, i)
	}
	return "{" + strings.Join(xs, ",") + "}"
}

// TestFieldBounds (issue 12, item 17): every field has a bound and every
// error names its field: a bad value of each is a 400 whose Field is that
// field.
func TestFieldBounds(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	tok, err := h.admin.CreateToken(h.ctx, "contoso", "t")
	if err != nil {
		t.Fatal(err)
	}
	const wl = "/v1/tenants/contoso/workloads"
	const res = "/v1/tenants/contoso/reservations"
	node := func(field, raw string) string {
		m := map[string]json.RawMessage{"id": json.RawMessage(`"n9"`), "region": json.RawMessage(`"eastus"`), "block": json.RawMessage(`"eus-h"`), "sku": json.RawMessage(`"Standard_ND96isr_H100_v5"`)}
		m[field] = json.RawMessage(raw)
		b, _ := json.Marshal(m)
		return string(b)
	}
	reservation := func(field, raw string) string {
		m := map[string]json.RawMessage{"name": json.RawMessage(`"r"`), "region": json.RawMessage(`"eastus"`), "sku": json.RawMessage(`"Standard_ND96isr_H100_v5"`), "capacity": json.RawMessage(`1`)}
		m[field] = json.RawMessage(raw)
		b, _ := json.Marshal(m)
		return string(b)
	}
	cases := []struct {
		name, method, path, body string
		admin                    bool
		field                    string
	}{
		{"gpus zero", "POST", wl, job("gpus", `0`), false, "gpus"},
		{"gpus negative", "POST", wl, job("gpus", `-1`), false, "gpus"},
		{"gpus negative string", "POST", wl, job("gpus", `"-1"`), false, "gpus"},
		{"gpus spaces", "POST", wl, job("gpus", `" 1"`), false, "gpus"},
		{"gpus exponent", "POST", wl, job("gpus", `1e0`), false, "gpus"},
		{"gpus hex", "POST", wl, job("gpus", `"0x1p3"`), false, "gpus"},
		{"gpus huge", "POST", wl, job("gpus", `"99999999999999"`), false, "gpus"},
		{"gpus huge milli", "POST", wl, job("gpus", `"999999999999999999m"`), false, "gpus"},
		{"gpus too fine", "POST", wl, job("gpus", `0.0001`), false, "gpus"},
		{"gpus above a machine", "POST", wl, job("gpus", `64`), false, "gpus"},
		{"replicas negative", "POST", wl, job("replicas", `-1`), false, "replicas"},
		{"replicas huge", "POST", wl, job("replicas", `1000000`), false, "replicas"},
		{"cpu negative", "POST", wl, job("cpu_milli", `-1`), false, "cpu_milli"},
		{"cpu huge", "POST", wl, job("cpu_milli", `10000000000`), false, "cpu_milli"},
		{"memory negative", "POST", wl, job("memory_mib", `-1`), false, "memory_mib"},
		{"memory huge", "POST", wl, job("memory_mib", `999999999999`), false, "memory_mib"},
		{"priority unknown", "POST", wl, job("priority", `"urgent"`), false, "priority"},
		{"priority number", "POST", wl, job("priority", `"7"`), false, "priority"},
		{"kind unknown", "POST", wl, job("kind", `"x"`), false, "kind"},
		{"topology unknown", "POST", wl, job("topology", `"x"`), false, "topology"},
		{"max_price negative", "POST", wl, job("max_price", `-1`), false, "max_price"},
		{"max_price huge", "POST", wl, job("max_price", `1e300`), false, "max_price"},
		{"regions many", "POST", wl, job("regions", manyStrings(33)), false, "regions"},
		{"regions empty name", "POST", wl, job("regions", `["eastus",""]`), false, "regions[1]"},
		{"flavors many", "POST", wl, job("flavors", manyStrings(33)), false, "flavors"},
		{"pools many", "POST", wl, job("pools", manyStrings(33)), false, "pools"},
		{"labels many", "POST", wl, job("labels", manyLabels(65)), false, "labels"},
		{"label key", "POST", wl, job("labels", `{"a b":"1"}`), false, "labels"},
		{"label value", "POST", wl, job("labels", `{"a":"`+strings.Repeat("v", 254)+`"}`), false, "labels.a"},
		{"expected_runtime long", "POST", wl, job("expected_runtime", `"1000d"`), false, "expected_runtime"},
		{"expected_runtime bad", "POST", wl, job("expected_runtime", `"soon"`), false, "expected_runtime"},
		{"checkpoint_interval long", "POST", wl, job("checkpoint_interval", `"1000d"`), false, "checkpoint_interval"},
		{"reservation long", "POST", wl, job("reservation", `"`+strings.Repeat("r", 64)+`"`), false, "reservation"},
		{"argv empty", "POST", wl, job("command", `{"argv":[]}`), false, "command.argv"},
		{"argv type", "POST", wl, job("command", `{"argv":[1]}`), false, "command.argv"},
		{"env bytes", "POST", wl, job("command", `{"argv":["a"],"env":{"A":"`+strings.Repeat("x", 70000)+`"}}`), false, "command.env"},
		{"node labels many", "POST", "/v1/nodes", node("labels", manyLabels(65)), true, "labels"},
		{"node label key", "POST", "/v1/nodes", node("labels", `{"":"1"}`), true, "labels"},
		{"node label value", "POST", "/v1/nodes", node("labels", `{"pool":"a\u0000b"}`), true, "labels.pool"},
		{"node zone", "POST", "/v1/nodes", node("zone", `"../z"`), true, "zone"},
		{"reservation zone unknown", "POST", res, reservation("zone", `"9"`), false, "zone"},
		{"reservation zone syntax", "POST", res, reservation("zone", `"`+strings.Repeat("z", 100)+`"`), false, "zone"},
		{"reservation region syntax", "POST", res, reservation("region", `"a/b"`), false, "region"},
		{"reservation capacity", "POST", res, reservation("capacity", `0`), false, "capacity"},
		{"quota weight", "POST", "/v1/tenants", `{"name":"t","quotas":[{"flavor":"A100-80G","weight":-1}]}`, true, "quotas[0].weight"},
		{"quota priority", "POST", "/v1/tenants", `{"name":"t","quotas":[{"flavor":"A100-80G","priority":99999999}]}`, true, "quotas[0].priority"},
		{"quota guaranteed", "POST", "/v1/tenants", `{"name":"t","quotas":[{"flavor":"A100-80G","guaranteed":"-1"}]}`, true, "quotas.guaranteed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			secret := tok.Secret
			if c.admin {
				secret = testAdmin
			}
			code, e := send(t, h, secret, c.method, c.path, c.body)
			if code != http.StatusBadRequest || e.Field != c.field {
				t.Errorf("got %d field %q (%s), want 400 naming %q", code, e.Field, e.Message, c.field)
			}
		})
	}
}

// TestStrictQuery (issue 12, item 17): query parameters are parsed
// strictly; each bad one is a 400 naming it.
func TestStrictQuery(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	c := h.tenant("contoso")
	if _, err := c.Submit(h.ctx, "contoso", spec("j", 1, 2)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path, field string
		hdr         []string
	}{
		{"/v1/events?after=12abc", "after", nil},
		{"/v1/events?after=-1", "after", nil},
		{"/v1/events?after=+1", "after", nil},
		{"/v1/events?after=%2012", "after", nil},
		{"/v1/events?after=", "after", nil},
		{"/v1/events?limit=0", "limit", nil},
		{"/v1/events?limit=1001", "limit", nil},
		{"/v1/events?limit=10x", "limit", nil},
		{"/v1/events?limit=1e2", "limit", nil},
		{"/v1/events?wait=5", "wait", nil},
		{"/v1/events?wait=61s", "wait", nil},
		{"/v1/events?after=1&after=2", "after", nil},
		{"/v1/events?since=1", "since", nil},
		{"/v1/events", "Last-Event-ID", []string{"Accept", "text/event-stream", "Last-Event-ID", "12abc"}},
		{"/v1/workloads?limit=abc", "limit", nil},
		{"/v1/workloads?limit=0", "limit", nil},
		{"/v1/workloads?limit=1001", "limit", nil},
		{"/v1/workloads?continue=zzz", "continue", nil},
		{"/v1/workloads?continue=", "continue", nil},
		{"/v1/workloads?state=Bogus", "state", nil},
		{"/v1/workloads?stat=Pending", "stat", nil},
		{"/v1/tenants/contoso/workloads?limit=2.5", "limit", nil},
		{"/v1/nodes?limit=-3", "limit", nil},
		{"/v1/nodes?zone=1", "zone", nil},
		{"/v1/tenants?limit=1x", "limit", nil},
		{"/v1/regions?limit=x", "limit", nil},
		{"/v1/usage?limit=x", "limit", nil},
		{"/v1/policies?limit=x", "limit", nil},
		{"/v1/partitions?limit=x", "limit", nil},
		{"/v1/tenants/contoso/reservations?limit=x", "limit", nil},
		{"/v1/tenants/contoso/workloads/j/logs?replica=1x", "replica", nil},
		{"/v1/tenants/contoso/workloads/j/logs?replica=2", "replica", nil},
		{"/v1/tenants/contoso/workloads/j/logs?tail=12abc", "tail", nil},
		{"/v1/whoami?x=1", "x", nil},
	}
	for _, tc := range cases {
		code, e := send(t, h, testAdmin, "GET", tc.path, "", tc.hdr...)
		if code != http.StatusBadRequest || e.Field != tc.field {
			t.Errorf("GET %s: %d field %q (%s), want 400 naming %q", tc.path, code, e.Field, e.Message, tc.field)
		}
	}
}
