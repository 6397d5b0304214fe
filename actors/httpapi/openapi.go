package httpapi

import (
	_ "embed"
	"net/http"
)

// openapiJSON is the OpenAPI 3.1 document of the API. It is written by
// hand, not generated from the route table, so the test comparing the two
// catches a route added to one and forgotten in the other.
//
//go:embed openapi.json
var openapiJSON []byte

// openapi serves the OpenAPI document.
func (a *api) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openapiJSON)
}
