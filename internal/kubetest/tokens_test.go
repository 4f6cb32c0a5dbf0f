package kubetest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
)

// review posts body to the webhook's handler and decodes its answer.
func review(t *testing.T, w *tokenWebhook, body string) (int, authnv1.TokenReview) {
	t.Helper()
	rec := httptest.NewRecorder()
	w.serve(rec, httptest.NewRequest(http.MethodPost, "/authenticate", strings.NewReader(body)))
	var out authnv1.TokenReview
	if rec.Code == http.StatusOK {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("decoding the webhook's answer %q: %v", rec.Body.String(), err)
		}
	}
	return rec.Code, out
}

func reviewOf(token string) string {
	b, _ := json.Marshal(authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}})
	return string(b)
}

func TestTokenWebhook(t *testing.T) {
	w := &tokenWebhook{tokens: map[string]identity{}}
	tok := w.issue("arbiter", []string{"arbiter:schedulers"})
	other := w.issue("tenant-a", nil)
	if tok == other || len(tok) < 32 {
		t.Fatalf("issued tokens %q and %q: want distinct and long", tok, other)
	}
	tests := []struct {
		name    string
		body    string
		code    int
		authn   bool
		user    string
		groups  []string
		wantErr bool
	}{
		{name: "issued", body: reviewOf(tok), code: 200, authn: true, user: "arbiter", groups: []string{"arbiter:schedulers"}},
		{name: "other identity", body: reviewOf(other), code: 200, authn: true, user: "tenant-a"},
		{name: "unknown", body: reviewOf("forged"), code: 200, wantErr: true},
		{name: "empty token", body: reviewOf(""), code: 200, wantErr: true},
		{name: "prefix of an issued token", body: reviewOf(tok[:len(tok)-1]), code: 200, wantErr: true},
		{name: "malformed", body: `{"spec":`, code: 400},
		{name: "oversized", body: `{"spec":{"token":"` + strings.Repeat("a", maxReviewBytes) + `"}}`, code: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, r := review(t, w, tt.body)
			if code != tt.code {
				t.Fatalf("status %d, want %d", code, tt.code)
			}
			if code != 200 {
				return
			}
			if r.Status.Authenticated != tt.authn || r.Status.User.Username != tt.user ||
				!slices.Equal(r.Status.User.Groups, tt.groups) || (r.Status.Error != "") != tt.wantErr {
				t.Errorf("answer %+v, want authenticated=%v user=%q groups=%v error=%v", r.Status, tt.authn, tt.user, tt.groups, tt.wantErr)
			}
			if r.Spec.Token != "" {
				t.Errorf("the answer echoes the token %q", r.Spec.Token)
			}
		})
	}
}
