//go:build unix

package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools/internal/runes"
)

// BashConfig configures the bash tool. Zero fields take the defaults of
// DefaultBashConfig.
type BashConfig struct {
	// Shell is the shell run as `Shell -c command`. Empty means bash from
	// PATH, or sh when bash is missing.
	Shell string
	// DefaultTimeout applies when the input has no timeoutMs.
	DefaultTimeout time.Duration
	// MaxTimeout is the largest timeout the input may ask for.
	MaxTimeout time.Duration
	// MaxOutputBytes bounds the output kept: the first and last halves are
	// kept and the middle is replaced by a marker.
	MaxOutputBytes int
	// Env is the command environment. Nil means the daemon's environment
	// at call time.
	Env []string
	// Home expands "~" for advisory warnings. Empty means $HOME.
	Home string
	// Ledger records the run tokens of running commands, so that the
	// next process kills what they leave if this one dies (see
	// OpenProcessLedger). Nil records nothing.
	Ledger *ProcessLedger
	// After starts a command's timeout: the command is killed when the
	// channel receives. Nil means a real timer; tests inject one to time
	// out a command when they choose rather than after a wall-clock wait.
	After func(time.Duration) <-chan time.Time
}

// DefaultBashConfig returns the defaults: a 2 minute timeout, at most 10
// minutes, 50 KiB of output.
func DefaultBashConfig() BashConfig {
	return BashConfig{DefaultTimeout: 2 * time.Minute, MaxTimeout: 10 * time.Minute, MaxOutputBytes: 50 << 10}
}

// withDefaults fills zero fields, finds the shell and checks the limits.
func (c BashConfig) withDefaults() (BashConfig, error) {
	d := DefaultBashConfig()
	if c.DefaultTimeout == 0 {
		c.DefaultTimeout = d.DefaultTimeout
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = max(d.MaxTimeout, c.DefaultTimeout)
	}
	if c.MaxOutputBytes == 0 {
		c.MaxOutputBytes = d.MaxOutputBytes
	}
	if c.DefaultTimeout < 0 || c.MaxTimeout < c.DefaultTimeout || c.MaxOutputBytes < 64 {
		return c, fmt.Errorf("%w: bash: need 0 < DefaultTimeout <= MaxTimeout and MaxOutputBytes >= 64", ErrInvalidConfig)
	}
	if c.Shell == "" {
		var err error
		if c.Shell, err = exec.LookPath("bash"); err != nil {
			if c.Shell, err = exec.LookPath("sh"); err != nil {
				return c, fmt.Errorf("%w: bash: neither bash nor sh is on PATH", ErrInvalidConfig)
			}
		}
	}
	if c.Home == "" {
		c.Home = os.Getenv("HOME")
	}
	return c, nil
}

// BashInput is the input of the bash tool.
type BashInput struct {
	Command   string `json:"command"`
	Workdir   string `json:"workdir,omitempty"`
	TimeoutMs int64  `json:"timeoutMs,omitempty"`
}

// BashMetadata is the metadata of a bash result.
type BashMetadata struct {
	// ExitCode is the shell's exit status; -1 when a signal ended it.
	ExitCode int `json:"exitCode"`
	// Signal names the signal that ended the shell, if any.
	Signal string `json:"signal,omitempty"`
	// Workdir is the canonical directory the command ran in.
	Workdir string `json:"workdir"`
	// OmittedBytes counts output bytes dropped from the middle.
	OmittedBytes int64 `json:"omittedBytes,omitempty"`
	// Warnings are advisory; nothing enforced them.
	Warnings []string `json:"warnings,omitempty"`
}

