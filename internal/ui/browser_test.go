package ui_test

// The dashboard in a real browser: headless Chromium (scripts/chromium.sh
// installs Debian's package when missing) driven through the DevTools
// protocol against a real `arbiter serve` on loopback with a seeded fleet.

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/resource"
	"github.com/arbiterhq/arbiter/internal/testbin"
)

const adminToken = "ui-test-admin-token-0123456789abcdef"

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// arbiterBinary builds cmd/arbiter once per test run.
func arbiterBinary(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "arbiter-ui-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "arbiter")
		if out, err := exec.Command("go", "build", "-o", binPath, "github.com/arbiterhq/arbiter/cmd/arbiter").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		tb.Fatal(binErr)
	}
	return binPath
}

// chromium finds (or installs) the browser; in CI a missing one fails.
func chromium(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("drives a real browser")
	}
	p, err := testbin.Build("chromium")
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// serve starts `arbiter serve` on loopback with the config and returns
// its URL; it stops with the test.
func serve(tb testing.TB, config string) string {
	tb.Helper()
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		tb.Fatal(err)
	}
	addr := filepath.Join(dir, "addr")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, arbiterBinary(tb), "serve", "--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--addr-file", addr,
		"--config", cfg, "--interval", "200ms", "--policy-interval", "1s", "--log-level", "warn")
	cmd.Env = append(os.Environ(), "ARBITER_ADMIN_TOKEN="+adminToken)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cancel(); cmd.Wait() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		if b, err := os.ReadFile(addr); err == nil && len(b) > 0 {
			return "http://" + string(b)
		}
		if time.Now().After(deadline) {
			tb.Fatal("arbiter serve did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const seed = `
fleet:
  regions:
    - name: eastus
      zones:
        - name: "1"
          blocks:
            - name: eus-a
              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 4}]
            - name: eus-h
              nodes: [{sku: Standard_ND96isr_H100_v5, count: 2}]
tenants:
  - name: alpha
    quota:
      - {flavor: A100-80G, region: eastus, guaranteed: 8, limit: 32}
      - {flavor: H100-80G, region: eastus, limit: 16}
  - name: bravo
    quota:
      - {flavor: A100-80G, region: eastus, guaranteed: 8, limit: 32}
