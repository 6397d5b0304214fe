package wire

import (
	"fmt"
	"net/url"
)

// CheckBaseURL fails unless u is an absolute http(s) URL; provider names
// the adapter in the error.
func CheckBaseURL(provider, u string) error {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("%s: base URL %q must be an absolute http(s) URL", provider, u)
	}
	return nil
}
