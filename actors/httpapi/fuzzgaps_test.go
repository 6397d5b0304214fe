package httpapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// FuzzCreateMoveBodies fuzzes the create and move body decoders: they
// never panic and fail only with typed invalid errors whose words are
// JSON's; a create they accept names a valid ID, an absolute directory, a
// valid title and either no model or a whole one, and both survive a JSON
// round trip unchanged.
func FuzzCreateMoveBodies(f *testing.F) {
	for _, s := range []string{
		`{"location":{"directory":"/tmp"}}`,
		`{"id":"ses_1","location":{"directory":"/a","workspaceID":"wrk_1"},"title":"t","agent":"plan","model":{"providerID":"p","id":"m"}}`,
		`{"location":{"directory":"/a"},"model":{"providerID":"p"}}`, `{"location":{"directory":"/a"},"model":{"id":" m"}}`,
		`{"location":{"directory":"/a"},"model":{}}`, `{"location":{"directory":"/a"},"model":null}`,
		`{"location":{"directory":"rel"}}`, `{"location":{"directory":"/a","workspaceID":"x"}}`, `{"location":{}}`,
		`{"location":{"directory":"/a"},"title":"\ud800"}`, `{"location":{"directory":"/a"},"Location":{"directory":"/b"}}`,
		`{"location":{"directory":"/a"}} x`, `{"location":{"directory":"/a\u0000b"}}`, `{`, ``, `null`, `[]`,
	} {
		f.Add(uint8(0), []byte(s))
		f.Add(uint8(1), []byte(s))
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		if kind%2 == 1 {
			loc, err := decodeMove(body)
			if err != nil {
				wantInvalid(t, err)
				return
			}
			if persistence.ValidateLocation(loc) != nil || !strings.HasPrefix(loc.Directory, "/") {
				t.Fatalf("accepted location %+v", loc)
			}
			b, err := json.Marshal(moveBody{Location: loc})
			if err != nil {
				t.Fatal(err)
			}
			again, err := decodeMove(b)
			if err != nil || again != loc {
				t.Fatalf("round trip of %s: %+v, %v; want %+v", b, again, err, loc)
			}
			return
		}
		req, err := decodeCreate(body)
		if err != nil {
			wantInvalid(t, err)
			return
		}
		if req.ID != "" && req.ID.Validate() != nil || persistence.ValidateLocation(req.Location) != nil ||
			persistence.ValidateTitle(req.Title) != nil {
			t.Fatalf("accepted invalid request %+v", req)
		}
		if m := req.Model; m != (messages.ModelRef{}) && checkModel("model.", m) != nil {
			t.Fatalf("accepted a partial model %+v", m)
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeCreate(b)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
		if !reflect.DeepEqual(again, req) {
			t.Fatalf("round trip:\n%+v\n%+v", req, again)
		}
	})
}
