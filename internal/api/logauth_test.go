package api

import (
	"errors"
	"testing"
	"time"
)

const key = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestLogSignature(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	h := SignLogRequest(key, "GET", "/logs/t/w/0", "tail=5", "n1", now.Add(LogSigLifetime))
	for _, c := range []struct {
		name                    string
		h, key, method, path, q string
		node                    string
		at                      time.Time
		want                    error
	}{
		{"as signed", h, key, "GET", "/logs/t/w/0", "tail=5", "n1", now, nil},
		{"other path", h, key, "GET", "/logs/t/x/0", "tail=5", "n1", now, ErrLogAuthSignature},
		{"other query", h, key, "GET", "/logs/t/w/0", "", "n1", now, ErrLogAuthSignature},
		{"other method", h, key, "POST", "/logs/t/w/0", "tail=5", "n1", now, ErrLogAuthSignature},
		{"other node", h, key, "GET", "/logs/t/w/0", "tail=5", "n2", now, ErrLogAuthNode},
		{"other key", h, key[1:] + "x", "GET", "/logs/t/w/0", "tail=5", "n1", now, ErrLogAuthSignature},
		{"no key", h, "", "GET", "/logs/t/w/0", "tail=5", "n1", now, ErrLogAuthSignature},
		{"expired", h, key, "GET", "/logs/t/w/0", "tail=5", "n1", now.Add(LogSigLifetime + time.Second), ErrLogAuthExpired},
		{"too far ahead", SignLogRequest(key, "GET", "/p", "", "n1", now.Add(time.Hour)), key, "GET", "/p", "", "n1", now, ErrLogAuthExpired},
		{"bearer", "Bearer " + key, key, "GET", "/p", "", "n1", now, ErrLogAuthMalformed},
		{"empty", "", key, "GET", "/p", "", "n1", now, ErrLogAuthMalformed},
	} {
		if err := VerifyLogRequest(c.h, c.key, c.method, c.path, c.q, c.node, c.at); !errors.Is(err, c.want) && !(err == nil && c.want == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// FuzzParseLogAuth: parsing never panics, and what parses prints back to
// itself.
func FuzzParseLogAuth(f *testing.F) {
	f.Add(SignLogRequest(key, "GET", "/logs/a/b/0", "", "n1", time.Unix(1_700_000_000, 0)))
	for _, s := range []string{"", "Arbiter-Log ", "Arbiter-Log node=n1", "Arbiter-Log node=a,exp=1,sig=zz", "Arbiter-Log node=a,node=b,exp=1", "Bearer x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseLogAuth(s)
		if err != nil {
			return
		}
		b, err := ParseLogAuth(a.String())
		if err != nil || b != a {
			t.Fatalf("%q parsed as %+v, which prints as %q and parses as %+v, %v", s, a, a.String(), b, err)
		}
	})
}
