package tools

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// noLoader refuses every external schema reference, so compiling a tool's
// schema never reads files or the network.
type noLoader struct{}

// Load implements jsonschema.URLLoader.
func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema reference %s is not allowed", url)
}

// compileSchema compiles raw as a draft 2020-12 schema. When object is set
// the schema's top level must declare "type": "object", as providers require
// of tool inputs.
func compileSchema(name string, raw []byte, object bool) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("decode: %v", err)
	}
	if object {
		m, ok := doc.(map[string]any)
		if !ok || m["type"] != "object" {
			return nil, errors.New(`the top level must be {"type": "object", ...}`)
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	url := "sessiond://tools/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// decodeJSON decodes one JSON value, keeping number precision as the
// validator expects.
func decodeJSON(raw []byte) (any, error) {
	return jsonschema.UnmarshalJSON(bytes.NewReader(raw))
}

// maxSchemaErrors bounds the validation problems listed in one message.
const maxSchemaErrors = 8

// describeValidation turns a schema validation error into a compact list
// of "at /path: problem" lines the model can act on.
func describeValidation(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var lines []string
	var walk func(u jsonschema.OutputUnit)
	walk = func(u jsonschema.OutputUnit) {
		if u.Error != nil && len(u.Errors) == 0 {
			loc := u.InstanceLocation
			if loc == "" {
				loc = "(root)"
			}
			lines = append(lines, "at "+loc+": "+u.Error.String())
		}
		for _, c := range u.Errors {
			walk(c)
		}
	}
	walk(*ve.BasicOutput())
	if len(lines) == 0 {
		return ve.Error()
	}
	if len(lines) > maxSchemaErrors {
		lines = append(lines[:maxSchemaErrors], fmt.Sprintf("… and %d more", len(lines)-maxSchemaErrors))
	}
	return strings.Join(lines, "; ")
}
