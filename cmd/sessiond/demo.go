package main

import (
	_ "embed" // the demo script is embedded
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// demoScript is the offline demo model's script: read notes.txt, run
// ls -la, add hello.txt, then summarize. It is a copy of
// examples/demo.json (go:embed cannot reach outside the package
// directory); a test keeps the two identical.
//
//go:embed demo.json
var demoScript []byte

// The demo model's reference, demo/scripted, used when no provider is
// configured.
const (
	demoProvider = "demo"
	demoModel    = "scripted"
)

// demoNotice is printed when the demo model stands in for a provider.
const demoNotice = "no provider configured: using the built-in demo model (examples/demo.json)"

// demoNotes is the notes.txt the demo model reads when the directory has
// none.
const demoNotes = `These are the notes the sessiond demo model reads.

The demo script reads this file, lists the directory with ls -la, and adds
hello.txt with apply_patch. Configure a provider (see docs/cli.md) to talk to
a real model instead.
`

// ensureDemoNotes creates notes.txt in dir unless it exists, and reports
// whether it did.
func ensureDemoNotes(dir string) (bool, error) {
	path := filepath.Join(dir, "notes.txt")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if _, err := f.WriteString(demoNotes); err != nil {
		_ = f.Close()
		return false, err
	}
	return true, f.Close()
}