`

// browser is one headless Chromium tab with its console errors, its
// requests' URLs and the IDs of the responses it got.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
	urls   []string
	resps  []network.RequestID
}

func newBrowser(tb testing.TB, path string) *browser {
	tb.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 800),
		chromedp.NoSandbox, chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("disable-gpu", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	tb.Cleanup(func() { cancelC(); cancelA() })
	b := &browser{ctx: ctx}
	if err := chromedp.Do(ctx); err != nil { // start the browser
		tb.Fatal(err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			b.errors = append(b.errors, "exception: "+msg)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.errors = append(b.errors, "console.error: "+strings.Join(parts, " "))
			}
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError {
				b.errors = append(b.errors, "log: "+ev.Entry.Text+" "+ev.Entry.URL)
			}
		case *network.EventRequestWillBeSent:
			b.urls = append(b.urls, ev.Request.URL)
		case *network.EventResponseReceived:
			if ev.Type == network.ResourceTypeFetch || ev.Type == network.ResourceTypeXHR || ev.Type == network.ResourceTypeDocument {
				b.resps = append(b.resps, ev.RequestID)
			}
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		tb.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, log.Enable, cdp.Empty{}); err != nil {
		tb.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); err != nil {
		tb.Fatal(err)
	}
	return b
}

func (b *browser) run(tb testing.TB, actions ...chromedp.Action[chromedp.Void]) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.Fatal(err)
	}
}

// signIn signs in through the form, as a person would.
func (b *browser) signIn(tb testing.TB, base, token string) {
	tb.Helper()
	b.run(tb, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Submit(chromedp.ID("token")), chromedp.WaitVisible(chromedp.ID("nav")))
	b.waitJS(tb, "signed in", `document.getElementById("whoname").textContent !== "" && document.getElementById("signin").hidden`, 10*time.Second)
}

// visit opens a view and waits for it to be drawn.
func (b *browser) visit(tb testing.TB, base, hash string) {
	tb.Helper()
	name := strings.SplitN(strings.TrimPrefix(hash, "#/"), "/", 2)[0]
	evalJS[bool](tb, b, fmt.Sprintf(`(() => { document.getElementById("view").dataset.view = ""; if (location.hash === %[1]q) route(); else location.hash = %[1]q; return true; })()`, hash))
	b.waitJS(tb, "view "+hash+" drawn", fmt.Sprintf(`document.getElementById("view").dataset.view === %q`, name), 10*time.Second)
}

// evalJS evaluates an expression in the page.
func evalJS[T any](tb testing.TB, b *browser, js string) T {
	tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		tb.Fatalf("%s: %v", js, err)
	}
	return v
}

// waitJS polls a JavaScript condition until it is true or d passes; it
// returns how long it took.
func (b *browser) waitJS(tb testing.TB, what, js string, d time.Duration) time.Duration {
	tb.Helper()
	start := time.Now()
	for {
		// A page that is loading may not have the elements yet: an
		// exception counts as false.
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		cancel()
		if err == nil && ok {
			return time.Since(start)
		}
		if time.Since(start) > d {
			where, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.href + " " + document.body.textContent.slice(0, 300)`))
			tb.Fatalf("%s: not within %v (last: %v; page %s)", what, d, err, where)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *browser) checkClean(tb testing.TB) {
	tb.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errors {
		tb.Errorf("browser error: %s", e)
	}
	b.errors = nil
	for _, u := range b.urls {
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "data" && pu.Hostname() != "127.0.0.1") {
			tb.Errorf("a request left the loopback address: %s", u)
		}
	}
}

// bodies returns the text of every response the page got (documents,
// fetches), and forgets them.
func (b *browser) bodies(tb testing.TB) []string {
	tb.Helper()
	b.mu.Lock()
	ids := b.resps
	b.resps = nil
	b.mu.Unlock()
	var out []string
	for _, id := range ids {
		res, err := chromedp.Call(b.ctx, network.GetResponseBody, network.GetResponseBodyParams{RequestID: id})
		if err == nil { // an event stream or a page gone has no body to give
			out = append(out, string(res.Body))
		}
	}
	return out
}

var pages = []string{"#/fleet", "#/tenants", "#/queue", "#/reservations", "#/policies", "#/alerts", "#/charts"}

