package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/persistence"
	"github.com/sessiond/sessiond/tools"
)

// openapiDoc is the part of the OpenAPI document the tests check.
type openapiDoc struct {
	OpenAPI    string                          `json:"openapi"`
	Paths      map[string]map[string]openapiOp `json:"paths"`
	Components struct {
		Parameters map[string]openapiParam    `json:"parameters"`
		Responses  map[string]json.RawMessage `json:"responses"`
		Schemas    map[string]json.RawMessage `json:"schemas"`
	} `json:"components"`
}

type openapiOp struct {
	OperationID string                     `json:"operationId"`
	Parameters  []openapiParam             `json:"parameters"`
	Responses   map[string]json.RawMessage `json:"responses"`
	Security    *[]map[string][]string     `json:"security"`
}

type openapiParam struct {
	Ref  string `json:"$ref"`
	Name string `json:"name"`
	In   string `json:"in"`
}

func loadOpenAPI(t *testing.T) openapiDoc {
	t.Helper()
	var doc openapiDoc
	dec := json.NewDecoder(bytes.NewReader(openapiJSON))
	if err := dec.Decode(&doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// Every route of the table is in the document with its method, and every
// operation of the document is a route.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	registered := map[string]route{}
	for _, rt := range routes {
		key := strings.ToLower(rt.method) + " " + rt.path
		if _, dup := registered[key]; dup {
			t.Fatalf("route %s twice", key)
		}
		registered[key] = rt
		op, ok := doc.Paths[rt.path][strings.ToLower(rt.method)]
		if !ok {
			t.Errorf("route %s %s is not in openapi.json", rt.method, rt.path)
			continue
		}
		// Public routes say so; the others inherit bearer security.
		if public := op.Security != nil && len(*op.Security) == 0; public != rt.public {
			t.Errorf("%s %s: public %v in the document, %v in the table", rt.method, rt.path, public, rt.public)
		}
		if !rt.public {
			if _, ok := op.Responses["401"]; !ok {
				t.Errorf("%s %s: no 401 response", rt.method, rt.path)
			}
		}
		// Every route refuses browser requests it does not allow.
		if _, ok := op.Responses["403"]; !ok {
			t.Errorf("%s %s: no 403 response", rt.method, rt.path)
		}
	}
	// Create and model selection answer 400 model.not-found too.
	if inv := string(doc.Components.Responses["Invalid"]); !strings.Contains(inv, "`model.not-found`") {
		t.Errorf("the Invalid response leaves out model.not-found: %s", inv)
	}
	ids := map[string]bool{}
	refs := regexp.MustCompile(`"\$ref": "#/components/(\w+)/(\w+)"`)
	found := refs.FindAllStringSubmatch(string(openapiJSON), -1)
	if len(found) < 50 {
		t.Fatalf("only %d $refs found; the pattern no longer matches the document's layout", len(found))
	}
	for _, m := range found {
		var ok bool
		switch m[1] {
		case "schemas":
			_, ok = doc.Components.Schemas[m[2]]
		case "responses":
			_, ok = doc.Components.Responses[m[2]]
		case "parameters":
			_, ok = doc.Components.Parameters[m[2]]
		}
		if !ok {
			t.Errorf("dangling $ref %s/%s", m[1], m[2])
		}
	}
	pathParam := regexp.MustCompile(`\{(\w+)\}`)
	for path, ops := range doc.Paths {
		for method, op := range ops {
			key := method + " " + path
			if _, ok := registered[key]; !ok {
				t.Errorf("openapi.json documents %s, which is no route", key)
			}
			if op.OperationID == "" || ids[op.OperationID] {
				t.Errorf("%s: operationId %q missing or repeated", key, op.OperationID)
			}
			ids[op.OperationID] = true
			if len(op.Responses) == 0 {
				t.Errorf("%s: no responses", key)
			}
			var declared []string
			for _, p := range op.Parameters {
				if p.Ref != "" {
					p = doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
				}
				if p.In == "path" {
					declared = append(declared, p.Name)
				}
			}
			for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
				if !slices.Contains(declared, m[1]) {
					t.Errorf("%s: path parameter %s is not declared", key, m[1])
				}
			}
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	e := newHarnessEnv(t, nil)
	r := e.do("GET", "/api/openapi.json", nil).want(t, http.StatusOK)
	if !bytes.Equal(r.body, openapiJSON) || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("served document differs (%s)", r.header.Get("Content-Type"))
	}
}

// TestOpenAPIRequiresWhatIsAlwaysSent: a schema of a body the API encodes
// from a Go type lists as required every member the encoding always
// writes (no omitempty or omitzero) and documents every member. The
// Session schema left tokens and cost out of required, though every
// Session carries both; the Message schema documented 8 of its 21
// members, and its parts as bare objects.
func TestOpenAPIRequiresWhatIsAlwaysSent(t *testing.T) {
	doc := loadOpenAPI(t)
	for name, typ := range map[string]reflect.Type{
		"Session":           reflect.TypeFor[persistence.Session](),
		"Admitted":          reflect.TypeFor[persistence.Admitted](),
		"PermissionRequest": reflect.TypeFor[tools.Request](),
		"Message":           reflect.TypeFor[persistence.Message](),
		"Part":              reflect.TypeFor[persistence.Part](),
		"ToolPart":          reflect.TypeFor[persistence.ToolPart](),
		"Retry":             reflect.TypeFor[persistence.Retry](),
		"Compaction":        reflect.TypeFor[persistence.Compaction](),
	} {
		var schema struct {
			Required   []string                   `json:"required"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(doc.Components.Schemas[name], &schema); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			member, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if member == "-" || !f.IsExported() {
				continue
			}
			if _, ok := schema.Properties[member]; !ok {
				t.Errorf("%s: member %s is not among the properties", name, member)
			}
			always := !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero")
			if required := slices.Contains(schema.Required, member); required != always {
				t.Errorf("%s: member %s required %v in the document, always sent %v", name, member, required, always)
			}
		}
	}
}
