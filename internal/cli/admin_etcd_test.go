package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/internal/cluster"
	"github.com/arbiterhq/arbiter/internal/etcdtest"
	"github.com/arbiterhq/arbiter/internal/store"
)

// TestMigrateBoltEtcdBolt: a server-populated bbolt store migrated to etcd
// and back (and saved from etcd, restored into bbolt) holds the same bytes
// under every key at each step, and servers on the etcd copy and on the
// copy back answer the same GETs as one on the original.
func TestMigrateBoltEtcdBolt(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ep := strings.Join(c.Endpoints(), ",")
	const prefix = "/snaptest/"
	dir := t.TempDir()
	src := filepath.Join(dir, "a.db")
	populateServer(t, src)
	wantGET := getAnswers(t, src)
	want := dumpPath(t, src) // after getAnswers's server, which writes too

	out, errOut, code := run(t, "admin", "migrate", "--from", "bbolt:"+src, "--to", "etcd:"+ep, "--etcd-prefix", prefix)
	if code != 0 {
		t.Fatalf("migrate to etcd: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "copied bbolt:"+src+" to etcd:"+ep+" (prefix "+prefix+")") {
		t.Errorf("migrate printed %q", out)
	}
	est, err := store.OpenEtcd(context.Background(), store.EtcdOptions{Endpoints: c.Endpoints(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if got := dumpStore(t, est); !reflect.DeepEqual(got, want) {
		for k := range want {
			if !reflect.DeepEqual(got[k], want[k]) {
				t.Errorf("etcd bucket %s differs: %d keys, want %d", k, len(got[k]), len(want[k]))
			}
		}
	}
	est.Close()

	// Back to bbolt, by migrate and by snapshot save + restore.
	back := filepath.Join(dir, "back", "arbiter.db")
	if _, errOut, code := run(t, "admin", "migrate", "--from", "etcd:"+ep, "--etcd-prefix", prefix, "--to", "bbolt:"+back); code != 0 {
		t.Fatalf("migrate to bbolt: exit %d: %s", code, errOut)
	}
	file := filepath.Join(dir, "etcd.snap")
	if _, errOut, code := run(t, "admin", "snapshot", "save", "--etcd-endpoints", ep, "--etcd-prefix", prefix, file); code != 0 {
		t.Fatalf("save from etcd: exit %d: %s", code, errOut)
	}
	restored := filepath.Join(dir, "restored")
	if _, errOut, code := run(t, "admin", "snapshot", "restore", "--data", restored, file); code != 0 {
		t.Fatalf("restore: exit %d: %s", code, errOut)
	}
	for _, p := range []string{back, filepath.Join(restored, "arbiter.db")} {
		if got := dumpPath(t, p); !reflect.DeepEqual(got, want) {
			t.Errorf("%s differs from the original", p)
		}
	}
	// Same answers from a server on the etcd copy and on the copy back.
	est, err = store.OpenEtcd(context.Background(), store.EtcdOptions{Endpoints: c.Endpoints(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	etcdGET := storeAnswers(t, est)
	est.Close()
	backGET := getAnswers(t, back)
	for p, w := range wantGET {
		if etcdGET[p] != w {
			t.Errorf("GET %s on etcd:\n%s\nwant\n%s", p, etcdGET[p], w)
		}
		if backGET[p] != w {
			t.Errorf("GET %s on the copy back:\n%s\nwant\n%s", p, backGET[p], w)
		}
	}

	// A non-empty etcd prefix is refused as a target.
	_, errOut, code = run(t, "admin", "snapshot", "restore", "--etcd-endpoints", ep, "--etcd-prefix", prefix, file)
	if code == 0 || !strings.Contains(errOut, "not empty") {
		t.Errorf("restore into a full etcd prefix: exit %d, %q", code, errOut)
	}
}

// TestAdminRefusesServedEtcd: while an arbiter replica is registered on
// the prefix, the admin commands refuse it, naming the replica; once it
// leaves they work.
func TestAdminRefusesServedEtcd(t *testing.T) {
	c := etcdtest.Start(t, 1)
	ep := strings.Join(c.Endpoints(), ",")
	const prefix = "/served/"
	cli := c.Client(t)
	m, err := cluster.Join(context.Background(), cli, cluster.Options{Prefix: prefix, Advertise: "http://127.0.0.1:7070", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "s.snap")
	src := filepath.Join(t.TempDir(), "src.db")
	openBoltT(t, src).Close()
	for _, args := range [][]string{
		{"snapshot", "save", "--etcd-endpoints", ep, "--etcd-prefix", prefix, file},
		{"migrate", "--from", "etcd:" + ep, "--etcd-prefix", prefix, "--to", "bbolt:" + filepath.Join(t.TempDir(), "x.db")},
		{"migrate", "--to", "etcd:" + ep, "--etcd-prefix", prefix, "--from", "bbolt:" + src},
	} {
		_, errOut, code := run(t, append([]string{"admin"}, args...)...)
		if code == 0 || !strings.Contains(errOut, "arbiters serve etcd prefix "+prefix+" (http://127.0.0.1:7070)") {
			t.Errorf("admin %v with a replica registered: exit %d, %q", args, code, errOut)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := run(t, "admin", "snapshot", "save", "--etcd-endpoints", ep, "--etcd-prefix", prefix, file); code != 0 {
		t.Errorf("save after the replica left: exit %d, %s", code, errOut)
	} else if !strings.Contains(out, fmt.Sprintf("saved etcd:%s (prefix %s)", ep, prefix)) {
		t.Errorf("save printed %q", out)
	}
}
