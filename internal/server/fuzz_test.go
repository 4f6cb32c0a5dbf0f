package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
)

// bodyRoutes are the endpoints that take a body, with a valid seed each.
var bodyRoutes = []struct {
	method, path, admin, seed string
}{
	{"POST", "/v1/tenants/contoso/workloads", "", `{"name":"j","gpus":"0.5","replicas":2,"flavors":["A100-80G"],"regions":["eastus"],"priority":"high","kind":"training","topology":"same-block","checkpoint_interval":"30m"}`},
	{"POST", "/v1/tenants/contoso/workloads", "", `{"name":"p","gpus":1,"flavors":["A100-80G"],"regions":["eastus"],"pools":["spare"]}`},
	{"POST", "/v1/tenants/contoso/workloads", "", `{"name":"m","mig":"3g.40gb","replicas":2,"flavors":["A100-80G"],"regions":["eastus"]}`},
	{"POST", "/v1/tenants/contoso/workloads", "", `{"name":"g","gpus":1,"gpu_memory":"40GiB","flavors":["A100-80G"],"regions":["eastus"]}`},
	{"POST", "/v1/tenants/contoso/reservations", "", `{"name":"r","sku":"Standard_ND96isr_H100_v5","capacity":1,"region":"eastus"}`},
	{"PATCH", "/v1/tenants/contoso/reservations/r0", "", `{"capacity":2}`},
	{"POST", "/v1/tenants", "admin", `{"name":"t","parent":"customers","quotas":[{"flavor":"A100-80G","region":"eastus","guaranteed":8,"limit":"16"}]}`},
	{"PUT", "/v1/tenants/contoso/quotas", "admin", `{"quotas":[{"flavor":"H100-80G","limit":8,"lendable":0}]}`},
	{"POST", "/v1/tenants/contoso/tokens", "admin", `{"name":"ci"}`},
	{"POST", "/v1/nodes/n9/tokens", "admin", `{"name":"agent"}`},
	{"PATCH", "/v1/nodes/eus-a-n0001", "admin", `{"drained":true,"labels":{"pool":"batch"}}`},
	{"POST", "/v1/nodes/eus-a-n0001/heartbeat", "admin", `{"gpus":[{"index":0,"uuid":"GPU-1","model":"NVIDIA A100","memory_mib":81920,"memory_used_mib":512,"utilization_pct":37},{"index":1,"utilization_pct":101}],"running":[]}`},
	{"POST", "/v1/nodes", "admin", `{"id":"n9","region":"eastus","zone":"1","block":"eus-h","sku":"Standard_ND96isr_H100_v5"}`},
	{"PUT", "/v1/alerts", "admin", `{"file":"a.yaml","source":"rules:\n  - {name: r, metric: pending_gpus, aggregation: avg, window: 5m, frequency: 1m, operator: '>', threshold: 1}\n"}`},
	{"POST", "/v1/policies", "admin", `{"name":"p","source":"policies:\n  - name: r\n    when: {metric: utilization, above: 85%}\n    then: [{type: set_limit, target: tenant:contoso, limit: 8}]\n"}`},
	{"PUT", "/v1/partitions/p", "admin", `{"tenant":"contoso","blocks":["wus-a"],"nodes":["eus-a-n0003"]}`},
	{"POST", "/v1/metrics", "admin", `{"samples":[{"metric":"p95_latency","target":"service:chat","value":0.182},{"metric":"spot_price","target":"flavor:A100-80G","value":1.2}]}`},
	{"POST", "/v1/tokens", "admin", `{"name":"prom","role":"metrics","expires_in":"30d"}`},
	{"POST", "/v1/tokens", "", `{"name":"ci","role":"tenant","expires_at":"2036-01-01T00:00:00Z"}`},
	{"POST", "/v1/tenants/contoso/tokens", "admin", `{"name":"ci","expires_in":"12h"}`},
}

