package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sessiond/sessiond/locations/llm"
	"github.com/sessiond/sessiond/locations/llm/script"
	"github.com/sessiond/sessiond/messages"
)

// TestDemoScriptCopies: the embedded demo.json is a byte-identical copy of
// examples/demo.json (go:embed cannot reach outside the package), and it
// parses as a script.
func TestDemoScriptCopies(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "..", "examples", "demo.json"))
	if err != nil {
		t.Fatal(err)
	}
	local, err := os.ReadFile("demo.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(example, local) || !bytes.Equal(local, demoScript) {
		t.Fatal("cmd/sessiond/demo.json differs from examples/demo.json; copy examples/demo.json over it")
	}
	p, err := script.Parse(demoScript)
	if err != nil {
		t.Fatal(err)
	}
	// The first request reads notes.txt.
	req := llm.Request{Model: messages.ModelRef{ProviderID: demoProvider, ID: demoModel},
		Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Kind: llm.PartText, Text: "hi"}}}}}
	var calls []string
	for ev, err := range p.Stream(context.Background(), req) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == llm.ToolCall {
			calls = append(calls, ev.Name+" "+string(ev.Input))
		}
	}
	if len(calls) != 1 || calls[0] != `read {"path":"notes.txt"}` {
		t.Fatalf("first step calls %q", calls)
	}
}

func TestEnsureDemoNotes(t *testing.T) {
	dir := t.TempDir()
	created, err := ensureDemoNotes(dir)
	if err != nil || !created {
		t.Fatalf("first call: %v, %v", created, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != demoNotes {
		t.Fatalf("notes.txt = %q", b)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	created, err = ensureDemoNotes(dir)
	if err != nil || created {
		t.Fatalf("second call: %v, %v", created, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.txt")); string(b) != "mine" {
		t.Fatalf("an existing notes.txt was overwritten: %q", b)
	}
	if _, err := ensureDemoNotes(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("no error for a missing directory")
	}
}
