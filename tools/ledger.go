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
// finds them: every command's run token (runTokenVar, in the environment
// of every process the command starts) is written to a file, with the
// boot, before its shell starts, and OpenProcessLedger kills the process
// groups the previous process's commands left: groups whose members all
// carry one of its tokens and whose leader (the shell) is gone, which a
// live process's command's never is. Written after the start, an entry
// missed what a shell forked before a kill in between.
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

// OpenProcessLedger kills the process groups the commands of a previous
// process recorded in the file at path left running (see above), then
// returns a ledger that records there from now on, and how many groups it
// killed. Where processes cannot be identified (no /proc), it returns a
// nil ledger, which records nothing. Only one process may use a path at a
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
	for _, pgid := range leftOverGroups(tokens) {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		killed++
	}
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

// leftOverGroups returns the process groups a dead process's commands
// left, among those whose processes carry one of tokens: the group's
// leader (the command's shell, which dies with the process that started
// it) is gone or a zombie, and its every other member carries the same
// token. A group whose leader runs is a live process's command, or a job
// the shell put in a group of its own; a group with a process that lacks
// the token is someone else's, whose group ID the kernel reused.
func leftOverGroups(tokens map[string]bool) []int {
	if len(tokens) == 0 {
		return nil
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	type group struct {
		token string
		mixed bool // members with another token, or none
	}
	groups := map[int]*group{}
	var others []int // groups of processes that carry none of tokens
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		state, pgrp, ok := procStat(pid)
		if !ok || state == 'Z' || state == 'X' {
			continue
		}
		token := runToken(pid)
		if !tokens[token] {
			others = append(others, pgrp)
			continue
		}
		g := groups[pgrp]
		if g == nil {
			groups[pgrp] = &group{token: token}
		} else if g.token != token {
			g.mixed = true
		}
	}
	for _, pgrp := range others {
		if g := groups[pgrp]; g != nil {
			g.mixed = true
		}
	}
	var out []int
	for pgrp, g := range groups {
		if g.mixed || pgrp <= 1 {
			continue
		}
		if state, _, ok := procStat(pgrp); ok && state != 'Z' && state != 'X' {
			continue // its leader runs
		}
		out = append(out, pgrp)
	}
	slices.Sort(out)
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

// procStat returns the state and process group of process pid from
// /proc/<pid>/stat (fields 3 and 5, counted after the command name, which
// is in parentheses and may itself hold spaces and parentheses).
func procStat(pid int) (state byte, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pg, err := strconv.Atoi(f[2])
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pg, true
}
