package kubetest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The admin identity, in the static token file (--token-auth-file).
const (
	adminUser  = "kubetest-admin"
	adminGroup = "system:masters"
)

// newToken returns a fresh random bearer token.
func newToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// writeTokenFile writes kube-apiserver's static token file: one CSV line per
// identity, token,user,uid,"group1,group2".
func writeTokenFile(path, adminToken string) error {
	line := fmt.Sprintf("%s,%s,%s,%q\n", adminToken, adminUser, adminUser, adminGroup)
	return os.WriteFile(path, []byte(line), 0o600)
}

// identity is who a token issued by TokenConfig authenticates as.
type identity struct {
	user   string
	groups []string
}

// tokenWebhook is a token authentication webhook (the TokenReview API) that
// kube-apiserver consults, through --authentication-token-webhook-config-file,
// for bearer tokens not in its static file. It lets TokenConfig mint a token
// for any user and groups while the server runs, which a static token file,
// read once at start, cannot.
type tokenWebhook struct {
	srv *httptest.Server

	mu     sync.Mutex
	tokens map[string]identity
}

// maxReviewBytes bounds a TokenReview request body.
const maxReviewBytes = 1 << 20

func newTokenWebhook() *tokenWebhook {
	w := &tokenWebhook{tokens: map[string]identity{}}
	w.srv = httptest.NewTLSServer(http.HandlerFunc(w.serve))
	return w
}

// issue returns a new token that authenticates as user in groups.
func (w *tokenWebhook) issue(user string, groups []string) string {
	tok := newToken()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tokens[tok] = identity{user: user, groups: append([]string(nil), groups...)}
	return tok
}

// serve answers one TokenReview: authenticated with the token's identity if
// issue made it, unauthenticated otherwise.
func (w *tokenWebhook) serve(rw http.ResponseWriter, r *http.Request) {
	var review authnv1.TokenReview
	if err := json.NewDecoder(io.LimitReader(r.Body, maxReviewBytes)).Decode(&review); err != nil {
		http.Error(rw, "kubetest: bad TokenReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	id, ok := w.tokens[review.Spec.Token]
	w.mu.Unlock()
	review.Spec = authnv1.TokenReviewSpec{} // never echo the token back
	review.Status = authnv1.TokenReviewStatus{Authenticated: ok}
	if ok {
		review.Status.User = authnv1.UserInfo{Username: id.user, UID: id.user, Groups: id.groups}
	} else {
		review.Status.Error = "kubetest: unknown token"
	}
	if review.APIVersion == "" {
		review.APIVersion, review.Kind = "authentication.k8s.io/v1", "TokenReview"
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(&review)
}

// writeConfig writes the kubeconfig that tells kube-apiserver where the
// webhook is and which certificate it serves.
func (w *tokenWebhook) writeConfig(path string) error {
	caPEM := pemBlock("CERTIFICATE", w.srv.Certificate().Raw)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubetest-tokens"] = &clientcmdapi.Cluster{
		Server:                   strings.TrimSuffix(w.srv.URL, "/") + "/authenticate",
		CertificateAuthorityData: caPEM,
	}
	cfg.AuthInfos["kube-apiserver"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["webhook"] = &clientcmdapi.Context{Cluster: "kubetest-tokens", AuthInfo: "kube-apiserver"}
	cfg.CurrentContext = "webhook"
	return clientcmd.WriteToFile(*cfg, path)
}

func (w *tokenWebhook) close() { w.srv.Close() }
