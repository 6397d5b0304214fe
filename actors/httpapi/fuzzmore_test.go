package httpapi

import (
	"crypto/sha256"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/messages"
)

// FuzzRequestHeaders fuzzes the header parsing in front of every route:
// the Authorization header is accepted exactly when it is the Bearer
// scheme (any case) with the token; without a token, fromBrowser lets a
// request through only when it carries no foreign Origin and its Host
// names localhost, a *.localhost name (in any case, with or without one
// final dot) or an IP literal; refusals are typed forbidden errors.
func FuzzRequestHeaders(f *testing.F) {
	for _, s := range [][3]string{
		{"Bearer secret", "127.0.0.1:4096", ""}, {"bearer  secret ", "localhost", "http://a:1"}, {"Basic secret", "[::1]:80", ""},
		{"Bearer secretx", "evil.com", ""}, {"Bearer", "a.localhost:1", "null"}, {"", "127.0.0.1.nip.io", ""}, {"", "[evil.com]", ""},
		{"", "localhost.:80", ""}, {"", "LOCALHOST", ""}, {"", "localhost..", ""}, {"", "0x7f.1", ""}, {"", "::ffff:127.0.0.1", ""}, {"", "[fe80::1%25eth0]:1", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	const token = "secret"
	f.Fuzz(func(t *testing.T, authz, host, origin string) {
		r := &http.Request{Header: http.Header{}, Host: host}
		if authz != "" {
			r.Header.Set("Authorization", authz)
		}
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		withToken := &api{cfg: Config{Token: token, CORS: []string{"http://a:1"}}, tokenSum: sha256.Sum256([]byte(token))}
		scheme, tok, _ := strings.Cut(authz, " ")
		want := strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(tok) == token
		if got := withToken.authorized(r); got != want {
			t.Fatalf("Authorization %q: authorized %v, want %v", authz, got, want)
		}
		open := &api{cfg: Config{CORS: []string{"http://a:1"}}}
		if !open.authorized(r) {
			t.Fatal("no token configured, but refused")
		}
		err := open.fromBrowser(r)
		if err != nil {
			if err.Type != messages.ErrForbidden {
				t.Fatalf("fromBrowser error %v", err)
			}
			return
		}
		if origin != "" && origin != "http://a:1" {
			t.Fatalf("Origin %q let through", origin)
		}
		h := host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			h = hh
		}
		h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		// Names compare case-insensitively, with one final dot allowed.
		// net.ParseIP rejects zones, so this also fails for an IPv6
		// literal with a zone ("[fe80::1%25eth0]") that is let through.
		name := strings.TrimSuffix(strings.ToLower(h), ".")
		if name != "localhost" && !strings.HasSuffix(name, ".localhost") && net.ParseIP(h) == nil {
			t.Fatalf("Host %q let through without a token", host)
		}
	})
}
