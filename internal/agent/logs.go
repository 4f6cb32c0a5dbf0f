package agent

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/arbiterhq/arbiter/internal/api"
)

// logPoll is how often a follow answer looks at the log's size.
const logPoll = 100 * time.Millisecond

// logHandler serves /logs/{tenant}/{name}/{replica}[?tail=N|from=OFFSET]
// [&follow=true] (see api.HeaderLogStart) to requests the server signed
// for this node with the log key the heartbeats carry
// (api.SignLogRequest): the signature covers the method, path and query,
// so it opens that one log for a few seconds. No bearer secret is
// accepted, neither the key itself nor the agent's token.
func (a *Agent) logHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /logs/{tenant}/{name}/{replica}", a.serveLog)
	return mux
}

// offsetParam parses tail or from: digits only, at most api.MaxLogOffset.
func offsetParam(q url.Values, name string) (n int64, given bool, ok bool) {
	vs, given := q[name]
	if !given {
		return 0, false, true
	}
	if len(vs) != 1 || vs[0] == "" || vs[0][0] < '0' || vs[0][0] > '9' {
		return 0, true, false
	}
	n, err := strconv.ParseInt(vs[0], 10, 64)
	return n, true, err == nil && n >= 0 && n <= api.MaxLogOffset
}

// serveLog answers a piece of a replica's log; with follow, the rest as it
// is written, until the replica's process is gone and all it wrote is
// sent, the caller goes away, or Options.LogFollowFor passes.
func (a *Agent) serveLog(w http.ResponseWriter, r *http.Request) {
	if err := api.VerifyLogRequest(r.Header.Get("Authorization"), a.logKey, r.Method, r.URL.EscapedPath(), r.URL.RawQuery, a.opts.NodeID, time.Now()); err != nil {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	rep, err := strconv.Atoi(r.PathValue("replica"))
	if err != nil {
		http.Error(w, "bad replica", http.StatusBadRequest)
		return
	}
	q := r.URL.Query()
	tail, tailGiven, ok1 := offsetParam(q, "tail")
	from, fromGiven, ok2 := offsetParam(q, "from")
	switch {
	case !ok1:
		http.Error(w, "tail must be an integer between 0 and "+strconv.Itoa(api.MaxLogOffset), http.StatusBadRequest)
		return
	case !ok2:
		http.Error(w, "from must be an integer between 0 and "+strconv.Itoa(api.MaxLogOffset), http.StatusBadRequest)
		return
	case tailGiven && fromGiven:
		http.Error(w, "tail and from exclude each other", http.StatusBadRequest)
		return
	}
	follow := q.Get("follow") == "true"
	key := r.PathValue("tenant") + "/" + r.PathValue("name")
	// Whether it runs is looked at before the size: when it did not run,
	// the size read after is the log's last.
	ended := !a.replicaRunning(key, rep)
	f, err := os.Open(a.LogPath(key, rep))
	if err != nil {
		http.Error(w, "no log", http.StatusNotFound)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		http.Error(w, "no log", http.StatusNotFound)
		return
	}
	size, start := st.Size(), int64(0)
	switch {
	case fromGiven && from > size:
		w.Header().Set(api.HeaderLogSize, strconv.FormatInt(size, 10))
		http.Error(w, "from is past the log's end ("+strconv.FormatInt(size, 10)+" bytes)", http.StatusRequestedRangeNotSatisfiable)
		return
	case fromGiven:
		start = from
	case tailGiven && tail > 0:
		start = max(size-tail, 0)
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set(api.HeaderLogStart, strconv.FormatInt(start, 10))
	h.Set(api.HeaderLogSize, strconv.FormatInt(size, 10))
	h.Set(api.HeaderLogEnded, strconv.FormatBool(ended))
	w.WriteHeader(http.StatusOK)
	budget := int64(api.MaxLogAnswer)
	n, _ := io.Copy(w, io.NewSectionReader(f, start, min(size-start, budget)))
	if !follow || ended {
		return
	}
	pos, budget := start+n, budget-n
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	stop := time.NewTimer(a.opts.LogFollowFor)
	defer stop.Stop()
	tick := time.NewTicker(logPoll)
	defer tick.Stop()
	for budget > 0 {
		select {
		case <-r.Context().Done():
			return
		case <-stop.C:
			return
		case <-tick.C:
		}
		running := a.replicaRunning(key, rep)
		n, err := io.Copy(w, io.NewSectionReader(f, pos, budget))
		pos, budget = pos+n, budget-n
		if err != nil {
			return
		}
		if n > 0 && rc.Flush() != nil {
			return
		}
		if !running {
			return // it had ended before that read: the read got the rest
		}
	}
}

// replicaRunning reports whether replica rep of the workload (tenant/name) has
// a process on this node.
func (a *Agent) replicaRunning(workload string, rep int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for ref := range a.procs {
		if ref.Workload == workload && ref.Replica == rep {
			return true
		}
	}
	return false
}
