package tools

import (
	"bufio"
	"bytes"
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
// with what identifies it (the boot, and the start time of the shell that
// leads it), and RecordProcesses kills the groups the previous process
// left there before recording its own: those whose shell is gone, which a
// live process's command never is.
//
// The file is written on every start and end of a command, without
// fdatasync: it must outlive the process, not the machine, whose restart
// ends every process anyway (and changes the boot ID, so the records of an
// earlier boot are ignored).

// ledger is the process ledger in use, or nil.
var ledger struct {
	mu   sync.Mutex
	path string
	live map[int]ledgerEntry // by process group ID
}

// ledgerEntry identifies a process group of a running command.
type ledgerEntry struct {
	pgid  int
	boot  string // /proc/sys/kernel/random/boot_id
	start uint64 // the leader's start time, clock ticks after boot
}

// RecordProcesses kills the process groups a previous process recorded in
// the file at path and left running (see above), then records the groups
// of the commands this process runs there from now on. It returns how many
// groups it killed. Where processes cannot be identified (no /proc), it
// records nothing and kills nothing.
func RecordProcesses(path string) (killed int, err error) {
	boot, ok := bootID()
	if !ok {
		return 0, nil
	}
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return 0, fmt.Errorf("tools: read process ledger: %w", err)
	}
	for _, e := range parseLedger(b) {
		if e.boot == boot && e.leftOver() {
			_ = syscall.Kill(-e.pgid, syscall.SIGKILL)
			killed++
		}
	}
	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	ledger.path, ledger.live = path, map[int]ledgerEntry{}
	if err := writeLedgerLocked(); err != nil {
		ledger.path = ""
		return killed, err
	}
	return killed, nil
}

// recordProcess adds the group led by pid (a command's shell) to the
// ledger; forgetProcess removes it once the command is over.
func recordProcess(pid int) {
	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	if ledger.path == "" {
		return
	}
	boot, ok := bootID()
	start, ok2 := startTime(pid)
	if !ok || !ok2 {
		return
	}
	ledger.live[pid] = ledgerEntry{pgid: pid, boot: boot, start: start}
	_ = writeLedgerLocked() // best effort: a command is not refused over it
}

func forgetProcess(pid int) {
	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	if ledger.path == "" {
		return
	}
	if _, ok := ledger.live[pid]; ok {
		delete(ledger.live, pid)
		_ = writeLedgerLocked()
	}
}

// writeLedgerLocked replaces the file with the live entries (through a
// temporary file and a rename, so a reader never sees half of it).
func writeLedgerLocked() error {
	var b bytes.Buffer
	for _, pgid := range slices.Sorted(maps.Keys(ledger.live)) {
		e := ledger.live[pgid]
		fmt.Fprintf(&b, "%d %s %d\n", e.pgid, e.boot, e.start)
	}
	tmp := ledger.path + ".tmp"
	if err := os.WriteFile(tmp, b.Bytes(), 0o600); err != nil {
		return fmt.Errorf("tools: write process ledger: %w", err)
	}
	if err := os.Rename(tmp, ledger.path); err != nil {
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
		if len(f) != 3 {
			continue
		}
		pgid, err1 := strconv.Atoi(f[0])
		start, err2 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil || pgid <= 1 {
			continue
		}
		out = append(out, ledgerEntry{pgid: pgid, boot: f[1], start: start})
	}
	return out
}

// leftOver reports whether e's group is what a dead process's command
// left: its leader (the shell, which dies with the process that started
// it) is gone or a zombie, and members of the group started no earlier
// than it remain. A group whose leader runs is never one: it is a command
// of a live process (another sessiond, or another runtime of this one,
// recorded here), or a reused ID.
func (e ledgerEntry) leftOver() bool {
	if state, _, _, ok := procStat(e.pgid); ok && state != 'Z' && state != 'X' {
		return false
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if state, pgrp, start, ok := procStat(pid); ok && pgrp == e.pgid && start >= e.start && state != 'Z' && state != 'X' {
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