func screenshot(tb testing.TB, b *browser, name string) {
	tb.Helper()
	dir := os.Getenv("ARBITER_UI_SCREENSHOTS")
	if dir == "" {
		dir = tb.TempDir()
	}
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// TestDashboard: signed in as the admin, every page loads without a
// console error or a request off loopback; a workload submitted through
// the API shows in the queue within 2 s and its GPUs light up on the fleet
// when it is placed. Signed in as another tenant, no page, attribute or
// API answer carries the first tenant's names.
func TestDashboard(t *testing.T) {
	path := chromium(t)
	base := serve(t, seed)
	admin := client.New(base, adminToken)
	ctx := context.Background()
	alpha, err := admin.CreateToken(ctx, "alpha", "ui")
	if err != nil {
		t.Fatal(err)
	}
	bravo, err := admin.CreateToken(ctx, "bravo", "ui")
	if err != nil {
		t.Fatal(err)
	}
	ac := client.New(base, alpha.Secret)
	if _, err := ac.CreateReservation(ctx, "alpha", api.ReservationRequest{Name: "alpha-secret-resv", SKU: "Standard_ND96isr_H100_v5", Capacity: 1, Region: "eastus"}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ApplyPolicy(ctx, api.PolicyApply{Name: "ops", Source: "policies:\n  - name: busy\n    when: {metric: utilization, above: 1%}\n    then: [{type: notify, message: the fleet is in use}]\n"}); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t, path)
	b.signIn(t, base, adminToken)
	for _, p := range pages {
		b.visit(t, base, p)
		screenshot(t, b, "admin-"+strings.TrimPrefix(p, "#/"))
	}
	b.checkClean(t)

	// Live: a workload submitted now appears in the queue within 2 s.
	b.visit(t, base, "#/queue")
	spec := api.WorkloadSpec{Name: "alpha-secret-job", GPUs: api.GPUs(resource.GPUs(8)), Replicas: 2, Priority: "high", Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}
	big := spec
	big.Name, big.Replicas = "alpha-secret-waits", 8 // more than alpha's limit: it stays pending
	if _, err := ac.Submit(ctx, "alpha", big); err != nil {
		t.Fatal(err)
	}
	took := b.waitJS(t, "the pending workload in the queue", `document.getElementById("view").textContent.includes("alpha-secret-waits")`, 2*time.Second)
	t.Logf("the queue showed a submitted workload after %v", took)
	screenshot(t, b, "admin-queue-live")

	// And its GPUs light up on the fleet once placed: the cells of the
	// node it runs on take alpha's colour.
	b.visit(t, base, "#/fleet")
	if _, err := ac.Submit(ctx, "alpha", spec); err != nil {
		t.Fatal(err)
	}
	lit := `(() => {
	  const f = state.fleet, L = state.layout; if (!f || !L) return false;
	  const ti = f.tenants.indexOf("alpha"); if (ti < 0) return false;
	  const g = document.getElementById("fleet").getContext("2d"), dpr = window.devicePixelRatio || 1;
	  const want = PALETTE[ti % PALETTE.length];
	  for (const s of L.nodes) {
	    const k = s.n.holder.indexOf(ti); if (k < 0) continue;
	    // The cell's lower right pixel: the fill, clear of the marks.
	    const x = s.x + k * (CELL + GAP) + CELL - 1, y = s.y + CELL - 1;
	    const p = g.getImageData(Math.floor(x * dpr), Math.floor(y * dpr), 1, 1).data;
	    const hex = "#" + [p[0], p[1], p[2]].map((v) => v.toString(16).padStart(2, "0")).join("");
	    if (hex === want) return true;
	  }
	  return false;
	})()`
	took = b.waitJS(t, "alpha's GPUs lit on the fleet", lit, 5*time.Second)
	t.Logf("the fleet showed the placed workload's GPUs after %v", took)
	screenshot(t, b, "admin-fleet-live")
	// The workload's page: its placement and events.
	b.visit(t, base, "#/workload/alpha/alpha-secret-job")
	b.waitJS(t, "the workload's page with its events", `(() => { const v = document.getElementById("view").textContent;
	  return v.includes("WorkloadSubmitted") && v.includes("WorkloadPlaced") && v.includes("replica 1: "); })()`, 5*time.Second)
	screenshot(t, b, "admin-workload")
	b.checkClean(t)

	// bravo sees none of alpha's names.
	b2 := newBrowser(t, path)
	b2.signIn(t, base, bravo.Secret)
	for _, p := range pages {
		b2.visit(t, base, p)
		html := evalJS[string](t, b2, `document.documentElement.outerHTML`)
		for _, secret := range []string{"alpha-secret", "alpha"} {
			if strings.Contains(html, secret) {
				t.Errorf("signed in as bravo, page %s shows %q", p, secret)
			}
		}
		for _, body := range b2.bodies(t) {
			if strings.Contains(body, "alpha") {
				t.Errorf("signed in as bravo, page %s got an answer naming alpha: %.200s", p, body)
			}
		}
		screenshot(t, b2, "tenant-"+strings.TrimPrefix(strings.ReplaceAll(p, "/", "-"), "#-"))
	}
	b2.checkClean(t)
}

// TestDashboardSignIn: a bad token is refused with a message and no
// session; a node token has no dashboard; the session cookie is HttpOnly
// and the token appears in no URL.
func TestDashboardSignIn(t *testing.T) {
	path := chromium(t)
	base := serve(t, seed)
	admin := client.New(base, adminToken)
	node, err := admin.CreateNodeToken(context.Background(), "eus-a-n0000", "")
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, path)
	b.run(t, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("token")))
	if shown := evalJS[bool](t, b, `["nav", "who"].some((id) => getComputedStyle(document.getElementById(id)).display !== "none")`); shown {
		t.Error("a signed-out page shows the views or the sign-out button")
	}
	for tok, want := range map[string]string{"arb_not-a-token": "Unknown or revoked token.", node.Secret: "Node and metrics tokens have no dashboard"} {
		b.run(t, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), tok), chromedp.Submit(chromedp.ID("token")))
		b.waitJS(t, "the sign-in error", fmt.Sprintf(`document.getElementById("signinerr").textContent.includes(%q)`, want), 5*time.Second)
	}
	b.signIn(t, base, adminToken)
	res, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	cookies := res.Cookies
	if len(cookies) != 1 || !cookies[0].HTTPOnly || cookies[0].SameSite != network.CookieSameSiteStrict || strings.Contains(cookies[0].Value, adminToken) {
		t.Errorf("cookies: %+v", cookies)
	}
	if js := evalJS[string](t, b, `document.cookie`); js != "" {
		t.Errorf("script can read the cookie: %q", js)
	}
	b.mu.Lock()
	for _, u := range b.urls {
		if strings.Contains(u, adminToken) || strings.Contains(u, node.Secret) {
			t.Errorf("a token in a URL: %s", u)
		}
	}
	b.mu.Unlock()
}

