package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdTLSFlags are the TLS files of the connection to etcd, as etcdctl
// names them: the CA that signed the members' certificates, and this
// client's certificate and key (for members started with
// --client-cert-auth).
type etcdTLSFlags struct {
	ca, cert, key string
}

func (f *etcdTLSFlags) bind(fl *pflag.FlagSet) {
	fl.StringVar(&f.ca, "etcd-cacert", "", "PEM file of the CA that signed the etcd members' certificates (https:// endpoints; default: the system's roots)")
	fl.StringVar(&f.cert, "etcd-cert", "", "PEM file of this client's certificate for etcd (with --etcd-key)")
	fl.StringVar(&f.key, "etcd-key", "", "PEM file of this client's key for etcd (with --etcd-cert)")
}

// config is the TLS configuration for endpoints: nil for http://
// endpoints without TLS flags. Errors name the flag.
func (f etcdTLSFlags) config(endpoints []string) (*tls.Config, error) {
	secure := 0
	for _, e := range endpoints {
		if strings.HasPrefix(e, "https://") {
			secure++
		}
	}
	given := f.ca != "" || f.cert != "" || f.key != ""
	switch {
	case secure != 0 && secure != len(endpoints):
		return nil, errors.New("--etcd-endpoints: mix of http:// and https:// endpoints")
	case secure == 0 && given:
		return nil, errors.New("--etcd-endpoints: the etcd TLS flags need https:// endpoints")
	case secure == 0:
		return nil, nil
	case (f.cert == "") != (f.key == ""):
		return nil, errors.New("--etcd-cert and --etcd-key go together")
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--etcd-cacert: %s holds no PEM certificate", f.ca)
		}
		tc.RootCAs = pool
	}
	if f.cert != "" {
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// newEtcdClient connects to etcd (serve, admin): with TLS when the
// endpoints are https://, and quiet (the store and the election report
// what matters).
func newEtcdClient(ctx context.Context, endpoints []string, tc *tls.Config) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Context: ctx, TLS: tc, Logger: zap.NewNop()})
}
