package server

import (
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
)

// TestNodeTokens: a node's token registers and heartbeats its own node and
// does nothing else — not another node, not a tenant's objects, not admin
// routes.
func TestNodeTokens(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	tok, err := h.admin.CreateNodeToken(h.ctx, "n9", "")
	if err != nil || tok.Node != "n9" || tok.Secret == "" || tok.Name != "agent" {
		t.Fatalf("create: %+v %v", tok, err)
	}
	if _, err := h.tenant("contoso").CreateNodeToken(h.ctx, "n9", "x"); apiCode(err) != api.CodeForbidden {
		t.Errorf("a tenant created a node token: %v", err)
	}
	n := client.New(h.url, tok.Secret)
	if me, err := n.WhoAmI(h.ctx); err != nil || me.Node != "n9" || me.Admin {
		t.Fatalf("whoami: %+v %v", me, err)
	}
	reg := func(id string) error {
		_, err := n.RegisterNode(h.ctx, api.NodeRegistration{ID: id, Region: "eastus", Zone: "1", Block: "eus-h", SKU: "Standard_ND96isr_H100_v5"})
		return err
	}
	if err := reg("n9"); err != nil {
		t.Fatalf("registering its own node: %v", err)
	}
	if err := reg("n10"); apiCode(err) != api.CodeForbidden {
		t.Errorf("registering another node: %v, want Forbidden", err)
	}
	hb := func(id string) error {
		var reply api.HeartbeatReply
		return n.Do(h.ctx, "POST", "/v1/nodes/"+id+"/heartbeat", api.Heartbeat{}, &reply)
	}
	if err := hb("n9"); err != nil {
		t.Errorf("heartbeat of its own node: %v", err)
	}
	if err := hb("eus-a-n0000"); apiCode(err) != api.CodeForbidden {
		t.Errorf("heartbeat of another node: %v, want Forbidden", err)
	}
	if _, err := n.SKUs(h.ctx); err != nil {
		t.Errorf("SKUs (the agent picks its size): %v", err)
	}
	for _, call := range []struct {
		name string
		err  error
	}{
		{"list tenants", func() error { _, err := n.Tenants(h.ctx); return err }()},
		{"list nodes", func() error { _, err := n.Nodes(h.ctx, ""); return err }()},
		{"submit", func() error { _, err := n.Submit(h.ctx, "contoso", spec("x", 1, 1)); return err }()},
		{"events", func() error { _, err := n.Events(h.ctx, 0, 0, 10); return err }()},
		{"usage", func() error { _, err := n.Usage(h.ctx, "contoso", ""); return err }()},
	} {
		if apiCode(call.err) != api.CodeForbidden {
			t.Errorf("%s with a node token: %v, want Forbidden", call.name, call.err)
		}
	}
}