// FuzzBodies sends arbitrary bodies to every endpoint that takes one: the
// answer is never a 5xx, and every error is a JSON {code, message}.
func FuzzBodies(f *testing.F) {
	for i, r := range bodyRoutes {
		f.Add(uint8(i), []byte(r.seed))
		f.Add(uint8(i), []byte(`{"name":"x","unknown_field":1}`))
		f.Add(uint8(i), []byte(`{"name":`))
		f.Add(uint8(i), []byte(`[]`))
		f.Add(uint8(i), []byte(`{} {}`))
		f.Add(uint8(i), []byte(`{"capacity":-1,"gpus":"1e400","replicas":1e20,"quotas":[{"flavor":"A100-80G","limit":-3}]}`))
		// The bounds of issue 12: amounts, counts and sizes past their limits.
		f.Add(uint8(i), []byte(`{"name":"b","gpus":"999999999999999999m","cpu_milli":-1,"memory_mib":1e15,"max_price":1e300,"flavors":["A100-80G"],"regions":["eastus"]}`))
		f.Add(uint8(i), []byte(`{"name":"b","gpus":" 0x1p3","priority":"7","expected_runtime":"99999d","flavors":["A100-80G"],"regions":["eastus",""]}`))
		f.Add(uint8(i), []byte(`{"name":"b","gpus":1,"labels":{"a b":"\u0000"},"command":{"argv":["x"],"env":{"A":"`+strings.Repeat("x", 3000)+`"},"dir":"/d"},"flavors":["A100-80G"],"regions":["eastus"]}`))
		f.Add(uint8(i), []byte(`{"name":"r","region":"eastus","zone":"../9","sku":"Standard_ND96isr_H100_v5","capacity":1,"labels":{"":"1"},"quotas":[{"flavor":"A100-80G","priority":99999999,"guaranteed":"-1"}]}`))
	}
	h := newHarness(f, testConfig, Options{RateLimit: -1, MaxBody: 4096})
	tenant, err := h.admin.CreateToken(h.ctx, "contoso", "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	if _, err := h.admin.CreateReservation(h.ctx, "contoso", api.ReservationRequest{Name: "r0", SKU: "Standard_ND96isr_H100_v5", Capacity: 1, Region: "eastus"}); err != nil {
		f.Fatal(err)
	}
	handler := h.s.Handler()
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		r := bodyRoutes[int(which)%len(bodyRoutes)]
		tok := tenant.Secret
		if r.admin != "" {
			tok = testAdmin
		}
		req := httptest.NewRequest(r.method, r.path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: status %d: %s", r.method, r.path, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var e api.Error
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code == "" || e.Message == "" {
				t.Fatalf("%s %s %q: error answer is not {code, message}: %s", r.method, r.path, body, rec.Body)
			}
		}
	})
}

