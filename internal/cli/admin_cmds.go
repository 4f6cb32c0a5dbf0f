package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	bolt "go.etcd.io/bbolt"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/arbiterhq/arbiter/internal/store"
)

// The admin commands work on a store directly, not through a server:
// snapshots (save, restore) and migration between stores. They need a
// store no arbiter is serving (bbolt's file lock tells; on etcd the
// operator must stop the arbiters).

// defaultEtcdPrefix is the key prefix arbiter uses on etcd.
const defaultEtcdPrefix = "/arbiter/"

// boltLockWait is how long the admin commands wait for a bbolt file's
// lock before they say that a server holds it.
var boltLockWait = time.Second

// storeSpec names a store: bbolt at a path or etcd at endpoints.
type storeSpec struct {
	kind      string // "bbolt" or "etcd"
	path      string // bbolt: the database file
	endpoints []string
	prefix    string // etcd
	tls       *tls.Config
}

// ErrBadStoreSpec: a store spec that does not parse.
var ErrBadStoreSpec = errors.New("bad store spec")

func (s storeSpec) String() string {
	if s.kind == "bbolt" {
		return "bbolt:" + s.path
	}
	return "etcd:" + strings.Join(s.endpoints, ",") + " (prefix " + s.prefix + ")"
}

// same reports whether two specs name one store.
func (s storeSpec) same(o storeSpec) bool {
	if s.kind != o.kind {
		return false
	}
	if s.kind == "bbolt" {
		return s.path == o.path
	}
	if s.prefix != o.prefix {
		return false
	}
	for _, e := range s.endpoints {
		if slices.Contains(o.endpoints, e) {
			return true
		}
	}
	return false
}

// parseStoreSpec parses bbolt:PATH (a database file, or a data directory
// holding arbiter.db) or etcd:URL[,URL...]; flag names the flag in errors.
func parseStoreSpec(flag, spec, prefix string) (storeSpec, error) {
	kind, rest, ok := strings.Cut(spec, ":")
	switch {
	case !ok:
		return storeSpec{}, fmt.Errorf("%s: %w %q: want bbolt:PATH or etcd:URL[,URL...]", flag, ErrBadStoreSpec, spec)
	case kind == "bbolt":
		if rest == "" {
			return storeSpec{}, fmt.Errorf("%s: %w %q: bbolt: needs a path", flag, ErrBadStoreSpec, spec)
		}
		return storeSpec{kind: "bbolt", path: boltPath(rest)}, nil
	case kind == "etcd":
		eps, err := parseEndpoints(rest)
		if err != nil {
			return storeSpec{}, fmt.Errorf("%s: %w", flag, err)
		}
		p, err := checkPrefix(prefix)
		if err != nil {
			return storeSpec{}, err
		}
		return storeSpec{kind: "etcd", endpoints: eps, prefix: p}, nil
	}
	return storeSpec{}, fmt.Errorf("%s: %w %q: unknown store %q, want bbolt or etcd", flag, ErrBadStoreSpec, spec, kind)
}

// boltPath is the database file of a path: a directory (existing, or
// named with a trailing slash) means its arbiter.db, as serve --data.
func boltPath(p string) string {
	if strings.HasSuffix(p, "/") {
		return filepath.Join(p, "arbiter.db")
	}
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return filepath.Join(p, "arbiter.db")
	}
	return filepath.Clean(p)
}

// parseEndpoints parses URL[,URL...]: http or https URLs with a host and
// nothing after it.
func parseEndpoints(s string) ([]string, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: no etcd endpoints", ErrBadStoreSpec)
	}
	var out []string
	for _, e := range strings.Split(s, ",") {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("%w: etcd endpoint %q: want a URL such as http://10.0.0.1:2379", ErrBadStoreSpec, e)
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// checkPrefix checks an --etcd-prefix: absolute, printable, bounded.
func checkPrefix(p string) (string, error) {
	if p == "" {
		p = defaultEtcdPrefix
	}
	if !strings.HasPrefix(p, "/") || len(p) > 256 || strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("--etcd-prefix: %q: want a key prefix such as /arbiter/ (starting with /, at most 256 printable characters)", p)
	}
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p, nil
}

