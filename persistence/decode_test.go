package persistence_test

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

func TestDecodeRequests(t *testing.T) {
	for _, tc := range []struct {
		body  string
		field string // substring of the error, "" for success
	}{
		{`{"location":{"directory":"/tmp"}}`, ""},
		{`{"id":"ses_x","location":{"directory":"/tmp"},"agent":"build","model":{"providerID":"a","id":"b"}}`, ""},
		{`{"location":{"directory":"tmp"}}`, "location.directory"},
		{`{"location":{}}`, "location.directory"},
		{`{"id":"bad","location":{"directory":"/tmp"}}`, "sessionID"},
		{`{"location":{"directory":5}}`, "location.directory"},
		{`{"location":{"directory":"/tmp"},"extra":1}`, "unknown field"},
		{`{"location":{"directory":"/tmp"}} {}`, "after the JSON object"},
		{`{"location":`, "truncated"},
		{``, "empty"},
		{`[`, "truncated"},
	} {
		_, err := persistence.DecodeCreateSession([]byte(tc.body))
		check(t, tc.body, err, tc.field)
	}
	for _, tc := range []struct {
		body  string
		field string
	}{
		{`{"prompt":{"text":"hi"}}`, ""},
		{`{"id":"msg_1","prompt":{"text":"hi"},"delivery":"queue","resume":false}`, ""},
		{`{"prompt":{"text":""}}`, "prompt.text"},
		{`{"prompt":{"text":"hi"},"delivery":"soon"}`, "delivery"},
		{`{"id":"x","prompt":{"text":"hi"}}`, "id"},
		{`{"prompt":{"text":"hi"},"resume":"yes"}`, "resume"},
		{`{"prompt":"hi"}`, "prompt"},
	} {
		_, err := persistence.DecodePromptRequest([]byte(tc.body))
		check(t, tc.body, err, tc.field)
	}
}

func check(t *testing.T, body string, err error, field string) {
	t.Helper()
	if field == "" {
		if err != nil {
			t.Errorf("%s: %v", body, err)
		}
		return
	}
	if err == nil || messages.TypeOf(err) != messages.ErrInvalid || !strings.Contains(err.Error(), field) {
		t.Errorf("%s: want invalid error naming %q, got %v", body, field, err)
	}
}

func FuzzDecodeCreateSession(f *testing.F) {
	f.Add([]byte(`{"id":"ses_x","location":{"directory":"/tmp","workspaceID":"wrk_1"},"title":"t"}`))
	f.Add([]byte(`{"location":{"directory":"/"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := persistence.DecodeCreateSession(b)
		if err != nil {
			if messages.TypeOf(err) != messages.ErrInvalid {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if req.ID != "" && req.ID.Validate() != nil || !strings.HasPrefix(req.Location.Directory, "/") {
			t.Fatalf("accepted invalid request %+v", req)
		}
	})
}

func FuzzDecodePromptRequest(f *testing.F) {
	f.Add([]byte(`{"id":"msg_1","prompt":{"text":"hi","files":[{"mime":"text/plain","url":"file:///a"}]},"delivery":"queue","resume":true}`))
	f.Add([]byte(`{"prompt":{"text":"x"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := persistence.DecodePromptRequest(b)
		if err != nil {
			if messages.TypeOf(err) != messages.ErrInvalid {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if strings.TrimSpace(req.Prompt.Text) == "" && len(req.Prompt.Files) == 0 {
			t.Fatalf("accepted empty prompt %+v", req)
		}
		if req.Delivery != "" && !req.Delivery.Valid() {
			t.Fatalf("accepted delivery %q", req.Delivery)
		}
	})
}
