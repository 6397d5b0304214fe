package locations

import (
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/messages"
)

// TestServicesModelWithoutClient: a service set whose Provider func is
// missing, or returns no client and no error, cannot run the model; Model
// says so as model.not-found. The missing func panicked, and the nil
// client failed the step later as "The provider's stream failed: runtime
// error: invalid memory address or nil pointer dereference".
func TestServicesModelWithoutClient(t *testing.T) {
	cat, err := llm.NewCatalog([]llm.ProviderSpec{{ID: "p", Type: llm.ProviderScript}})
	if err != nil {
		t.Fatal(err)
	}
	ref := messages.ModelRef{ProviderID: "p", ID: "m"}
	for name, provider := range map[string]func(string) (llm.Provider, error){
		"no Provider func": nil,
		"nil client":       func(string) (llm.Provider, error) { return nil, nil },
	} {
		s := &Services{Catalog: cat, Provider: provider}
		_, p, err := s.Model(ref, Agent{})
		if messages.TypeOf(err) != messages.ErrModelNotFound || p != nil {
			t.Errorf("%s: Model = %v, %v; want a model.not-found error", name, p, err)
		}
	}
}
