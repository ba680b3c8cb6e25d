//go:build linux

// peers.go makes what every server serves (the site, the TLS identity)
// and the configurations of the peers servery is measured against, nginx
// and caddy.

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// writeSite writes dir/1k.html and dir/64k.html: 1024 and 65536 fixed
// pseudo-random printable bytes in a minimal HTML page, the same bytes on
// every run.
func writeSite(dir string) {
	for _, f := range []struct {
		name string
		size int
		seed uint64
	}{{"1k", 1024, 42}, {"64k", 64 << 10, 43}} {
		const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n"
		head, tail := "<!doctype html><title>servery bench "+f.name+"</title><pre>\n", "\n</pre>\n"
		r := mrand.New(mrand.NewPCG(20240101, f.seed))
		b := []byte(head)
		for len(b) < f.size-len(tail) {
			b = append(b, alphabet[r.IntN(len(alphabet))])
		}
		writeFileOrDie(filepath.Join(dir, f.name+".html"), string(append(b, tail...)))
	}
}

// identity is the one certificate and key every HTTPS server presents.
type identity struct {
	cert, key string // PEM files
	certPEM   []byte
}

// newIdentity makes a self-signed ECDSA P-256 certificate for 127.0.0.1
// in dir.
func newIdentity(dir string) *identity {
	must(os.MkdirAll(dir, 0o755))
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	must(err)
	id := &identity{cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem"),
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	writeFileOrDie(id.cert, string(id.certPEM))
	writeFileOrDie(id.key, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})))
	return id
}

// nginxVersion is nginx's version, for the HTTP/2 directive it takes.
func (b *bench) nginxVersion() string {
	o, _ := runOutput(b.nginx, "-v")
	_, v, _ := strings.Cut(o, "nginx/")
	return strings.Fields(v + " ")[0]
}

// versionAtLeast compares dotted versions.
func versionAtLeast(v, min string) bool {
	a, b := strings.Split(v, "."), strings.Split(min, ".")
	for i := range max(len(a), len(b)) {
		var x, y int
		if i < len(a) {
			fmt.Sscan(a[i], &x)
		}
		if i < len(b) {
			fmt.Sscan(b[i], &y)
		}
		if x != y {
			return x > y
		}
	}
	return true
}

// nginxConf writes nginx's configuration for w workers on port (with
// HTTPS and HTTP/2 when tls) and returns its path: sendfile, no access
// log, open_file_cache, keep-alive for a million requests (the default
// 1000 would end HTTP/2 connections, which h2load does not reopen).
func (b *bench) nginxConf(w, port int, tls bool) string {
	dir := filepath.Join(b.tmp, "nginx")
	listen := fmt.Sprintf("listen 127.0.0.1:%d;", port)
	suffix := ""
	if tls {
		suffix = "-tls"
		if versionAtLeast(b.nginxVersion(), "1.25.1") {
			listen = fmt.Sprintf("listen 127.0.0.1:%d ssl; http2 on;", port)
		} else {
			listen = fmt.Sprintf("listen 127.0.0.1:%d ssl http2;", port)
		}
		listen += fmt.Sprintf("\n        ssl_protocols TLSv1.2 TLSv1.3;\n        ssl_certificate %s;\n        ssl_certificate_key %s;", b.tls.cert, b.tls.key)
	}
	conf := filepath.Join(dir, fmt.Sprintf("nginx-w%d-p%d%s.conf", w, port, suffix))
	t := filepath.Join(dir, "tmp")
	writeFileOrDie(conf, fmt.Sprintf(`# servery bench baseline (generated)
worker_processes %d;
daemon off;
pid %s/nginx-p%d.pid;
error_log %s/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65s;
    keepalive_requests 1000000;
    open_file_cache max=1000 inactive=60s;
    open_file_cache_valid 60s;
    types { text/html html; }
    default_type application/octet-stream;
    client_body_temp_path %s/body;
    proxy_temp_path %s/proxy;
    fastcgi_temp_path %s/fastcgi;
    uwsgi_temp_path %s/uwsgi;
    scgi_temp_path %s/scgi;
    server {
        %s
        root %s;
    }
}
`, w, dir, port, dir, t, t, t, t, t, listen, b.site))
	return conf
}

// caddyConf writes a Caddyfile serving the site over HTTPS on port with the
// run's certificate: no admin endpoint, no automatic HTTPS, HTTP/1.1 and
// HTTP/2 only, errors-only log, its state in the run's directory.
func (b *bench) caddyConf(port int) string {
	dir := filepath.Join(b.tmp, "caddy")
	conf := filepath.Join(dir, fmt.Sprintf("Caddyfile-p%d", port))
	writeFileOrDie(conf, fmt.Sprintf(`# servery bench baseline (generated)
{
	admin off
	auto_https off
	storage file_system %s/data
	servers {
		protocols h1 h2
	}
	log {
		output stderr
		level ERROR
	}
}
https://127.0.0.1:%d {
	bind 127.0.0.1
	tls %s %s
	root * %s
	file_server
}
`, dir, port, b.tls.cert, b.tls.key, b.site))
	return conf
}

func (b *bench) caddyEnv() []string {
	dir := filepath.Join(b.tmp, "caddy")
	return []string{"HOME=" + dir, "XDG_DATA_HOME=" + dir + "/data", "XDG_CONFIG_HOME=" + dir + "/config"}
}

// checkPeers makes nginx and caddy check their configurations first, so a
// broken one fails the run before any measurement.
func (b *bench) checkPeers() {
	log := b.logPath("peers-check.log")
	nginx := func(tls bool) {
		if err := run1(log, "", b.nginx, "-t", "-p", filepath.Join(b.tmp, "nginx")+"/", "-e", filepath.Join(b.tmp, "nginx", "error.log"),
			"-c", b.nginxConf(1, b.cfg.basePort, tls)); err != nil {
			die("nginx -t: %v: %s", err, tail(log, 5))
		}
	}
	if b.nginx != "" {
		nginx(false)
	}
	if b.cfg.want("https") {
		nginx(true)
		if err := run1(log, "", "env", append(b.caddyEnv(), b.caddy, "validate", "--config", b.caddyConf(b.cfg.basePort), "--adapter", "caddyfile")...); err != nil {
			die("caddy validate: %v: %s", err, tail(log, 5))
		}
	}
}
