package main

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"regexp"
	"testing"
	"time"
)

func TestSelfSignedIdentityNamesLocalAddressesAndHost(t *testing.T) {
	id, err := selfSignedIdentity("example.test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := id.certificate()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"localhost", "example.test", "127.0.0.1", "::1"} {
		if err := leaf.VerifyHostname(name); err != nil {
			t.Errorf("certificate does not name %s: %v", name, err)
		}
	}
	if leaf.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("key algorithm %v; want ECDSA", leaf.PublicKeyAlgorithm)
	}
}

func TestSelfSignedIdentityAddsIPHost(t *testing.T) {
	id, err := selfSignedIdentity("192.0.2.7", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := id.certificate()
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	found := false
	for _, ip := range leaf.IPAddresses {
		found = found || ip.Equal(net.ParseIP("192.0.2.7"))
	}
	if !found {
		t.Errorf("IP SANs %v; want 192.0.2.7 among them", leaf.IPAddresses)
	}
}

func TestServerConfigRequiresTLS12(t *testing.T) {
	id, err := selfSignedIdentity("", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := id.serverConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion = %x; want TLS 1.2", cfg.MinVersion)
	}
}

func TestFingerprintIsColonHexSHA256(t *testing.T) {
	id, err := selfSignedIdentity("", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	fp, err := id.fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^([0-9A-F]{2}:){31}[0-9A-F]{2}$`).MatchString(fp) {
		t.Errorf("fingerprint %q; want 32 colon-separated upper-case hex bytes", fp)
	}
}
