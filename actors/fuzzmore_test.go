package actors

import (
	"strings"
	"testing"
)

// FuzzNormalizeSummary: a model's summary, however formatted, normalizes
// to every heading once and in order; no line of content is dropped; and
// normalizing again changes nothing.
func FuzzNormalizeSummary(f *testing.F) {
	f.Add("## Objective\nfix it\n## Next Move\nrun tests")
	f.Add("preamble\n**Objective**\nx\n### Completed:\n- a\n__Blocked__\n")
	f.Add("")
	f.Add("## Work State\n### Active\nwip\n## objective:\nlate")
	f.Add("Objective:\n\n(none)\n\r\n## Next Move\n\n")
	f.Fuzz(func(t *testing.T, text string) {
		out := normalizeSummary(text)
		pos := 0
		for _, h := range summaryHeadings {
			i := strings.Index(out[pos:], h+"\n")
			if i < 0 && !strings.HasSuffix(out, h) {
				t.Fatalf("heading %q missing or out of order in\n%s", h, out)
			}
			pos += max(i, 0)
		}
		for _, line := range strings.Split(text, "\n") {
			if summaryHeading(line) == "" && strings.TrimSpace(line) != "" && !strings.Contains(out, strings.TrimSpace(line)) {
				t.Fatalf("line %q of\n%q\nis lost from\n%q", line, text, out)
			}
		}
		if again := normalizeSummary(out); again != out {
			t.Fatalf("not idempotent:\n%q\n%q", out, again)
		}
	})
}