// openSpec opens a store. A source must exist (create false); a bbolt
// file held by a server is refused.
func openSpec(ctx context.Context, s storeSpec, create bool) (store.Store, error) {
	switch s.kind {
	case "bbolt":
		if !create {
			if _, err := os.Stat(s.path); err != nil {
				return nil, fmt.Errorf("no store at %s: %w", s.path, err)
			}
		} else if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
			return nil, err
		}
		st, err := store.OpenBolt(s.path, &store.BoltOptions{Timeout: boltLockWait})
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("%w: %s is locked by the arbiter serving it: stop it first", ErrStoreInUse, s.path)
		}
		return st, err
	case "etcd":
		return openAdminEtcd(ctx, s)
	}
	return nil, fmt.Errorf("unknown store kind %q", s.kind)
}

// openAdminEtcd opens an etcd store that no arbiter serves: replicas
// register under PREFIX replicas/ with a lease (internal/cluster), so a
// key there is a live arbiter (or one killed less than its election TTL
// ago).
func openAdminEtcd(ctx context.Context, s storeSpec) (store.Store, error) {
	cli, err := newEtcdClient(ctx, s.endpoints, s.tls)
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(s.endpoints, ","), err)
	}
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	resp, err := cli.Get(gctx, s.prefix+"replicas/", clientv3.WithPrefix(), clientv3.WithLimit(10))
	cancel()
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(s.endpoints, ","), err)
	}
	if len(resp.Kvs) > 0 {
		cli.Close()
		var urls []string
		for _, kv := range resp.Kvs {
			urls = append(urls, string(kv.Value))
		}
		return nil, fmt.Errorf("%w: arbiters serve etcd prefix %s (%s): stop them first", ErrStoreInUse, s.prefix, strings.Join(urls, ", "))
	}
	st, err := store.OpenEtcd(ctx, store.EtcdOptions{Client: cli, Prefix: s.prefix})
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("etcd %s: %w", strings.Join(s.endpoints, ","), err)
	}
	return &closingStore{EtcdStore: st, cli: cli}, nil
}

// ErrStoreInUse: an arbiter serves the store.
var ErrStoreInUse = errors.New("the store is in use")

// storeFlags are --data or --etcd-endpoints (with --etcd-prefix).
type storeFlags struct {
	data, endpoints, prefix string
	tls                     etcdTLSFlags
}

func (f *storeFlags) bind(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.data, "data", os.Getenv("ARBITER_DATA"), "state directory of a bbolt store, as serve --data (env ARBITER_DATA)")
	fl.StringVar(&f.endpoints, "etcd-endpoints", "", "URL[,URL...] of the etcd cluster of an etcd store")
	fl.StringVar(&f.prefix, "etcd-prefix", defaultEtcdPrefix, "key prefix of the etcd store")
	f.tls.bind(fl)
}

func (f *storeFlags) spec() (storeSpec, error) {
	switch {
	case f.data != "" && f.endpoints != "":
		return storeSpec{}, errors.New("pass --data DIR or --etcd-endpoints URLS, not both")
	case f.endpoints != "":
		eps, err := parseEndpoints(f.endpoints)
		if err != nil {
			return storeSpec{}, fmt.Errorf("--etcd-endpoints: %w", err)
		}
		p, err := checkPrefix(f.prefix)
		if err != nil {
			return storeSpec{}, err
		}
		tc, err := f.tls.config(eps)
		if err != nil {
			return storeSpec{}, err
		}
		return storeSpec{kind: "etcd", endpoints: eps, prefix: p, tls: tc}, nil
	case f.data != "":
		return storeSpec{kind: "bbolt", path: filepath.Join(f.data, "arbiter.db")}, nil
	}
	return storeSpec{}, errors.New("pass --data DIR (bbolt) or --etcd-endpoints URLS (etcd)")
}

const storeWarning = `The store must not be in use: stop every arbiter serving it first. A bbolt
file a server holds is refused (its lock tells), and so is an etcd prefix
with replicas registered (an arbiter killed without a clean stop stays
registered for its --election-ttl). Nothing stops an arbiter from starting
on the store while the command runs: keep them stopped until it is done.`

func newAdminCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "admin",
		Short: "Work on a store directly: snapshots and migration (with no arbiter serving it)",
		Args:  cobra.NoArgs,
	}
	snap := &cobra.Command{Use: "snapshot", Short: "Save a store to a file, or restore one from it", Args: cobra.NoArgs}
	snap.AddCommand(newSnapshotSaveCmd(), newSnapshotRestoreCmd())
	cmd.AddCommand(snap, newMigrateCmd())
	return cmd
}

