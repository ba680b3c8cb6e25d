package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// tlsIdentity is one certificate and private key, held as PEM.
//
// The parent loads or generates the identity once and hands the same bytes
// to every worker inside its configuration message, so every worker presents
// the same certificate. The PEM travels only over the protocol pipe the
// parent writes (the worker's fd 4): never in argv, the environment or a
// file, where other users or a crash dump could find it.
type tlsIdentity struct {
	CertPEM []byte `json:"cert_pem"`
	KeyPEM  []byte `json:"key_pem"`
}

// loadTLSIdentity reads a certificate and key pair and checks that they
// belong together, so a mismatch is a configuration error at startup rather
// than a handshake failure on the first client.
func loadTLSIdentity(certFile, keyFile string) (*tlsIdentity, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("read certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	id := &tlsIdentity{CertPEM: certPEM, KeyPEM: keyPEM}
	if _, err := id.certificate(); err != nil {
		return nil, err
	}
	return id, nil
}

// selfSignedIdentity generates an ECDSA P-256 certificate valid for
// localhost, 127.0.0.1, ::1 and host (the -addr host, when it names one).
// It lives in memory only.
func selfSignedIdentity(host string, now time.Time) (*tlsIdentity, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, fmt.Errorf("generate serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "servery self-signed"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	addSAN(tmpl, host)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("create certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return &tlsIdentity{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// addSAN adds host to the certificate's names unless it is empty, a
// wildcard address, or already present.
func addSAN(tmpl *x509.Certificate, host string) {
	if host == "" || host == "localhost" {
		return
	}
	ip := net.ParseIP(host)
	if ip == nil {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
		return
	}
	if ip.IsUnspecified() {
		return
	}
	for _, have := range tmpl.IPAddresses {
		if have.Equal(ip) {
			return
		}
	}
	tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
}

// certificate parses the pair.
func (id *tlsIdentity) certificate() (tls.Certificate, error) {
	cert, err := tls.X509KeyPair(id.CertPEM, id.KeyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("load key pair: %w", err)
	}
	return cert, nil
}

// serverConfig returns the TLS configuration every runtime serves with.
func (id *tlsIdentity) serverConfig() (*tls.Config, error) {
	cert, err := id.certificate()
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2", "http/1.1"},
	}, nil
}

// fingerprint is the SHA-256 of the leaf certificate's DER bytes, in the
// colon-separated hex that browsers and openssl print, so a user can pin it.
func (id *tlsIdentity) fingerprint() (string, error) {
	cert, err := id.certificate()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(cert.Certificate[0])
	hexes := make([]string, len(sum))
	for i, b := range sum {
		hexes[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(hexes, ":"), nil
}

// ticketKeyRotation is how often the parent replaces the session ticket
// key. The previous key stays valid for resumption for one more period, so
// a ticket is accepted for at most twice this long after it was issued.
const ticketKeyRotation = 24 * time.Hour

// ticketKeys is the session ticket keyring that makes N workers one TLS
// server: the parent generates it and hands it to every worker with the
// certificate, over the protocol pipe the parent writes (the worker's
// fd 4; never argv, the environment or a file), so a client resumes
// whichever worker it reaches. Keys[0] encrypts new tickets; every key
// decrypts. Safe for concurrent use.
type ticketKeys struct {
	mu   sync.Mutex
	keys [][]byte // newest first; at most two
}

// newTicketKeys returns a keyring with one fresh key.
func newTicketKeys() (*ticketKeys, error) {
	k := &ticketKeys{}
	return k, k.rotate()
}

// rotate puts a fresh key first and keeps only the previous one after it.
func (k *ticketKeys) rotate() error {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("ticket key: %w", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = append([][]byte{key}, k.keys[:min(len(k.keys), 1)]...)
	return nil
}

// current returns a copy of the keys, newest first, as the protocol
// carries them.
func (k *ticketKeys) current() [][]byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.keys)
}

// setTicketKeys installs keys, as the protocol carries them, in cfg.
func setTicketKeys(cfg *tls.Config, keys [][]byte) error {
	arr := make([][32]byte, len(keys))
	for i, key := range keys {
		if len(key) != 32 {
			return fmt.Errorf("ticket key %d: %d bytes, want 32", i, len(key))
		}
		copy(arr[i][:], key)
	}
	cfg.SetSessionTicketKeys(arr)
	return nil
}