// BenchmarkDashboardFleet10k is the time from navigation to the fleet
// view drawn (its data fetched, laid out and painted) with 10,000 nodes
// (80,000 GPUs), in headless Chromium; ms/render is the draw alone.
//
//	go test ./internal/ui -run XXX -bench Fleet10k -benchtime 5x
func BenchmarkDashboardFleet10k(b *testing.B) {
	path := chromium(b)
	var cfg strings.Builder
	cfg.WriteString("fleet:\n  regions:\n    - name: eastus\n      zones:\n        - name: \"1\"\n          blocks:\n")
	for i := range 40 {
		fmt.Fprintf(&cfg, "            - name: blk-%02d\n              nodes: [{sku: Standard_ND96amsr_A100_v4, count: 250}]\n", i)
	}
	cfg.WriteString("tenants:\n  - name: alpha\n    quota:\n      - {flavor: A100-80G, region: eastus, limit: 80000}\n")
	base := serve(b, cfg.String())
	ac := client.New(base, adminToken)
	for i := range 200 {
		if _, err := ac.Submit(context.Background(), "alpha", api.WorkloadSpec{Name: fmt.Sprintf("w%03d", i), GPUs: api.GPUs(resource.GPUs(8)), Replicas: 20,
			Flavors: []string{"A100-80G"}, Regions: []string{"eastus"}}); err != nil {
			b.Fatal(err)
		}
	}
	br := newBrowser(b, path)
	br.signIn(b, base, adminToken)
	bytes := evalJS[int](b, br, `fetch("/v1/ui/fleet").then(r => r.text()).then(t => t.length)`)
	var drawMs float64
	b.ResetTimer()
	for b.Loop() {
		br.run(b, chromedp.Navigate("about:blank"), chromedp.Navigate(base+"/ui/#/fleet"))
		br.waitJS(b, "the fleet drawn", `document.getElementById("view").dataset.view === "fleet"`, 30*time.Second)
		drawMs += evalJS[float64](b, br, `state.renderMs`)
	}
	b.StopTimer()
	if n := evalJS[int](b, br, `state.fleet.nodes`); n != 10000 {
		b.Fatalf("drew %d nodes", n)
	}
	b.ReportMetric(drawMs/float64(b.N), "ms/render")
	b.ReportMetric(float64(bytes)/1e6, "MB/fleet-json")
}
