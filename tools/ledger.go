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
	"syscall"
)

// A process that dies without its graceful stop (SIGKILL, a crash) takes
// the shells of its running tool commands with it (their parent-death
// signal), but not what those shells started: a subshell, a pipeline, a
// make recipe keeps running, out of any record, after the restarted daemon
// has settled the call as interrupted. The ledger is how the next process
// finds them: every running command's process group is written to a file,
// with what identifies it (the boot, the start time of the shell that
// leads it, a token in its processes' environment), and OpenProcessLedger kills the groups the previous process
// left there before recording its own: those whose shell is gone, which a
// live process's command never is.
//
// The file is written on every start and end of a command, without
// fdatasync: it must outlive the process, not the machine, whose restart
// ends every process anyway (and changes the boot ID, so the records of an
// earlier boot are ignored).

// ProcessLedger records the process groups of the commands a bash tool
// runs in a file (see above). It is safe for concurrent use; a nil ledger
// records nothing.
type ProcessLedger struct {
	mu   sync.Mutex
	path string
	boot string              // this boot's ID, read once at open
	live map[int]ledgerEntry // by process group ID
}

// OpenProcessLedger kills the process groups a previous process recorded
// in the file at path and left running (see above), then returns a ledger
// that records there from now on, and how many groups it killed. Where
// processes cannot be identified (no /proc), it returns a nil ledger, which
// records nothing. Only one process may use a path at a time (sessiond
// keeps it in its locked data directory).
func OpenProcessLedger(path string) (l *ProcessLedger, killed int, err error) {
	boot, ok := bootID()
	if !ok {
		return nil, 0, nil
	}
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return nil, 0, fmt.Errorf("tools: read process ledger: %w", err)
	}
	for _, e := range parseLedger(b) {
		if e.boot == boot && e.leftOver() {
			// Only the command's own processes are left in its group
			// (leftOver); the group's ID is what reaches them all.
			_ = syscall.Kill(-e.pgid, syscall.SIGKILL)
			killed++
		}
	}
	l = &ProcessLedger{path: path, boot: boot, live: map[int]ledgerEntry{}}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writeLocked(); err != nil {
		return nil, killed, err
	}
	return l, killed, nil
}

// record adds the group led by pid (a command's shell), whose processes
// carry token, to the ledger; forget removes it once the command is over.
func (l *ProcessLedger) record(pid int, token string) {
	if l == nil {
		return
	}
	start, ok := startTime(pid)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.live[pid] = ledgerEntry{pgid: pid, boot: l.boot, start: start, token: token}
	_ = l.writeLocked() // best effort: a command is not refused over it
}

func (l *ProcessLedger) forget(pid int) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.live[pid]; ok {
		delete(l.live, pid)
		_ = l.writeLocked()
	}
}

// ledgerEntry identifies a process group of a running command.
type ledgerEntry struct {
	pgid  int
	boot  string // /proc/sys/kernel/random/boot_id
	start uint64 // the leader's start time, clock ticks after boot
	// token is the command's run token (runTokenVar in the environment
	// of every process it starts): a process that lacks it is not the
	// command's, whatever its group ID.
	token string
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
	for _, pgid := range slices.Sorted(maps.Keys(l.live)) {
		e := l.live[pgid]
		fmt.Fprintf(&b, "%d %s %d %s\n", e.pgid, e.boot, e.start, e.token)
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
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			continue
		}
		pgid, err1 := strconv.Atoi(f[0])
		start, err2 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || pgid <= 1 {
			continue
		}
		out = append(out, ledgerEntry{pgid: pgid, boot: f[1], start: start, token: f[3]})
	}
	return out
}

// leftOver reports whether e's group is what a dead process's command
// left: its leader (the shell, which dies with the process that started
// it) is gone or a zombie, and members of the group that carry the
// command's run token remain, and nothing else does (a group ID reused by
// another program's group is left alone). A group whose leader runs is
// never one: it is a command of a live process (another sessiond, or
// another runtime of this one, recorded here).
func (e ledgerEntry) leftOver() bool {
	if state, _, _, ok := procStat(e.pgid); ok && state != 'Z' && state != 'X' {
		return false
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	ours := false
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		state, pgrp, start, ok := procStat(pid)
		if !ok || pgrp != e.pgid || state == 'Z' || state == 'X' {
			continue
		}
		if start < e.start || !hasRunToken(pid, e.token) {
			return false // someone else's process in the group
		}
		ours = true
	}
	return ours
}

// hasRunToken reports whether process pid's environment holds token.
func hasRunToken(pid int, token string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil || token == "" {
		return false
	}
	want := []byte(runTokenVar + "=" + token)
	for v := range bytes.SplitSeq(b, []byte{0}) {
		if bytes.Equal(v, want) {
			return true
		}
	}
	return false
}

// bootID returns the kernel's ID of this boot.
func bootID() (string, bool) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	id := strings.TrimSpace(string(b))
	return id, err == nil && id != "" && !strings.ContainsAny(id, " \t\n")
}

// startTime returns the start time of process pid, in clock ticks after
// boot.
func startTime(pid int) (uint64, bool) {
	_, _, start, ok := procStat(pid)
	return start, ok
}

// procStat returns the state, process group and start time of process
// pid from /proc/<pid>/stat (fields 3, 5 and 22, counted after the command
// name, which is in parentheses and may itself hold spaces and
// parentheses).
func procStat(pid int) (state byte, pgrp int, start uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, 0, false
	}
	pg, err1 := strconv.Atoi(f[2])
	st, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, 0, false
	}
	return f[0][0], pg, st, true
}
