package actors

import "testing"

// TestCoordinator drives the pure coordinator through the SEED.md
// scenarios and checks every effect.
func TestCoordinator(t *testing.T) {
	type step struct {
		in   string // wake, run, interrupt, next, done, wait
		want effect
		next bool // for "next"
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"wake starts, drain ends", []step{
			{in: "wake", want: effect{start: true}},
			{in: "next", next: false},
			{in: "done", want: effect{releaseInterrupts: true, releaseWaits: true}},
		}},
		{"three wakes coalesce into one follow-up", []step{
			{in: "wake", want: effect{start: true}},
			{in: "wake"}, {in: "wake"}, {in: "wake"},
			{in: "next", next: true},
			{in: "next", next: false},
			{in: "done", want: effect{releaseInterrupts: true, releaseWaits: true}},
		}},
		{"run joins", []step{
			{in: "wake", want: effect{start: true}},
			{in: "run", want: effect{replyNow: true, joined: true}},
			{in: "next", next: false},
		}},
		{"run while idle forces", []step{
			{in: "run", want: effect{start: true, force: true, replyNow: true}},
		}},
		{"interrupt clears the coalesced wake", []step{
			{in: "wake", want: effect{start: true}},
			{in: "wake"},
			{in: "interrupt", want: effect{cancel: "user"}},
			{in: "next", next: false},
			{in: "done", want: effect{releaseInterrupts: true, releaseWaits: true}},
		}},
		{"wake during interrupt cleanup starts a fresh busy period", []step{
			{in: "wake", want: effect{start: true}},
			{in: "interrupt", want: effect{cancel: "user"}},
			{in: "wake"},
			{in: "run", want: effect{replyNow: true}}, // starts the next busy period, not this one
			{in: "done", want: effect{releaseInterrupts: true, start: true, force: true}},
			{in: "next", next: false},
			{in: "done", want: effect{releaseInterrupts: true, releaseWaits: true}},
		}},
		// A wake alone, with no run to mask it: the interrupt's cleanup
		// must not swallow input admitted while it runs.
		{"wake during interrupt cleanup alone restarts unforced", []step{
			{in: "wake", want: effect{start: true}},
			{in: "interrupt", want: effect{cancel: "user"}},
			{in: "wake"},
			{in: "next", next: false},
			{in: "done", want: effect{releaseInterrupts: true, start: true}},
		}},
		{"run during closing restarts forced", []step{
			{in: "wake", want: effect{start: true}},
			{in: "next", next: false},
			{in: "run", want: effect{replyNow: true}},
			{in: "done", want: effect{releaseInterrupts: true, start: true, force: true}},
		}},
		{"a wake during a drain that fails starts a fresh busy period", []step{
			{in: "wake", want: effect{start: true}},
			{in: "wake"},
			// the drain failed: no next, straight to its terminal
			{in: "fail"},
			{in: "done", want: effect{releaseInterrupts: true, start: true}},
			{in: "next", next: false},
			{in: "done", want: effect{releaseInterrupts: true, releaseWaits: true}},
		}},
		// A run after a drain failed does not join the busy period whose
		// failure is being committed: it starts the next one, forced.
		{"run after a drain failed restarts forced", []step{
			{in: "wake", want: effect{start: true}},
			{in: "fail"},
			{in: "run", want: effect{replyNow: true}},
			{in: "done", want: effect{releaseInterrupts: true, start: true, force: true}},
			{in: "next", next: false},
			{in: "done", want: effect{releaseInterrupts: true, releaseWaits: true}},
		}},
		// An interrupted drain fails too; the interrupt's cleanup already
		// closes the busy period, and a run then still restarts it.
		{"fail during an interrupt changes nothing", []step{
			{in: "wake", want: effect{start: true}},
			{in: "interrupt", want: effect{cancel: "user"}},
			{in: "fail"},
			{in: "run", want: effect{replyNow: true}},
			{in: "done", want: effect{releaseInterrupts: true, start: true, force: true}},
		}},
		// The interrupt clears the coalesced run too, not only the
		// restart: a wake after it restarts unforced.
		{"interrupt during closing clears a coalesced run", []step{
			{in: "wake", want: effect{start: true}},
			{in: "next", next: false},
			{in: "run", want: effect{replyNow: true}},
			{in: "interrupt", want: effect{}}, // nothing runs to cancel; answered at done
			{in: "wake"},
			{in: "done", want: effect{releaseInterrupts: true, start: true}},
		}},
		{"interrupt during closing clears a coalesced wake", []step{
			{in: "wake", want: effect{start: true}},
			{in: "next", next: false},
			{in: "wake"},
			{in: "interrupt", want: effect{}},
			{in: "done", want: effect{releaseInterrupts: true, releaseWaits: true}},
		}},
		// A second interrupt waits for the cleanup the first started; it
		// cancels nothing more (nor changes the reason).
		{"a second interrupt joins the first", []step{
			{in: "wake", want: effect{start: true}},
			{in: "interrupt", want: effect{cancel: "user"}},
			{in: "interrupt", want: effect{}},
			{in: "next", next: false},
			{in: "done", want: effect{releaseInterrupts: true, releaseWaits: true}},
		}},
		{"wait while closing waits", []step{
			{in: "wake", want: effect{start: true}},
			{in: "next", next: false},
			{in: "wait", want: effect{}},
			{in: "done", want: effect{releaseInterrupts: true, releaseWaits: true}},
		}},
		{"idle interrupt and wait answer at once", []step{
			{in: "interrupt", want: effect{replyNow: true}},
			{in: "wait", want: effect{replyNow: true}},
		}},
		{"wait while busy waits", []step{
			{in: "wake", want: effect{start: true}},
			{in: "wait", want: effect{}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c coordinator
			for i, s := range tc.steps {
				var got effect
				switch s.in {
				case "wake":
					got = c.wake()
				case "run":
					got = c.run()
				case "interrupt":
					got = c.interrupt("user")
				case "wait":
					got = c.wait()
				case "done":
					got = c.done()
				case "fail":
					c.fail()
				case "next":
					if n := c.next(); n != s.next {
						t.Fatalf("step %d next()=%v, want %v", i, n, s.next)
					}
					continue
				}
				if got != s.want {
					t.Fatalf("step %d %s: effect %+v, want %+v", i, s.in, got, s.want)
				}
			}
		})
	}
}

