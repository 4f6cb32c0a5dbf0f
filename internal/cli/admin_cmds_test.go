package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/config"
	"github.com/arbiterhq/arbiter/internal/server"
	"github.com/arbiterhq/arbiter/internal/store"
)

const snapAdmin = "snapshot-test-admin-token-0123456789"

var snapClock = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

func openBoltT(t *testing.T, path string) *store.BoltStore {
	t.Helper()
	st, err := store.OpenBolt(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func newSnapServer(t *testing.T, st store.Store) *server.Server {
	t.Helper()
	s, err := server.New(context.Background(), server.Options{Store: st, AdminToken: snapAdmin, Clock: func() time.Time { return snapClock },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func do(t *testing.T, h http.Handler, method, path, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+snapAdmin)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// populateServer fills a bbolt store at path the way a server does: the
// example fleet, tenants, reservations and workloads seeded, a tenant
// token and a workload made through the API, scheduling cycles run
// until work is placed (placements, events).
func populateServer(t *testing.T, path string) {
	t.Helper()
	ctx := context.Background()
	st := openBoltT(t, path)
	defer st.Close()
	cfg, err := config.Load("../../examples/schedule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := server.Seed(ctx, st, cfg, snapClock); err != nil {
		t.Fatal(err)
	}
	s := newSnapServer(t, st)
	h := s.Handler()
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/tenants/contoso/tokens", `{"name":"ci"}`},
		{"POST", "/v1/tenants/contoso/workloads", `{"name":"snap-job","gpus":8,"flavors":["A100-80G"],"regions":["westus2"]}`},
	} {
		if code, body := do(t, h, c.method, c.path, c.body); code != http.StatusCreated {
			t.Fatalf("%s %s: %d %s", c.method, c.path, code, body)
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(rctx); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		running := 0
		err := st.View(ctx, func(tx store.ReadTx) error {
			ws, err := store.List[store.Workload](tx, "")
			for _, w := range ws {
				if w.State == store.StateRunning {
					running++
				}
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if running > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no workload placed within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}

// dumpStore reads every key of every bucket of the bbolt store at path.
func dumpStore(t *testing.T, st store.Store) map[store.Kind]map[string]string {
	t.Helper()
	out := map[store.Kind]map[string]string{}
	err := st.View(context.Background(), func(tx store.ReadTx) error {
		for _, k := range store.SnapshotBuckets() {
			m := map[string]string{}
			tx.ScanRaw(k, "", "", func(key string, data []byte) bool { m[key] = string(data); return true })
			out[k] = m
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func dumpPath(t *testing.T, path string) map[store.Kind]map[string]string {
	t.Helper()
	st := openBoltT(t, path)
	defer st.Close()
	return dumpStore(t, st)
}

// getAnswers opens a server on the store at path and records its answers
// to GETs of every kind of object.
func getAnswers(t *testing.T, path string) map[string]string {
	t.Helper()
	st := openBoltT(t, path)
	defer st.Close()
	return storeAnswers(t, st)
}

// storeAnswers opens a server on st and records its answers to GETs of
// every kind of object.
func storeAnswers(t *testing.T, st store.Store) map[string]string {
	t.Helper()
	h := newSnapServer(t, st).Handler()
	out := map[string]string{}
	for _, p := range []string{"/v1/tenants", "/v1/nodes?limit=1000", "/v1/workloads", "/v1/tokens", "/v1/events?after=0&limit=1000",
		"/v1/tenants/fabrikam/reservations", "/v1/usage", "/v1/partitions", "/v1/policies", "/v1/alerts", "/v1/regions",
		"/v1/tenants/contoso/workloads/snap-job", "/v1/tenants/contoso/workloads/snap-job/why"} {
		code, body := do(t, h, "GET", p, "")
		if code != http.StatusOK && !strings.HasSuffix(p, "/why") {
			t.Fatalf("GET %s: %d %s", p, code, body)
		}
		out[p] = fmt.Sprintf("%d %s", code, body)
	}
	return out
}

// TestSnapshotCLIRoundTrip: a server-populated store saved with "admin
// snapshot save" and restored with "admin snapshot restore" into a new
// directory holds the same bytes under every key, and a server opened on
// it answers the same GETs.
func TestSnapshotCLIRoundTrip(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	if err := os.MkdirAll(a, 0o700); err != nil {
		t.Fatal(err)
	}
	populateServer(t, filepath.Join(a, "arbiter.db"))
	file := filepath.Join(dir, "snap.jsonl")
	out, errOut, code := run(t, "admin", "snapshot", "save", "--data", a, file)
	if code != 0 {
		t.Fatalf("save: exit %d: %s", code, errOut)
	}
	want := dumpPath(t, filepath.Join(a, "arbiter.db"))
	if !regexp.MustCompile(fmt.Sprintf(`\nworkloads +%d\n`, len(want[store.KindWorkload]))).MatchString(out) || !strings.Contains(out, "revision ") {
		t.Errorf("save printed %q; want the keys per bucket and the revision", out)
	}
	for _, k := range []store.Kind{store.KindTenant, store.KindNode, store.KindWorkload, store.KindToken, store.KindEvent, store.KindReservation, store.KindMeta} {
		if len(want[k]) == 0 {
			t.Fatalf("the populated store has no %s: the test does not cover them", k)
		}
	}
	out, errOut, code = run(t, "admin", "snapshot", "restore", "--data", b, file)
	if code != 0 {
		t.Fatalf("restore: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "restored "+file) {
		t.Errorf("restore printed %q", out)
	}
	if got := dumpPath(t, filepath.Join(b, "arbiter.db")); !reflect.DeepEqual(got, want) {
		for k := range want {
			if !reflect.DeepEqual(got[k], want[k]) {
				t.Errorf("bucket %s differs after restore: %d keys, want %d", k, len(got[k]), len(want[k]))
			}
		}
	}
	ga, gb := getAnswers(t, filepath.Join(a, "arbiter.db")), getAnswers(t, filepath.Join(b, "arbiter.db"))
	for p, w := range ga {
		if gb[p] != w {
			t.Errorf("GET %s on the restored store:\n%s\nwant\n%s", p, gb[p], w)
		}
	}
	// A second restore into the now full store is refused.
	_, errOut, code = run(t, "admin", "snapshot", "restore", "--data", b, file)
	if code == 0 || !strings.Contains(errOut, "not empty") {
		t.Errorf("restore into a full store: exit %d, %q", code, errOut)
	}
	// Saving over an existing file is refused.
	_, errOut, code = run(t, "admin", "snapshot", "save", "--data", a, file)
	if code == 0 || !strings.Contains(errOut, "exists") {
		t.Errorf("save over a file: exit %d, %q", code, errOut)
	}
}

// TestSnapshotCLIRefusesDamage: a corrupted or truncated snapshot is
// refused before the target is touched, with the line and byte offset.
func TestSnapshotCLIRefusesDamage(t *testing.T) {
	dir := t.TempDir()
	st := openBoltT(t, filepath.Join(dir, "src.db"))
	err := st.Update(context.Background(), func(tx store.WriteTx) error {
		for i := range 20 {
			if err := store.Put(tx, &store.Tenant{Name: fmt.Sprintf("t%02d", i)}, store.MustNotExist); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := store.Save(context.Background(), st, &buf); err != nil {
		t.Fatal(err)
	}
	st.Close()
	good := buf.Bytes()
	flipped := bytes.Clone(good)
	flipped[len(good)/2] ^= 1
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", good[:len(good)*2/3], "truncated"},
		{"corrupted", flipped, "record"},
		{"empty", nil, "empty"},
	} {
		file := filepath.Join(dir, c.name+".jsonl")
		if err := os.WriteFile(file, c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, "target-"+c.name)
		_, errOut, code := run(t, "admin", "snapshot", "restore", "--data", target, file)
		if code == 0 || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "byte ") || !strings.Contains(errOut, "nothing was written") {
			t.Errorf("%s: exit %d, %q; want a refusal naming the line and byte", c.name, code, errOut)
		}
		if _, err := os.Stat(target); err == nil {
			t.Errorf("%s: the refused restore created %s", c.name, target)
		}
	}
}

// TestSnapshotCLIRefusesHeldStore: a bbolt store a server holds (its file
// lock) is refused, saying why.
func TestSnapshotCLIRefusesHeldStore(t *testing.T) {
	old := boltLockWait
	boltLockWait = 50 * time.Millisecond
	t.Cleanup(func() { boltLockWait = old })
	dir := t.TempDir()
	st := openBoltT(t, filepath.Join(dir, "arbiter.db"))
	defer st.Close()
	_, errOut, code := run(t, "admin", "snapshot", "save", "--data", dir, filepath.Join(dir, "s.jsonl"))
	if code == 0 || !strings.Contains(errOut, "in use") {
		t.Errorf("save of a held store: exit %d, %q", code, errOut)
	}
	_, errOut, code = run(t, "admin", "migrate", "--from", "bbolt:"+dir, "--to", "bbolt:"+filepath.Join(dir, "copy.db"))
	if code == 0 || !strings.Contains(errOut, "in use") {
		t.Errorf("migrate of a held store: exit %d, %q", code, errOut)
	}
}

// TestMigrateBoltToBolt: "admin migrate" copies every key; the same
// store twice, a missing source and bad specs are refused naming the flag.
func TestMigrateBoltToBolt(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "a", "arbiter.db")
	if err := os.MkdirAll(filepath.Dir(src), 0o700); err != nil {
		t.Fatal(err)
	}
	populateServer(t, src)
	out, errOut, code := run(t, "admin", "migrate", "--from", "bbolt:"+filepath.Dir(src), "--to", "bbolt:"+filepath.Join(dir, "b")+"/")
	if code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "copied bbolt:"+src) || !strings.Contains(out, "tokens") {
		t.Errorf("migrate printed %q", out)
	}
	if got, want := dumpPath(t, filepath.Join(dir, "b", "arbiter.db")), dumpPath(t, src); !reflect.DeepEqual(got, want) {
		t.Error("the migrated store differs")
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", "bbolt:" + src, "--to", "bbolt:" + filepath.Dir(src)}, "name one store"},
		{[]string{"--from", "bbolt:" + filepath.Join(dir, "nope.db"), "--to", "bbolt:" + filepath.Join(dir, "c.db")}, "no store at"},
		{[]string{"--from", "bbolt:" + src, "--to", "bbolt:" + filepath.Join(dir, "b")}, "not empty"},
		{[]string{"--from", "bbolt:" + src, "--to", "zk:foo"}, `--to: bad store spec "zk:foo": unknown store "zk"`},
		{[]string{"--from", "bbolt:", "--to", "bbolt:x"}, "--from: bad store spec"},
		{[]string{"--from", src, "--to", "bbolt:x"}, "want bbolt:PATH or etcd:URL"},
		{[]string{"--from", "bbolt:" + src, "--to", "etcd:ftp://10.0.0.1:2379"}, `--to: bad store spec: etcd endpoint "ftp://10.0.0.1:2379"`},
		{[]string{"--from", "bbolt:" + src, "--to", "etcd:http://u:secret@10.0.0.1:2379"}, "etcd endpoint"},
		{[]string{"--from", "bbolt:" + src, "--to", "etcd:http://10.0.0.1:2379", "--etcd-prefix", "arbiter"}, "--etcd-prefix"},
		{[]string{"--from", "bbolt:" + src}, "pass --from and --to"},
	} {
		_, errOut, code := run(t, append([]string{"admin", "migrate"}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("migrate %v: exit %d, %q; want %q", c.args, code, errOut, c.want)
		}
	}
	// --force replaces the target's state.
	if _, errOut, code := run(t, "admin", "migrate", "--force", "--from", "bbolt:"+src, "--to", "bbolt:"+filepath.Join(dir, "b")); code != 0 {
		t.Errorf("migrate --force: exit %d, %s", code, errOut)
	}
}

// TestSnapshotCLIFlags: save and restore need exactly one store.
func TestSnapshotCLIFlags(t *testing.T) {
	t.Setenv("ARBITER_DATA", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"save", "f"}, "pass --data DIR (bbolt) or --etcd-endpoints URLS (etcd)"},
		{[]string{"save", "--data", "d", "--etcd-endpoints", "http://127.0.0.1:2379", "f"}, "not both"},
		{[]string{"restore", "--etcd-endpoints", "127.0.0.1:2379", "f"}, "--etcd-endpoints: bad store spec"},
		{[]string{"save", "--data", t.TempDir()}, "accepts 1 arg"},
	} {
		_, errOut, code := run(t, append([]string{"admin", "snapshot"}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("snapshot %v: exit %d, %q; want %q", c.args, code, errOut, c.want)
		}
	}
}

// FuzzParseStoreSpec: any spec parses or is refused with ErrBadStoreSpec
// or a prefix error; what parses is a bbolt path or http(s) endpoints.
func FuzzParseStoreSpec(f *testing.F) {
	for _, s := range []string{"bbolt:/var/lib/arbiter", "etcd:http://10.0.0.1:2379,https://h:2379", "etcd:", "bbolt:", "zk:x", "etcd:http://[::1]:2379/", "etcd:%zz", ":"} {
		f.Add(s, "/arbiter/")
	}
	f.Add("etcd:http://a:1", "no-slash")
	f.Fuzz(func(t *testing.T, spec, prefix string) {
		s, err := parseStoreSpec("--to", spec, prefix)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--to: ") && !strings.HasPrefix(err.Error(), "--etcd-prefix: ") {
				t.Fatalf("error %q does not name the flag", err)
			}
			return
		}
		switch s.kind {
		case "bbolt":
			if s.path == "" {
				t.Fatal("bbolt spec without a path")
			}
		case "etcd":
			if len(s.endpoints) == 0 || !strings.HasPrefix(s.prefix, "/") || !strings.HasSuffix(s.prefix, "/") {
				t.Fatalf("etcd spec %+v", s)
			}
			for _, e := range s.endpoints {
				if !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
					t.Fatalf("endpoint %q", e)
				}
			}
		default:
			t.Fatalf("kind %q", s.kind)
		}
	})
}

// TestServeRefusesHalfRestored: serve does not run on a store a restore
// left half done (the restore marker), and says how to finish it.
func TestServeRefusesHalfRestored(t *testing.T) {
	dir := t.TempDir()
	src := openBoltT(t, filepath.Join(dir, "src.db"))
	var buf bytes.Buffer
	err := src.Update(context.Background(), func(tx store.WriteTx) error {
		return store.Put(tx, &store.Tenant{Name: "contoso"}, store.MustNotExist)
	})
	if err == nil {
		err = store.Save(context.Background(), src, &buf)
	}
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	dst := openBoltT(t, filepath.Join(data, "arbiter.db"))
	cut := buf.Bytes()[:buf.Len()-10]
	if err := store.Restore(context.Background(), dst, bytes.NewReader(cut)); !errors.Is(err, store.ErrRestoreIncomplete) {
		t.Fatalf("restore of a cut stream: %v", err)
	}
	dst.Close()
	_, errOut, code := run(t, "serve", "--data", data, "--listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(errOut, "half-done restore") || !strings.Contains(errOut, "restore --force") {
		t.Errorf("serve on a half-restored store: exit %d, %q", code, errOut)
	}
}