func newSnapshotSaveCmd() *cobra.Command {
	var f storeFlags
	cmd := &cobra.Command{
		Use:   "save (--data DIR | --etcd-endpoints URLS [--etcd-prefix P]) FILE",
		Short: "Write every key of a store to FILE, a checksummed snapshot of one revision",
		Long: `Writes every key of every bucket of the store, read in one consistent
view, to FILE: a versioned stream of JSON lines (a header with the format
version, the store revision and the time, a record per key, a trailer with
the record count and a SHA-256 of the rest). FILE must not exist; it is
written under a temporary name, read back and checked, then renamed.

` + storeWarning,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := f.spec()
			if err != nil {
				return fmt.Errorf("snapshot save: %w", err)
			}
			sum, err := saveSnapshot(cmd.Context(), spec, args[0])
			if err != nil {
				return fmt.Errorf("snapshot save: %w", err)
			}
			printSummary(cmd.OutOrStdout(), fmt.Sprintf("saved %s to %s", spec, args[0]), sum)
			return nil
		},
	}
	f.bind(cmd)
	return cmd
}

// saveSnapshot writes spec's snapshot to file, atomically and checked.
func saveSnapshot(ctx context.Context, spec storeSpec, file string) (store.Summary, error) {
	if _, err := os.Lstat(file); err == nil {
		return store.Summary{}, fmt.Errorf("%s exists: pick a new name or remove it", file)
	}
	st, err := openSpec(ctx, spec, false)
	if err != nil {
		return store.Summary{}, err
	}
	defer st.Close()
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".tmp-*")
	if err != nil {
		return store.Summary{}, err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	defer tmp.Close()
	sum, err := store.SaveSummary(ctx, st, tmp)
	if err != nil {
		return store.Summary{}, err
	}
	if err := tmp.Sync(); err != nil {
		return store.Summary{}, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return store.Summary{}, err
	}
	check, err := store.Verify(tmp)
	if err != nil {
		return store.Summary{}, fmt.Errorf("the written snapshot does not read back: %w", err)
	}
	if check.SHA256 != sum.SHA256 {
		return store.Summary{}, fmt.Errorf("the written snapshot reads back with sha256 %s, not %s", check.SHA256, sum.SHA256)
	}
	if err := tmp.Close(); err != nil {
		return store.Summary{}, err
	}
	// A link, unlike a rename, fails when file appeared meanwhile.
	if err := os.Link(tmp.Name(), file); errors.Is(err, os.ErrExist) {
		return store.Summary{}, fmt.Errorf("%s exists: pick a new name or remove it", file)
	} else if err != nil {
		if err := os.Rename(tmp.Name(), file); err != nil {
			return store.Summary{}, err
		}
	}
	syncDir(filepath.Dir(file))
	return sum, nil
}

// syncDir makes a rename or link in dir durable (best effort).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

func newSnapshotRestoreCmd() *cobra.Command {
	var f storeFlags
	var o store.RestoreOptions
	cmd := &cobra.Command{
		Use:   "restore (--data DIR | --etcd-endpoints URLS [--etcd-prefix P]) [--force] FILE",
		Short: "Write a snapshot into an empty store",
		Long: `Checks FILE whole (format, order, counts, checksum) before it touches the
store, then writes it in transactions of bounded size (under etcd's limits
on a transaction's operations and bytes). The store must be empty; --force
deletes what it holds first. Until the last transaction, the store holds a
marker of a restore in progress: a store left half-restored (a crash, a
lost connection) is refused by snapshot save, by migrate and by restore
without --force, with a message that says so.

` + storeWarning,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := f.spec()
			if err != nil {
				return fmt.Errorf("snapshot restore: %w", err)
			}
			sum, err := restoreSnapshot(cmd.Context(), spec, args[0], o)
			if err != nil {
				return fmt.Errorf("snapshot restore: %w", err)
			}
			printSummary(cmd.OutOrStdout(), fmt.Sprintf("restored %s into %s", args[0], spec), sum)
			return nil
		},
	}
	f.bind(cmd)
	cmd.Flags().BoolVar(&o.Force, "force", false, "restore into a store that is not empty, deleting its state first")
	return cmd
}

