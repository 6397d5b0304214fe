// Package storetest is the conformance suite every persistence.Store
// implementation must pass. Run calls one subtest per behaviour of the Store
// contract; each subtest opens a fresh store through the supplied factory.
//
// It also holds the measuring helpers the repository's benchmarks share
// (FdatasyncRate and FdatasyncRateBusy, the raw disk limit a figure is
// divided by; Usage and Written, the process's CPU, page faults and bytes
// written; the Report functions): see docs/performance.md.
//
// # Usage
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, opts persistence.Options) persistence.Store {
//			st, err := persistence.Open(filepath.Join(t.TempDir(), "db"), opts)
//			...
//			t.Cleanup(func() { st.Close() })
//			return st
//		})
//	}
package storetest