func TestRetryDelay(t *testing.T) {
	for attempt, want := range map[int]int64{1: 2000, 2: 4000, 3: 8000, 4: 16000} {
		if got := retryDelay(attempt, 0).Milliseconds(); got != want {
			t.Errorf("attempt %d: %d ms, want %d", attempt, got, want)
		}
	}
	if got := retryDelay(1, 5e9).Milliseconds(); got != 5000 {
		t.Errorf("retryAfter 5 s: %d ms", got)
	}
	// A provider's retry-after is capped: 1e300 s would park the Session.
	if got := retryDelay(1, 1<<62); got != maxRetryAfter {
		t.Errorf("retry after 1<<62 ns: %v, want %v", got, maxRetryAfter)
	}
}

func TestNormalizeSummary(t *testing.T) {
	got := normalizeSummary("## Objective\nShip it\n## Next Move\nTest")
	want := "## Objective\nShip it\n\n## Important Details\n(none)\n\n## Work State\n\n### Completed\n(none)\n\n### Active\n(none)\n\n### Blocked\n(none)\n\n## Next Move\nTest"
	if got != want {
		t.Fatalf("summary:\n%s\nwant:\n%s", got, want)
	}
	// Other heading forms are recognized, and nothing is dropped: text
	// before the first heading counts as the objective.
	got = normalizeSummary("Checkpoint follows.\n# objective\nShip the parser.\n**Important Details:**\nUse tabs.\n### Active:\nTests\nNext Move:\nRelease")
	want = "## Objective\nCheckpoint follows.\nShip the parser.\n\n## Important Details\nUse tabs.\n\n## Work State\n\n### Completed\n(none)\n\n### Active\nTests\n\n### Blocked\n(none)\n\n## Next Move\nRelease"
	if got != want {
		t.Fatalf("summary:\n%s\nwant:\n%s", got, want)
	}
}
