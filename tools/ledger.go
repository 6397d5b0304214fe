package tools

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A process that dies without its graceful stop (SIGKILL, a crash) takes
// the shells of its running tool commands with it (their parent-death
// signal), but not what those shells started: a subshell, a pipeline, a
// make recipe keeps running, out of any record, after the restarted daemon
// has settled the call as interrupted. The ledger is how the next process
// finds them: every command's run token (runTokenVar, in the environment
// of every process the command starts) is written to a file, with the
// boot, before its shell starts, and OpenProcessLedger kills every process
// that carries one of the tokens the previous process left there: the
// data directory's lock makes that process dead, so its commands are over.
// Written after the start, an entry missed what a shell forked before a
// kill in between. The kernel ends the shells of a killed process (their
// parent-death signal) while the next one starts, so the sweep scans
// again until no such process is left, for at most sweepFor.
//
// The file is written on every start and end of a command, without
// fdatasync: it must outlive the process, not the machine, whose restart
// ends every process anyway (and changes the boot ID, so the records of an
// earlier boot are ignored).

// ProcessLedger records the run tokens of the commands a bash tool runs in
// a file (see above). It is safe for concurrent use; a nil ledger records
// nothing.
type ProcessLedger struct {
	mu   sync.Mutex
	path string
	boot string              // this boot's ID, read once at open
	live map[string]struct{} // run tokens of running commands
	// recorded, when set (by tests), is called with each token once it is
	// written.
	recorded func(token string)
}

// OpenProcessLedger kills the processes the commands of a previous process
// recorded in the file at path left running (see above), then
// returns a ledger that records there from now on, and how many processes
// it killed. Where processes cannot be identified (no /proc), it returns a
// nil ledger, which records nothing. Only one ledger may use a path at a
// time (sessiond keeps it in its locked data directory).
func OpenProcessLedger(path string) (l *ProcessLedger, killed int, err error) {
	boot, ok := bootID()
	if !ok {
		return nil, 0, nil
	}
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, 0, fmt.Errorf("tools: read process ledger: %w", err)
	}
	tokens := map[string]bool{}
	for _, e := range parseLedger(b) {
		if e.boot == boot {
			tokens[e.token] = true
		}
	}
	killed = sweep(tokens, sweepFor)
	l = &ProcessLedger{path: path, boot: boot, live: map[string]struct{}{}}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writeLocked(); err != nil {
		return nil, killed, err
	}
	return l, killed, nil
}

// record adds a command's run token to the ledger, before its shell
// starts; forget removes it once the command is over.
func (l *ProcessLedger) record(token string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.live[token] = struct{}{}
	_ = l.writeLocked() // best effort: a command is not refused over it
	if l.recorded != nil {
		l.recorded(token)
	}
}

func (l *ProcessLedger) forget(token string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.live[token]; ok {
		delete(l.live, token)
		_ = l.writeLocked()
	}
}

// ledgerEntry is one line of the file: a command of the boot boot (from
// /proc/sys/kernel/random/boot_id) whose processes carry token.
type ledgerEntry struct {
	boot, token string
}

// runTokenVar is the environment variable that marks the processes of one
// tool command.
const runTokenVar = "SESSIOND_TOOL_RUN"

// newRunToken returns a fresh run token.
func newRunToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand does not fail on Linux
	return hex.EncodeToString(b[:])
}

// withRunToken returns env (the process's own environment when nil, as
// exec has it) with the run token set.
func withRunToken(env []string, token string) []string {
	if env == nil {
		env = os.Environ()
	}
	return append(slices.Clip(env), runTokenVar+"="+token)
}

// writeLocked replaces the file with the live entries (through a
// temporary file and a rename, so a reader never sees half of it).
func (l *ProcessLedger) writeLocked() error {
	var b bytes.Buffer
	for _, token := range slices.Sorted(maps.Keys(l.live)) {
		fmt.Fprintf(&b, "%s %s\n", l.boot, token)
	}
	tmp := l.path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("tools: write process ledger: %w", err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		return fmt.Errorf("tools: write process ledger: %w", err)
	}
	return nil
}

// parseLedger reads the entries of a ledger file, skipping lines that do
// not parse.
func parseLedger(b []byte) []ledgerEntry {
	var out []ledgerEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 {
			out = append(out, ledgerEntry{boot: f[0], token: f[1]})
		}
	}
	return out
}

// sweepFor bounds how long a sweep waits for the processes it kills, and
// for shells still dying, to be gone.
const sweepFor = 2 * time.Second

// sweep kills the processes that carry one of tokens, scanning /proc
// again, after a pause that doubles from a millisecond, until a scan finds
// none or within is over, and returns how many it killed. Processes whose
// environment cannot be read (another user's, or one exiting) are not
// taken for the command's; zombies are already dead.
func sweep(tokens map[string]bool, within time.Duration) int {
	if len(tokens) == 0 {
		return 0
	}
	killed := map[int]bool{}
	end := time.Now().Add(within)
	for pause := time.Millisecond; ; pause = min(2*pause, 100*time.Millisecond) {
		found := false
		for _, pid := range carrying(tokens) {
			found = true
			if !killed[pid] && killCarrier(pid, tokens) {
				killed[pid] = true
			}
		}
		if !found || time.Now().After(end) {
			return len(killed)
		}
		time.Sleep(pause)
	}
}

// carrying returns the live processes whose environment holds one of
// tokens.
func carrying(tokens map[string]bool) []int {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	self := os.Getpid()
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		if state, ok := procState(pid); !ok || state == 'Z' || state == 'X' {
			continue
		}
		if tokens[runToken(pid)] {
			out = append(out, pid)
		}
	}
	return out
}

// runToken returns the run token in process pid's environment, or "".
func runToken(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return ""
	}
	prefix := []byte(runTokenVar + "=")
	for v := range bytes.SplitSeq(b, []byte{0}) {
		if t, ok := bytes.CutPrefix(v, prefix); ok {
			return string(t)
		}
	}
	return ""
}

// bootID returns the kernel's ID of this boot.
func bootID() (string, bool) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	id := strings.TrimSpace(string(b))
	return id, err == nil && id != "" && !strings.ContainsAny(id, " \t\n")
}

// procState returns the state of process pid from /proc/<pid>/stat (field
// 3, after the command name, which is in parentheses and may itself hold
// spaces and parentheses).
func procState(pid int) (byte, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+3 > len(b) || b[i+1] != ' ' {
		return 0, false
	}
	return b[i+2], true
}
