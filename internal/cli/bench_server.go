package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
	"github.com/arbiterhq/arbiter/internal/client"
	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/loadgen"
	"github.com/arbiterhq/arbiter/internal/sched/schedbench"
	"github.com/arbiterhq/arbiter/internal/server"
	"github.com/arbiterhq/arbiter/internal/store"
	"github.com/arbiterhq/arbiter/internal/workload"
)

// serverSubmit is the suite's server case: a real server (bbolt in a
// temporary directory, the REST API on a loopback port) seeded with the
// mixed world's fleet of nodes nodes and its 50 tenants; n workloads of
// the mixed queue (the same n every run) submitted over HTTP by their
// tenants' tokens from serverClients clients at once, then one scheduling
// cycle that decides them all. A run is all of it: start, submissions,
// the cycle and its commit, and shutdown.
func serverSubmit(nodes, n int) func() (func() error, error) {
	return func() (func() error, error) {
		m, err := schedbench.NewMixed(nodes, 0, 1)
		if err != nil {
			return nil, err
		}
		cfg, err := config.Parse("mixed.yaml", []byte(m.Config()))
		if err != nil {
			return nil, err
		}
		ws := m.Draw(n)
		specs := make([]api.WorkloadSpec, n)
		for i, w := range ws {
			specs[i] = schedbench.Submission(w)
		}
		return func() error { return serveOnce(cfg, ws, specs) }, nil
	}
}

// serverClients is how many clients submit at once in the server case.
const serverClients = 16

func serveOnce(cfg *config.Config, ws []*workload.Workload, specs []api.WorkloadSpec) error {
	dir, err := os.MkdirTemp("", "arbiter-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := store.OpenBolt(filepath.Join(dir, "arbiter.db"), nil)
	if err != nil {
		return err
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := server.Seed(store.Unfenced(ctx), st, cfg, time.Now()); err != nil {
		return err
	}
	secret := make([]byte, 24)
	rand.Read(secret)
	admin := hex.EncodeToString(secret)
	s, err := server.New(ctx, server.Options{Store: st, AdminToken: admin, RateLimit: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	url := "http://" + ln.Addr().String()
	ac := client.New(url, admin)
	clients := map[string]*client.Client{}
	for _, w := range ws {
		if clients[w.Tenant] == nil {
			tok, err := ac.CreateToken(ctx, w.Tenant, "bench")
			if err != nil {
				return err
			}
			clients[w.Tenant] = client.New(url, tok.Secret)
		}
	}
	err = loadgen.ClosedLoop(len(ws), serverClients, func(i int) error {
		if _, err := clients[ws[i].Tenant].Submit(ctx, ws[i].Tenant, specs[i]); err != nil {
			return fmt.Errorf("submitting %s: %w", ws[i].Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.Cycle(ctx)
	running, err := ac.Workloads(ctx, "", "Running")
	if err != nil {
		return err
	}
	if len(running) == 0 {
		return errors.New("the cycle placed nothing")
	}
	return nil
}
