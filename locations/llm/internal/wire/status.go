package wire

import (
	"net/http"

	"github.com/sessiond/sessiond/messages"
)

// StatusOverloaded is the non-standard status Anthropic (and some gateways)
// answer with when the service is overloaded.
const StatusOverloaded = 529

// StatusType maps an HTTP status to the error type an adapter reports when
// the error body says nothing more specific: 429 is a rate limit, 401 and 403
// are auth failures, 408 is a transport timeout, every 5xx (529 included) is
// provider-internal, any other 4xx is an invalid request. Anything else is
// unknown.
func StatusType(status int) messages.ErrorType {
	switch {
	case status == http.StatusTooManyRequests:
		return messages.ErrProviderRateLimit
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return messages.ErrProviderAuth
	case status == http.StatusRequestTimeout:
		return messages.ErrProviderTransport
	case status >= 500 && status <= 599:
		return messages.ErrProviderInternal
	case status >= 400 && status <= 499:
		return messages.ErrProviderInvalidRequest
	}
	return messages.ErrProviderUnknown
}
