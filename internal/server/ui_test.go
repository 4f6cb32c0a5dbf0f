package server

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/api"
)

// uiClient signs in through /ui/login with a token and returns an HTTP
// client holding the session cookie (and no token).
func uiClient(t *testing.T, h *harness, token string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("POST", h.url+"/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("sign-in: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	return c
}

func status(t *testing.T, c *http.Client, method, u string) int {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader("{}"))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestUISession: a dashboard session reads as its token does and nothing
// more: it cannot write (no cookie-borne change), it ends when its token
// is revoked, a sign-in from another site is refused, and node tokens get
// no session.
func TestUISession(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	tok, err := h.admin.CreateToken(h.ctx, "contoso", "ui")
	if err != nil {
		t.Fatal(err)
	}
	c := uiClient(t, h, tok.Secret)
	if got := status(t, c, "GET", h.url+"/v1/tenants/contoso/workloads"); got != http.StatusOK {
		t.Errorf("a session read its own workloads: %d", got)
	}
	if got := status(t, c, "GET", h.url+"/v1/tenants/fabrikam/workloads"); got != http.StatusNotFound {
		t.Errorf("a contoso session read fabrikam's: %d", got)
	}
	if got := status(t, c, "GET", h.url+"/v1/ui/fleet"); got != http.StatusOK {
		t.Errorf("fleet view: %d", got)
	}
	if got := status(t, c, "POST", h.url+"/v1/tenants/contoso/workloads"); got != http.StatusUnauthorized {
		t.Errorf("a session wrote: %d, want 401 (a cookie authenticates reads only)", got)
	}
	if err := h.admin.RevokeToken(h.ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if got := status(t, c, "GET", h.url+"/v1/tenants/contoso/workloads"); got != http.StatusUnauthorized {
		t.Errorf("a revoked token's session still reads: %d", got)
	}

	// From another site: refused.
	req, _ := http.NewRequest("POST", h.url+"/ui/login", strings.NewReader("token="+testAdmin))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Errorf("a cross-site sign-in: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	// A node token: no session.
	nt, err := h.admin.CreateNodeToken(h.ctx, "eus-a-n0000", "")
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	nc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ = http.NewRequest("POST", h.url+"/ui/login", strings.NewReader(url.Values{"token": {nt.Secret}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = nc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !strings.Contains(resp.Header.Get("Location"), "signin=role") || len(resp.Cookies()) != 0 {
		t.Errorf("a node token's sign-in: %s, cookies %v", resp.Header.Get("Location"), resp.Cookies())
	}
	// The pages carry a policy that keeps them to this server.
	resp, err = http.Get(h.url + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self'") || !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP: %q", csp)
	}
}

// TestUIFleetView: the fleet view marks each GPU with its holder and how
// it is held, and a tenant sees every other holder as anonymous.
func TestUIFleetView(t *testing.T) {
	h := newHarness(t, testConfig, Options{RateLimit: -1})
	c := h.tenant("contoso")
	if _, err := c.Submit(h.ctx, "contoso", spec("in", 8, 1, "eastus")); err != nil {
		t.Fatal(err)
	}
	f := h.tenant("fabrikam")
	if _, err := f.Submit(h.ctx, "fabrikam", spec("theirs", 8, 1, "eastus")); err != nil {
		t.Fatal(err)
	}
	h.s.Cycle(h.ctx)
	var view api.UIFleet
	if err := c.Do(h.ctx, "GET", "/v1/ui/fleet", nil, &view); err != nil {
		t.Fatal(err)
	}
	if len(view.Tenants) != 1 || view.Tenants[0] != "contoso" || view.Nodes != 8 || view.GPUs != 64 {
		t.Fatalf("view: tenants %v, %d nodes, %d GPUs", view.Tenants, view.Nodes, view.GPUs)
	}
	own, other := 0, 0
	for _, r := range view.Regions {
		for _, z := range r.Zones {
			for _, b := range z.Blocks {
				for _, n := range b.Nodes {
					for g, hd := range n.Holder {
						switch hd {
						case 0:
							own++
							if n.Kind[g] != api.UIGuaranteed || n.Milli[g] != 1000 {
								t.Errorf("%s GPU %d: kind %d milli %d", n.ID, g, n.Kind[g], n.Milli[g])
							}
						case -2:
							other++
							if n.Kind[g] != api.UIFree {
								t.Errorf("another tenant's use shows its kind")
							}
						}
					}
				}
			}
		}
	}
	if own != 8 || other != 8 {
		t.Errorf("own %d, other %d GPUs, want 8 and 8", own, other)
	}
}
