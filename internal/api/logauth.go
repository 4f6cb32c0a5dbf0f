package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Reading a replica's log from its node's agent (issue 12). The agent
// makes a random LogKey at start and sends it with its heartbeats; the
// key never travels back. For each log request the server signs exactly
// that request, for that node, for a few seconds:
//
//	Authorization: Arbiter-Log node=<id>,exp=<unix seconds>,sig=<hex HMAC-SHA256>
//
// over "arbiter-log-v1", the method, the escaped path, the raw query, the
// node and the expiry, one per line, keyed with the agent's LogKey. The
// agent checks the node, the expiry and the signature (constant time)
// and serves only the path and query signed. No bearer secret is sent,
// so pointing log_url anywhere else hands out nothing usable.

// LogAuthScheme is the Authorization scheme of signed log requests.
const LogAuthScheme = "Arbiter-Log"

// LogSigLifetime is how far ahead the server sets a signature's expiry;
// MaxLogSigAhead is the furthest ahead an agent accepts (clock skew).
const (
	LogSigLifetime = 15 * time.Second
	MaxLogSigAhead = 2 * time.Minute
)

// Log key bounds: agents send 64 hex characters (32 random bytes).
const (
	MinLogKey = 32
	MaxLogKey = 256
)

// Errors of VerifyLogRequest.
var (
	ErrLogAuthMalformed = errors.New("api: malformed Arbiter-Log authorization")
	ErrLogAuthExpired   = errors.New("api: log signature expired or too far ahead")
	ErrLogAuthNode      = errors.New("api: log signature is for another node")
	ErrLogAuthSignature = errors.New("api: log signature does not match")
)

// LogAuth is a parsed Arbiter-Log authorization.
type LogAuth struct {
	Node string
	Exp  int64 // unix seconds
	Sig  string
}

// String is the Authorization header value.
func (a LogAuth) String() string {
	return fmt.Sprintf("%s node=%s,exp=%d,sig=%s", LogAuthScheme, a.Node, a.Exp, a.Sig)
}

func logMAC(key, method, path, query, node string, exp int64) string {
	m := hmac.New(sha256.New, []byte(key))
	fmt.Fprintf(m, "arbiter-log-v1\n%s\n%s\n%s\n%s\n%d", method, path, query, node, exp)
	return hex.EncodeToString(m.Sum(nil))
}

// SignLogRequest returns the Authorization value for one log request:
// method, escaped path and raw query as sent, the node asked, valid until
// exp.
func SignLogRequest(key, method, path, query, node string, exp time.Time) string {
	e := exp.Unix()
	return LogAuth{Node: node, Exp: e, Sig: logMAC(key, method, path, query, node, e)}.String()
}

// ParseLogAuth parses an Authorization value of the Arbiter-Log scheme.
// It accepts exactly the three fields, each once.
func ParseLogAuth(h string) (LogAuth, error) {
	var a LogAuth
	rest, ok := strings.CutPrefix(h, LogAuthScheme+" ")
	if !ok || len(h) > 512 {
		return a, ErrLogAuthMalformed
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" || seen[k] {
			return a, ErrLogAuthMalformed
		}
		seen[k] = true
		switch k {
		case "node":
			a.Node = v
		case "exp":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return a, ErrLogAuthMalformed
			}
			a.Exp = n
		case "sig":
			if len(v) != 2*sha256.Size {
				return a, ErrLogAuthMalformed
			}
			a.Sig = v
		default:
			return a, ErrLogAuthMalformed
		}
	}
	if len(seen) != 3 {
		return a, ErrLogAuthMalformed
	}
	return a, nil
}

// VerifyLogRequest checks an Authorization value against the request it
// came with (method, escaped path, raw query), the agent's node and key,
// at now.
func VerifyLogRequest(h, key, method, path, query, node string, now time.Time) error {
	a, err := ParseLogAuth(h)
	if err != nil {
		return err
	}
	if len(key) < MinLogKey {
		return ErrLogAuthSignature // no key: nothing can be signed
	}
	if a.Node != node {
		return ErrLogAuthNode
	}
	if exp := time.Unix(a.Exp, 0); now.After(exp) || exp.Sub(now) > MaxLogSigAhead {
		return ErrLogAuthExpired
	}
	want := logMAC(key, method, path, query, node, a.Exp)
	if !hmac.Equal([]byte(a.Sig), []byte(want)) {
		return ErrLogAuthSignature
	}
	return nil
}
