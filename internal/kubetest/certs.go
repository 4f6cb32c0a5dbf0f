package kubetest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certLifetime is how long the generated certificates are valid: far longer
// than any test, short enough that a leaked one is worthless soon.
const certLifetime = 24 * time.Hour

// pki is what kube-apiserver is started with, generated per server: a CA, the
// serving certificate it signs for the loopback address, and the key pair
// that signs service-account tokens. Every file lives in the test's
// temporary directory.
type pki struct {
	caPEM []byte // the CA certificate, PEM; clients trust it

	servingCert, servingKey string // paths: --tls-cert-file, --tls-private-key-file
	saPublic, saPrivate     string // paths: --service-account-key-file, --service-account-signing-key-file
}

// newPKI generates the certificates and keys into dir.
func newPKI(dir string) (*pki, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "arbiter-kubetest-ca"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}

	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(certLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}

	p := &pki{
		caPEM:       pemBlock("CERTIFICATE", caDER),
		servingCert: filepath.Join(dir, "serving.crt"),
		servingKey:  filepath.Join(dir, "serving.key"),
		saPublic:    filepath.Join(dir, "sa.pub"),
		saPrivate:   filepath.Join(dir, "sa.key"),
	}
	srvKeyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		return nil, err
	}
	saKeyDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return nil, err
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	files := []struct {
		path string
		data []byte
	}{
		{filepath.Join(dir, "ca.crt"), p.caPEM},
		{p.servingCert, pemBlock("CERTIFICATE", srvDER)},
		{p.servingKey, pemBlock("EC PRIVATE KEY", srvKeyDER)},
		{p.saPrivate, pemBlock("EC PRIVATE KEY", saKeyDER)},
		{p.saPublic, pemBlock("PUBLIC KEY", saPubDER)},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// serial returns a random positive certificate serial number.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
