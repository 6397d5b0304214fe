package llm_test

import (
	"fmt"

	"github.com/sessiond/sessiond/locations/llm"
)

// ExampleCatalog resolves "provider/model" references against configured
// providers: limits left at zero take the defaults, and a reference that
// cannot run says why.
func ExampleCatalog() {
	catalog, err := llm.NewCatalog([]llm.ProviderSpec{
		{ID: "local", Type: llm.ProviderOpenAI, HasCredentials: true,
			Models: map[string]llm.ModelSpec{"qwen3": {Context: 32768}}},
		{ID: "anthropic", Type: llm.ProviderAnthropic, // no API key configured
			Models: map[string]llm.ModelSpec{"claude-haiku-4-5": {}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := catalog.ResolveString("local/qwen3")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Ref, m.Family, m.Context, m.Output == llm.DefaultOutput)

	for _, ref := range []string{"local/llama", "anthropic/claude-haiku-4-5", "qwen3"} {
		_, err := catalog.ResolveString(ref)
		fmt.Println(err)
	}
	// Output:
	// local/qwen3 openai 32768 true
	// model.not-found: model "local/llama": provider "local" has no model "llama" (known models: "qwen3")
	// model.not-found: model "anthropic/claude-haiku-4-5": provider "anthropic" has no credentials; set its apiKey (or ANTHROPIC_API_KEY)
	// invalid: model "qwen3": want provider/model
}