// NewBash returns the bash built-in. Bash is not sandboxed: the command
// runs with the daemon user's full file system, process and network
// authority. Permission "bash" (patterns: each simple command of the
// script, see commandPatterns; "always" approves exactly those commands,
// in that workdir) guards every call, and a workdir outside the
// Location additionally needs "external_directory" (pattern: "<dir>/*";
// "always" approves the directory and everything beneath it); mentions of
// outside paths in the command only produce advisory warnings.
func NewBash(cfg BashConfig) (Tool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	b := &basher{cfg: cfg}
	return NewTool(Definition{
		Name:       "bash",
		AsksItself: true,
		Description: "Run a shell command with `" + cfg.Shell + " -c` in the project directory (or `workdir`) and return its combined stdout and stderr " +
			"and exit code. The command is NOT sandboxed: it runs with the user's full file system, process and network access, " +
			"so every command needs the user's permission. " +
			fmt.Sprintf("The timeout defaults to %s (timeoutMs, at most %d ms); on timeout or interruption the command and every process it started are killed, ", cfg.DefaultTimeout, cfg.MaxTimeout.Milliseconds()) +
			"as are background jobs still running when the shell exits (but not processes that leave the process group, e.g. with setsid or `set -m`). " +
			fmt.Sprintf("Output beyond %d bytes is cut from the middle. A non-zero exit code is reported, not treated as a failure. ", cfg.MaxOutputBytes) +
			"A workdir outside the project needs extra permission. Stdin is empty; do not run interactive commands.",
		InputSchema: json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "minLength": 1, "description": "The shell command to run."},
    "workdir": {"type": "string", "description": "Directory to run in: relative to the project root, @reference/path, or absolute. Default: the project root."},
    "timeoutMs": {"type": "integer", "minimum": 1, "maximum": %d, "description": "Timeout in milliseconds. Default %d."}
  },
  "required": ["command"],
  "additionalProperties": false
}`, cfg.MaxTimeout.Milliseconds(), cfg.DefaultTimeout.Milliseconds())),
		Permission: PermissionBash,
	}, b.run), nil
}

// basher is the bash built-in.
type basher struct {
	cfg BashConfig
}

func (b *basher) run(ctx context.Context, call *CallContext, in BashInput) (Result, error) {
	if strings.TrimSpace(in.Command) == "" {
		return Result{}, fmt.Errorf("bash: the command is empty")
	}
	dir, err := call.Paths.Workdir(in.Workdir)
	if err != nil {
		return Result{}, fmt.Errorf("bash: workdir: %w", err)
	}
	if !call.Paths.Contains(dir) {
		if err := call.Ask(ctx, externalDirectoryRequest(dir, "bash")); err != nil {
			return Result{}, err
		}
	}
	warnings := []string{} // a list in the request's metadata even when empty
	if outside := outsidePaths(in.Command, call.Root, b.cfg.Home); len(outside) > 0 {
		warnings = append(warnings, "the command mentions paths outside the project: "+strings.Join(outside, ", ")+
			" (advisory only: bash is not sandboxed and this was not enforced)")
	}
	patterns, err := commandPatterns(b.cfg.Shell, in.Command)
	if err != nil {
		return Result{}, err
	}
	// What a command does depends on where it runs: approving "rm -f *" in
	// build/ must not approve it in the project root (Request.Where).
	where := ""
	if dir != call.Root {
		where = dir
		if rel, err := filepath.Rel(call.Root, dir); err == nil && filepath.IsLocal(rel) {
			where = rel
		}
	}
	if err := call.Ask(ctx, Request{
		Permission: PermissionBash,
		Patterns:   patterns,
		Where:      where,
		Metadata:   mustJSON(map[string]any{"command": in.Command, "workdir": dir, "warnings": warnings}),
	}); err != nil {
		return Result{}, err
	}
	timeout := b.cfg.DefaultTimeout
	if in.TimeoutMs > 0 {
		timeout = min(time.Duration(in.TimeoutMs)*time.Millisecond, b.cfg.MaxTimeout)
	}
	env := b.cfg.Env
	if env == nil {
		env = os.Environ()
	}
	res, err := runProcess(ctx, procSpec{shell: b.cfg.Shell, command: in.Command, dir: dir, env: env, timeout: timeout, after: b.cfg.After, maxOut: b.cfg.MaxOutputBytes,
		ledger: b.cfg.Ledger})
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, messages.Errorf(messages.ErrAborted, "bash: the command was cancelled")
		}
		return Result{}, fmt.Errorf("bash: start %s: %v", b.cfg.Shell, err)
	}
	output := res.output.String()
	switch res.outcome {
	case procCancelled:
		return Result{}, messages.Errorf(messages.ErrAborted, "bash: the command was cancelled and its processes were killed")
	case procTimedOut:
		return Result{}, messages.Errorf(messages.ErrToolExecution,
			"bash: the command timed out after %s and its processes were killed; raise timeoutMs (at most %d) or run something shorter. Output before the timeout:\n%s",
			timeout, b.cfg.MaxTimeout.Milliseconds(), orNoOutput(output))
	}
	var out strings.Builder
	for _, w := range warnings {
		out.WriteString("Warning: " + w + "\n\n")
	}
	out.WriteString(orNoOutput(output))
	if !strings.HasSuffix(output, "\n") {
		out.WriteByte('\n')
	}
	if res.signal != "" {
		fmt.Fprintf(&out, "\nThe shell was ended by signal: %s", res.signal)
	} else {
		fmt.Fprintf(&out, "\nExit code: %d", res.exitCode)
	}
	return Result{
		Title:  clipTitle(in.Command),
		Output: out.String(),
		Metadata: mustJSON(BashMetadata{
			ExitCode: res.exitCode, Signal: res.signal, Workdir: dir, OmittedBytes: res.output.omitted(), Warnings: warnings,
		}),
	}, nil
}

func orNoOutput(s string) string {
	if s == "" {
		return "(no output)"
	}
	return s
}

// clipTitle shortens a command to a one-line title.
func clipTitle(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return runes.Clip(s, 80)
}
