package server

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

var errEnough = errors.New("enough")

// TestEventsSSE reads events from a real HTTP server as server-sent
// events: the backlog, then events committed while the stream is open; a
// tenant's stream shows only its own; a reconnect resumes after
// Last-Event-ID.
func TestEventsSSE(t *testing.T) {
	h := newHarness(t, testConfig, Options{})
	ctx, cancel := context.WithTimeout(h.ctx, 15*time.Second)
	defer cancel()
	contoso, fabrikam := h.tenant("contoso"), h.tenant("fabrikam")
	if _, err := contoso.Submit(ctx, "contoso", spec("first", 1, 1)); err != nil {
		t.Fatal(err)
	}

	type res struct {
		evs  []api.Event
		last int64
		err  error
	}
	follow := func(c interface {
		StreamEvents(context.Context, int64, func(api.Event) error) (int64, error)
	}, after int64, n int) chan res {
		out := make(chan res, 1)
		go func() {
			var r res
			r.last, r.err = c.StreamEvents(ctx, after, func(e api.Event) error {
				r.evs = append(r.evs, e)
				if len(r.evs) == n {
					return errEnough
				}
				return nil
			})
			out <- r
		}()
		return out
	}
	adminC := follow(h.admin, 0, 4)
	fabC := follow(fabrikam, 0, 1)
	// Committed while the streams are open (or before they start: the
	// backlog covers both).
	if _, err := contoso.Submit(ctx, "contoso", spec("second", 1, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := fabrikam.Submit(ctx, "fabrikam", spec("fab", 1, 1)); err != nil {
		t.Fatal(err)
	}
	r := <-adminC
	if !errors.Is(r.err, errEnough) || len(r.evs) != 4 {
		t.Fatalf("admin stream: %+v", r)
	}
	var objs []string
	for i, e := range r.evs {
		if i > 0 && e.Seq <= r.evs[i-1].Seq {
			t.Fatalf("sequence not increasing: %+v", r.evs)
		}
		objs = append(objs, e.Object)
	}
	if strings.Join(objs, " ") != "config workloads/contoso/first workloads/contoso/second workloads/fabrikam/fab" {
		t.Fatalf("admin saw %v", objs)
	}
	f := <-fabC
	if len(f.evs) != 1 || f.evs[0].Tenant != "fabrikam" || f.evs[0].Object != "workloads/fabrikam/fab" {
		t.Fatalf("fabrikam saw %+v", f.evs)
	}

	// Raw protocol: headers, id/event/data lines, resume after Last-Event-ID.
	req, _ := http.NewRequestWithContext(ctx, "GET", h.url+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+testAdmin)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", itoa(r.evs[2].Seq))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var lines []string
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "id:") || strings.HasPrefix(l, "event:") {
			lines = append(lines, l)
		}
		if len(lines) == 2 {
			break
		}
	}
	if want := []string{"id: " + itoa(r.evs[3].Seq), "event: " + r.evs[3].Type}; strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("resumed stream starts %q, want %q", lines, want)
	}
	// Without the Accept header the same route still long-polls JSON.
	if ev, err := h.admin.Events(ctx, r.evs[2].Seq, 0, 10); err != nil || len(ev.Items) == 0 || ev.Items[0].Seq != r.evs[3].Seq {
		t.Fatalf("long poll: %+v %v", ev, err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
