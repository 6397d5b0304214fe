package tools

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// rawScan reads path sequentially through a 64 KiB buffer counting
// newlines: the physical floor for finding the last page of a file.
func rawScan(b *testing.B, path string) (time.Duration, int) {
	b.Helper()
	start := time.Now()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, readBufferSize)
	lines := 0
	for {
		n, err := f.Read(buf)
		lines += bytes.Count(buf[:n], []byte{'\n'})
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start), lines
}

// BenchmarkRead100MB reads the first and the last page of a 100 MB text
// file. It reports allocated bytes per read (the file is streamed, so this
// stays near one buffer plus the page) and the ratio to a floor measured in
// the same run: reading one raw buffer for the first page, a raw sequential
// scan of the whole file for the last page.
func BenchmarkRead100MB(b *testing.B) {
	h := newHarness(b, harnessConfig{rules: allowAll})
	const size = 100 << 20
	path := filepath.Join(h.root, "big.log")
	lines := writeLargeFile(b, path, size, 100)
	ctx := context.Background()
	run := func(b *testing.B, in ReadInput) {
		raw, _ := json.Marshal(in)
		call := Call{SessionID: "ses_bench", Name: "read", Input: raw}
		b.ReportAllocs()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.ResetTimer()
		for b.Loop() {
			if _, err := h.reg.Execute(ctx, call); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N), "alloc-bytes/op")
		b.ReportMetric(float64(size), "file-bytes")
	}
	b.Run("first-page", func(b *testing.B) {
		run(b, ReadInput{Path: "big.log"})
		// Floor: open the file and read one buffer of it.
		const rounds = 200
		buf := make([]byte, readBufferSize)
		start := time.Now()
		for range rounds {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(f, buf); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		floor := time.Since(start) / rounds
		b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(floor), "x-raw-buffer")
	})
	b.Run("last-page", func(b *testing.B) {
		run(b, ReadInput{Path: "big.log", Offset: lines - 1999})
		var best time.Duration
		for range 3 {
			d, n := rawScan(b, path)
			if n != lines {
				b.Fatalf("raw scan counted %d lines, want %d", n, lines)
			}
			if best == 0 || d < best {
				best = d
			}
		}
		perOp := float64(b.Elapsed()) / float64(b.N)
		b.ReportMetric(perOp/float64(best), "x-raw-scan")
	})
}

// patchBench builds a 10,000-line file and two 100-hunk patches that
// change every hundredth line and change it back.
func patchBench() (content string, forward, backward string) {
	var file strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&file, "line %05d of the benchmark file\n", i)
	}
	var fw, bw strings.Builder
	fw.WriteString("*** Begin Patch\n*** Update File: big.txt\n")
	bw.WriteString("*** Begin Patch\n*** Update File: big.txt\n")
	for h := range 100 {
		n := h*100 + 50
		ctx := func(i int) string { return fmt.Sprintf(" line %05d of the benchmark file\n", i) }
		old := fmt.Sprintf("line %05d of the benchmark file", n)
		mod := fmt.Sprintf("LINE %05d OF THE BENCHMARK FILE", n)
		for _, w := range []struct {
			b        *strings.Builder
			from, to string
		}{{&fw, old, mod}, {&bw, mod, old}} {
			w.b.WriteString("@@\n" + ctx(n-3) + ctx(n-2) + ctx(n-1))
			w.b.WriteString("-" + w.from + "\n+" + w.to + "\n")
			w.b.WriteString(ctx(n+1) + ctx(n+2) + ctx(n+3))
		}
	}
	fw.WriteString("*** End Patch\n")
	bw.WriteString("*** End Patch\n")
	return file.String(), fw.String(), bw.String()
}

// BenchmarkApplyPatch10kLines100Hunks applies a 100-hunk patch to a
// 10,000-line file through the registry (parse, resolve, permission,
// preflight, atomic replace), alternating with its inverse. It reports the
// ratio to writing and renaming a file of the same size, measured in the
// same run.
func BenchmarkApplyPatch10kLines100Hunks(b *testing.B) {
	h := newHarness(b, harnessConfig{rules: allowAll})
	content, forward, backward := patchBench()
	path := h.write(b, "big.txt", content)
	inputs := make([]json.RawMessage, 2)
	for i, p := range []string{forward, backward} {
		inputs[i], _ = json.Marshal(ApplyPatchInput{PatchText: p})
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(content)))
	i := 0
	for b.Loop() {
		if _, err := h.reg.Execute(ctx, Call{SessionID: "ses_bench", Name: "apply_patch", Input: inputs[i%2]}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.StopTimer()
	if i%2 == 1 {
		if _, err := h.reg.Execute(ctx, Call{SessionID: "ses_bench", Name: "apply_patch", Input: inputs[1]}); err != nil {
			b.Fatal(err)
		}
	}
	if got := readFileB(b, path); got != content {
		b.Fatal("forward and backward patches did not restore the file")
	}
	// Floor: write the same bytes to a temporary file and rename it over.
	const rounds = 20
	start := time.Now()
	for r := range rounds {
		tmp := filepath.Join(h.root, fmt.Sprintf(".floor%d", r))
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(h.root, "floor.txt")); err != nil {
			b.Fatal(err)
		}
	}
	floor := time.Since(start) / rounds
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(floor), "x-write-rename")
}

func readFileB(b *testing.B, p string) string {
	b.Helper()
	f, err := os.Open(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var sb strings.Builder
	if _, err := io.Copy(&sb, bufio.NewReader(f)); err != nil {
		b.Fatal(err)
	}
	return sb.String()
}
