package patch

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkApply10kLines100Hunks parses and applies a 100-hunk patch to a
// 10,000-line file in memory, and reports the ratio to copying the
// file's bytes in memory (the floor for producing new content), measured in the same
// run.
func BenchmarkApply10kLines100Hunks(b *testing.B) {
	var file, p strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&file, "line %05d of the benchmark file\n", i)
	}
	p.WriteString("*** Begin Patch\n*** Update File: big.txt\n")
	for h := range 100 {
		n := h*100 + 50
		p.WriteString("@@\n")
		for i := n - 3; i < n; i++ {
			fmt.Fprintf(&p, " line %05d of the benchmark file\n", i)
		}
		fmt.Fprintf(&p, "-line %05d of the benchmark file\n+LINE %05d\n", n, n)
		for i := n + 1; i <= n+3; i++ {
			fmt.Fprintf(&p, " line %05d of the benchmark file\n", i)
		}
	}
	p.WriteString("*** End Patch\n")
	content, text := []byte(file.String()), p.String()
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	for b.Loop() {
		parsed, err := Parse(text)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Apply(content, parsed.Ops[0].Hunks); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	const rounds = 1000
	dst := make([]byte, len(content))
	start := time.Now()
	for range rounds {
		copy(dst, content)
	}
	floor := time.Since(start) / rounds
	if !bytes.Equal(dst, content) {
		b.Fatal("copy floor is broken")
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(floor), "x-memcopy")
}