// restoreSnapshot checks file, then restores it into spec.
func restoreSnapshot(ctx context.Context, spec storeSpec, file string, o store.RestoreOptions) (store.Summary, error) {
	fh, err := os.Open(file)
	if err != nil {
		return store.Summary{}, err
	}
	defer fh.Close()
	check, err := store.Verify(fh)
	if err != nil {
		return store.Summary{}, fmt.Errorf("%s: %w (nothing was written)", file, err)
	}
	if _, err := fh.Seek(0, io.SeekStart); err != nil {
		return store.Summary{}, err
	}
	st, err := openSpec(ctx, spec, true)
	if err != nil {
		return store.Summary{}, err
	}
	defer st.Close()
	sum, err := store.RestoreWith(ctx, st, fh, o)
	if err != nil {
		return store.Summary{}, err
	}
	if sum.SHA256 != check.SHA256 {
		return store.Summary{}, fmt.Errorf("%s changed while it was restored (sha256 %s, checked %s): restore it again with --force", file, sum.SHA256, check.SHA256)
	}
	return sum, nil
}

func newMigrateCmd() *cobra.Command {
	var from, to, prefix string
	var tlsf etcdTLSFlags
	var o store.RestoreOptions
	cmd := &cobra.Command{
		Use:   "migrate --from bbolt:PATH|etcd:URLS --to bbolt:PATH|etcd:URLS [--etcd-prefix P] [--force]",
		Short: "Copy every key of one store into another, empty one (bbolt to etcd, etcd to bbolt, bbolt to bbolt)",
		Long: `Copies every key of every bucket of the --from store, read in one
consistent view, into the --to store, which must be empty (--force deletes
what it holds first). A store is bbolt:PATH (a database file, or a data
directory holding arbiter.db, as serve --data) or etcd:URL[,URL...] with
its keys under --etcd-prefix. The copy streams a snapshot from one to the
other, checked as it comes, in transactions of bounded size; a copy cut
short leaves the target marked as half-restored (see "snapshot restore").

` + storeWarning,
		Example: `  arbiter admin migrate --from bbolt:/var/lib/arbiter --to etcd:http://10.0.0.1:2379,http://10.0.0.2:2379,http://10.0.0.3:2379`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" || to == "" {
				return errors.New("migrate: pass --from and --to")
			}
			src, err := parseStoreSpec("--from", from, prefix)
			if err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			dst, err := parseStoreSpec("--to", to, prefix)
			if err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			for _, sp := range []*storeSpec{&src, &dst} {
				if sp.kind == "etcd" {
					if sp.tls, err = tlsf.config(sp.endpoints); err != nil {
						return fmt.Errorf("migrate: %w", err)
					}
				}
			}
			if src.same(dst) {
				return fmt.Errorf("migrate: --from and --to name one store (%s)", src)
			}
			sum, err := migrate(cmd.Context(), src, dst, o)
			if err != nil {
				return fmt.Errorf("migrate: %w", err)
			}
			printSummary(cmd.OutOrStdout(), fmt.Sprintf("copied %s to %s", src, dst), sum)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&from, "from", "", "the store to copy: bbolt:PATH or etcd:URL[,URL...]")
	fl.StringVar(&to, "to", "", "the empty store to copy into: bbolt:PATH or etcd:URL[,URL...]")
	fl.StringVar(&prefix, "etcd-prefix", defaultEtcdPrefix, "key prefix of the etcd store(s)")
	tlsf.bind(fl)
	fl.BoolVar(&o.Force, "force", false, "copy into a store that is not empty, deleting its state first")
	return cmd
}

func migrate(ctx context.Context, src, dst storeSpec, o store.RestoreOptions) (store.Summary, error) {
	from, err := openSpec(ctx, src, false)
	if err != nil {
		return store.Summary{}, err
	}
	defer from.Close()
	to, err := openSpec(ctx, dst, true)
	if err != nil {
		return store.Summary{}, err
	}
	defer to.Close()
	return store.Copy(ctx, from, to, o)
}

// printSummary prints what a snapshot holds: revision, size, checksum
// and the keys per bucket.
func printSummary(w io.Writer, what string, sum store.Summary) {
	fmt.Fprintf(w, "%s: revision %d, %d keys, %d bytes, sha256 %s\n", what, sum.Revision, sum.Records, sum.Bytes, sum.SHA256)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "BUCKET\tKEYS")
	for _, k := range store.SnapshotBuckets() {
		fmt.Fprintf(tw, "%s\t%d\n", k, sum.Keys[k])
	}
	tw.Flush()
}
