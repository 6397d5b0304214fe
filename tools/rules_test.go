package tools

import (
	"errors"
	"testing"
)

func TestRulesetEvaluatePrecedence(t *testing.T) {
	rules := Ruleset{
		{Permission: "*", Pattern: "*", Action: Ask},
		{Permission: "bash", Pattern: "*", Action: Allow},
		{Permission: "bash", Pattern: "rm *", Action: Deny},
		{Permission: "bash", Pattern: "rm -i *", Action: Ask},
		{Permission: "read", Pattern: "*", Action: Allow},
		{Permission: "read", Pattern: "*.env", Action: Deny},
		{Permission: "ed?t", Pattern: "docs/*", Action: Allow},
		{Permission: "external_*", Pattern: "/srv/*", Action: Deny},
	}
	tests := []struct {
		permission, pattern string
		want                Action
	}{
		{"bash", "ls -la", Allow},
		{"bash", "rm -rf /", Deny},        // a later, narrower rule wins
		{"bash", "rm -i file", Ask},       // the last matching rule wins
		{"read", "/p/main.go", Allow},     // permission-specific allow
		{"read", "/p/.env", Deny},         // later deny beats earlier allow
		{"edit", "docs/readme.md", Allow}, // wildcard permission name
		{"edit", "src/main.go", Ask},      // only the catch-all matches
		{"external_directory", "/srv/x/*", Deny},
		{"external_directory", "/home/x/*", Ask},
		{"webfetch", "https://example.com", Ask}, // catch-all ask
	}
	for _, tc := range tests {
		if got := rules.Evaluate(tc.permission, tc.pattern); got != tc.want {
			t.Errorf("Evaluate(%q, %q) = %s, want %s", tc.permission, tc.pattern, got, tc.want)
		}
	}
}

func TestRulesetDefaultIsAsk(t *testing.T) {
	var none Ruleset
	if got := none.Evaluate("bash", "ls"); got != Ask {
		t.Fatalf("empty ruleset: got %s, want ask", got)
	}
	only := Ruleset{{Permission: "read", Pattern: "*", Action: Allow}}
	if got := only.Evaluate("bash", "ls"); got != Ask {
		t.Fatalf("no matching rule: got %s, want ask", got)
	}
}

func TestRulesetOrderMatters(t *testing.T) {
	allowThenDeny := Ruleset{{Permission: "bash", Pattern: "*", Action: Allow}, {Permission: "bash", Pattern: "*", Action: Deny}}
	denyThenAllow := Ruleset{{Permission: "bash", Pattern: "*", Action: Deny}, {Permission: "bash", Pattern: "*", Action: Allow}}
	if got := allowThenDeny.Evaluate("bash", "ls"); got != Deny {
		t.Errorf("allow then deny: got %s", got)
	}
	if got := denyThenAllow.Evaluate("bash", "ls"); got != Allow {
		t.Errorf("deny then allow: got %s", got)
	}
}

func TestRulesetDeniesAll(t *testing.T) {
	tests := []struct {
		name  string
		rules Ruleset
		perm  string
		want  bool
	}{
		{"no rules", nil, "bash", false},
		{"star deny", Ruleset{{"bash", "*", Deny}}, "bash", true},
		{"double star deny", Ruleset{{"bash", "**", Deny}}, "bash", true},
		{"wildcard permission deny", Ruleset{{"*", "*", Deny}}, "bash", true},
		{"narrow deny only", Ruleset{{"bash", "rm *", Deny}}, "bash", false},
		{"deny then narrow allow", Ruleset{{"bash", "*", Deny}, {"bash", "ls", Allow}}, "bash", false},
		{"deny then narrow ask", Ruleset{{"bash", "*", Deny}, {"bash", "git *", Ask}}, "bash", false},
		{"allow then deny all", Ruleset{{"bash", "ls", Allow}, {"bash", "*", Deny}}, "bash", true},
		{"other permission denied", Ruleset{{"edit", "*", Deny}}, "bash", false},
		{"global deny then allow", Ruleset{{"*", "*", Deny}, {"read", "*", Allow}}, "read", false},
		{"global deny then allow other", Ruleset{{"*", "*", Deny}, {"read", "*", Allow}}, "bash", true},
	}
	for _, tc := range tests {
		if got := tc.rules.DeniesAll(tc.perm); got != tc.want {
			t.Errorf("%s: DeniesAll(%q) = %v, want %v", tc.name, tc.perm, got, tc.want)
		}
	}
}

func TestRulesetValidate(t *testing.T) {
	good := Ruleset{{"bash", "*", Allow}, {"read", "*.env", Deny}, {"*", "*", Ask}}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid rules: %v", err)
	}
	for _, bad := range []Ruleset{
		{{"", "*", Allow}},
		{{"bash", "", Allow}},
		{{"bash", "*", "maybe"}},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalidRule) {
			t.Errorf("Validate(%v) = %v, want ErrInvalidRule", bad, err)
		}
	}
	if _, err := NewPermissions(PermissionsConfig{Agents: map[string]Ruleset{"build": {{"bash", "*", "yes"}}}}); !errors.Is(err, ErrInvalidRule) {
		t.Errorf("NewPermissions with a bad rule: %v, want ErrInvalidRule", err)
	}
}