// TestBadBodies: malformed, oversized, unknown-field and wrong-type bodies
// get a 4xx that names the problem.
func TestBadBodies(t *testing.T) {
	h := newHarness(t, testConfig, Options{MaxBody: 1024})
	tok, err := h.admin.CreateToken(h.ctx, "contoso", "t")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, body, ctype string
		status            int
		code, field, msg  string
	}{
		{"malformed", `{"name":`, "", 400, api.CodeInvalid, "", "ends early"},
		{"syntax", `{"name" 1}`, "", 400, api.CodeInvalid, "", "malformed JSON at byte"},
		{"unknown field", `{"name":"j","gpus":1,"flavors":["A100-80G"],"regions":["eastus"],"colour":"red"}`, "", 400, api.CodeInvalid, "colour", "unknown field"},
		{"wrong type", `{"name":"j","gpus":1,"replicas":"two","flavors":["A100-80G"],"regions":["eastus"]}`, "", 400, api.CodeInvalid, "replicas", "expected int"},
		{"elastic min 0", `{"name":"j","gpus":1,"replicas":{"min":0,"max":4},"flavors":["A100-80G"],"regions":["eastus"]}`, "", 400, api.CodeInvalid, "replicas.min", "min must be between 1"},
		{"elastic step", `{"name":"j","gpus":1,"replicas":{"min":1,"max":4,"step":2},"flavors":["A100-80G"],"regions":["eastus"]}`, "", 400, api.CodeInvalid, "replicas.step", "must divide"},
		{"elastic wrong type", `{"name":"j","gpus":1,"replicas":{"min":1,"max":"x"},"flavors":["A100-80G"],"regions":["eastus"]}`, "", 400, api.CodeInvalid, "replicas.max", "expected int"},
		{"elastic unknown key", `{"name":"j","gpus":1,"replicas":{"min":1,"mx":4},"flavors":["A100-80G"],"regions":["eastus"]}`, "", 400, api.CodeInvalid, "", "unknown field"},
		{"oversized", `{"name":"` + strings.Repeat("x", 2000) + `"}`, "", 413, api.CodeTooLarge, "", "larger than 1024 bytes"},
		{"two objects", `{} {}`, "", 400, api.CodeInvalid, "", "exactly one JSON object"},
		{"empty", ``, "", 400, api.CodeInvalid, "", "empty"},
		{"not json", `name: j`, "text/yaml", 415, api.CodeMediaType, "", "Content-Type"},
		{"bad gpus", `{"name":"j","gpus":"lots","flavors":["A100-80G"],"regions":["eastus"]}`, "", 400, api.CodeInvalid, "gpus", "invalid GPU amount"},
		{"invalid spec", `{"name":"j","gpus":1,"flavors":[],"regions":["eastus"],"priority":"urgent"}`, "", 400, api.CodeInvalid, "priority", "unknown priority class"},
		{"unknown flavor", `{"name":"j","gpus":1,"flavors":["B200"],"regions":["eastus"]}`, "", 400, api.CodeInvalid, "flavors[0]", "unknown GPU model"},
		{"unknown region", `{"name":"j","gpus":1,"flavors":["A100-80G"],"regions":["mars"]}`, "", 400, api.CodeInvalid, "regions[0]", "not in the fleet"},
		// Every fleet problem is named, the first in Field (issue 13).
		{"every fleet problem", `{"name":"j","gpus":16,"flavors":["A100-80G","B200"],"regions":["eastus","mars"]}`, "", 400, api.CodeInvalid, "flavors[1]",
			`flavors[1]: unknown GPU model "B200"`},
		{"every fleet problem: region", `{"name":"j","gpus":16,"flavors":["A100-80G","B200"],"regions":["eastus","mars"]}`, "", 400, api.CodeInvalid, "flavors[1]",
			`regions[1]: region "mars" is not in the fleet`},
		{"every fleet problem: size", `{"name":"j","gpus":16,"flavors":["A100-80G","B200"],"regions":["eastus","mars"]}`, "", 400, api.CodeInvalid, "flavors[1]",
			`gpus: 16 GPUs per replica, but the largest machine`},
		{"too big for a machine", `{"name":"j","gpus":16,"flavors":["A100-80G"],"regions":["eastus"]}`, "", 400, api.CodeInvalid, "gpus", "largest machine"},
		{"bad name", `{"name":"../x","gpus":1,"flavors":["A100-80G"],"regions":["eastus"]}`, "", 400, api.CodeInvalid, "name", ""},
		{"bad pools", `{"name":"j","gpus":1,"flavors":["A100-80G"],"regions":["eastus"],"pools":["a","a"]}`, "", 400, api.CodeInvalid, "pools", "listed once"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", h.url+"/v1/tenants/contoso/workloads", strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+tok.Secret)
			if c.ctype != "" {
				req.Header.Set("Content-Type", c.ctype)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e api.Error
			json.NewDecoder(resp.Body).Decode(&e)
			if resp.StatusCode != c.status || e.Code != c.code || e.Field != c.field || !strings.Contains(e.Message, c.msg) {
				t.Fatalf("got %d %+v, want %d %s field %q message containing %q", resp.StatusCode, e, c.status, c.code, c.field, c.msg)
			}
		})
	}
	// Unknown routes and methods answer JSON too.
	for _, c := range []struct {
		method, path string
		status       int
	}{{"GET", "/v1/nope", 404}, {"PUT", "/v1/workloads", 405}} {
		req, _ := http.NewRequest(c.method, h.url+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e api.Error
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != c.status || e.Code == "" {
			t.Errorf("%s %s: %d %+v, want %d with a JSON error", c.method, c.path, resp.StatusCode, e, c.status)
		}
	}
	// No token, a wrong token.
	for _, tok := range []string{"", "Bearer nope"} {
		req, _ := http.NewRequest("GET", h.url+"/v1/whoami", nil)
		if tok != "" {
			req.Header.Set("Authorization", tok)
		}
		resp, _ := http.DefaultClient.Do(req)
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("token %q: status %d, want 401", tok, resp.StatusCode)
		}
	}
}
