package etcdtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are the PEM files of a TLS cluster (StartTLS): the CA that
// signed everything, and a client certificate and key it trusts.
type TLSFiles struct {
	CA, Cert, Key         string
	serverCert, serverKey string
}

// StartTLS is Start with TLS on the client port and client certificates
// required (--client-cert-auth): a client without a certificate the
// cluster's CA signed is refused.
func StartTLS(t testing.TB, n int) *Cluster {
	t.Helper()
	bin := Binary(t)
	certs, err := makeCerts(t.TempDir())
	if err != nil {
		t.Fatalf("etcdtest: certificates: %v", err)
	}
	var lastErr error
	for try := 1; try <= 3; try++ {
		c, err := launch(t, bin, filepath.Join(t.TempDir(), "etcd"), n, certs)
		if err == nil {
			t.Cleanup(c.shutdown)
			return c
		}
		lastErr = err
		c.shutdown()
	}
	t.Fatalf("etcdtest: could not start a healthy %d-member TLS cluster: %v", n, lastErr)
	return nil
}

// TLS returns the cluster's certificate files (nil for a plain cluster).
func (c *Cluster) TLS() *TLSFiles { return c.certs }

// ClientTLS is the client side of the cluster's TLS (nil for a plain one).
func (c *Cluster) ClientTLS() *tls.Config {
	if c.certs == nil {
		return nil
	}
	pair, err := tls.LoadX509KeyPair(c.certs.Cert, c.certs.Key)
	if err != nil {
		return nil
	}
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(c.certs.CA)
	pool.AppendCertsFromPEM(ca)
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// makeCerts writes a CA, a server certificate for 127.0.0.1 and a client
// certificate into dir.
func makeCerts(dir string) (*TLSFiles, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcdtest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	f := &TLSFiles{CA: filepath.Join(dir, "ca.pem")}
	if err := writePEM(f.CA, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	issue := func(name string, serial int64, usage x509.ExtKeyUsage, ips []net.IP) (string, string, error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", "", err
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: ips,
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return "", "", err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return "", "", err
		}
		cert, keyPath := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		if err := writePEM(cert, "CERTIFICATE", der); err != nil {
			return "", "", err
		}
		return cert, keyPath, writePEM(keyPath, "EC PRIVATE KEY", kder)
	}
	if f.serverCert, f.serverKey, err = issue("server", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	if f.Cert, f.Key, err = issue("client", 3, x509.ExtKeyUsageClientAuth, nil); err != nil {
		return nil, fmt.Errorf("client certificate: %w", err)
	}
	return f, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
