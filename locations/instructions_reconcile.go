package locations

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/persistence"
)

// DecisionKind says what the runner must do with a Decision.
type DecisionKind uint8

// Decision kinds.
const (
	// DecisionNoop: the model's instructions are current; nothing to commit.
	DecisionNoop DecisionKind = iota
	// DecisionBaseline: commit an InstructionsBaselined with Text and
	// Applied before any pending prompt becomes model-visible.
	DecisionBaseline
	// DecisionUpdate: commit one InstructionsUpdated with Text, UpdateKind
	// and Applied.
	DecisionUpdate
	// DecisionBlocked: no checkpoint exists and a source is unavailable;
	// stop execution with Err and leave the prompt pending and retryable.
	DecisionBlocked
)

// String returns the kind's name.
func (k DecisionKind) String() string {
	switch k {
	case DecisionNoop:
		return "noop"
	case DecisionBaseline:
		return "baseline"
	case DecisionUpdate:
		return "update"
	case DecisionBlocked:
		return "blocked"
	}
	return fmt.Sprintf("DecisionKind(%d)", uint8(k))
}

// Decision is the outcome of Reconcile. Its maps are owned by the caller.
type Decision struct {
	Kind DecisionKind
	// Text is the baseline text (DecisionBaseline) or the chronological
	// system message (DecisionUpdate).
	Text string
	// UpdateKind is messages.InstructionsUpdate or
	// messages.InstructionsRemoval for DecisionUpdate, else "".
	UpdateKind string
	// Applied is the new applied record for DecisionBaseline and
	// DecisionUpdate, else nil.
	Applied map[string]string
	// Err is a *messages.Error of type messages.ErrInstructions naming the
	// unavailable sources for DecisionBlocked, else nil.
	Err error
	// Unavailable lists the keys of the sources that could not be observed,
	// whatever the kind, so the runner can report preserved values.
	Unavailable []string
}

// Payload returns the event the runner commits for d in Session sid: an
// *messages.InstructionsBaselined, an *messages.InstructionsUpdated, or nil
// when there is nothing to commit.
func (d Decision) Payload(sid messages.SessionID) messages.Payload {
	switch d.Kind {
	case DecisionBaseline:
		return &messages.InstructionsBaselined{SessionID: sid, Text: d.Text, Applied: maps.Clone(d.Applied)}
	case DecisionUpdate:
		return &messages.InstructionsUpdated{SessionID: sid, Text: d.Text, Kind: d.UpdateKind, Applied: maps.Clone(d.Applied)}
	}
	return nil
}

// Fixed texts of instruction update messages.
const (
	updateIntro = "Instructions updated. Each section below replaces the earlier instructions from the named source; " +
		"instructions from other sources still apply."
	supersedeIntro = "Instructions updated: some earlier instructions were removed. " +
		"The complete current instructions follow and supersede all earlier instructions."
	revocationText = "Instructions revoked: every earlier instruction was removed and no longer applies. " +
		"No instructions are currently in effect."
)

// Reconcile decides how the instructions the model has seen, recorded in cp
// (nil when the Session has no checkpoint, e.g. before its first run or
// after a move or committed revert), must change given a fresh observation.
// It is pure: no I/O, no time, no mutation of its inputs.
//
// Without a checkpoint, a complete observation initializes the baseline and
// an incomplete one blocks. With a checkpoint, an unavailable source keeps
// its applied value; unchanged values are a no-op; changed values are one
// update. An update in which some source went from non-empty to empty, or
// lost one of its sections (lostSection), is a confirmed removal: its text restates the complete remaining aggregate and
// supersedes everything earlier, or revokes all instructions when nothing
// remains.
func Reconcile(cp *persistence.Checkpoint, obs Observed) Decision {
	unavailable := obs.Unavailable()
	if cp == nil {
		if len(unavailable) > 0 {
			return Decision{Kind: DecisionBlocked, Err: unavailableError(obs), Unavailable: unavailable}
		}
		applied := obs.Merge(nil)
		return Decision{Kind: DecisionBaseline, Text: RenderBaseline(obs.Keys(), applied), Applied: applied, Unavailable: unavailable}
	}

	applied := obs.Merge(cp.Applied)
	var changed []string
	removal := false
	for _, k := range obs.Keys() {
		if prev, now := cp.Applied[k], applied[k]; prev != now {
			changed = append(changed, k)
			removal = removal || now == "" || lostSection(prev, now)
		}
	}
	// A key the combination no longer names contributes nothing: dropping a
	// non-empty one is a removal, dropping an empty one changes nothing the
	// model saw.
	for k, prev := range cp.Applied {
		if _, ok := applied[k]; !ok && prev != "" {
			removal = true
		}
	}
	if len(changed) == 0 && !removal {
		return Decision{Kind: DecisionNoop, Unavailable: unavailable}
	}

	d := Decision{Kind: DecisionUpdate, UpdateKind: messages.InstructionsUpdate, Applied: applied, Unavailable: unavailable}
	if removal {
		d.UpdateKind = messages.InstructionsRemoval
		if remaining := RenderBaseline(obs.Keys(), applied); remaining != "" {
			d.Text = supersedeIntro + "\n\n" + remaining
		} else {
			d.Text = revocationText
		}
		return d
	}
	var b strings.Builder
	b.WriteString(updateIntro)
	for _, k := range changed {
		fmt.Fprintf(&b, "\n\nUpdated %q instructions:\n%s", k, applied[k])
	}
	d.Text = b.String()
	return d
}

// Headers of the sections the aggregate sources render, one per AGENTS.md
// file and one per instruction entry.
const (
	discoveryHeader = "Instructions from "
	entryHeader     = "Instruction entry "
)

// lostSection reports whether an aggregate source's value prev had a
// section that now lacks: removing one AGENTS.md of two, or one entry of
// several, is a confirmed partial removal even though the source still
// contributes something.
func lostSection(prev, now string) bool {
	have := sections(now)
	for _, h := range sections(prev) {
		if !slices.Contains(have, h) {
			return true
		}
	}
	return false
}

// sections returns the section headers of a rendered value: the first
// lines of its blank-line-separated blocks that name a file or an entry.
// (A file's own text could hold such a line too; at worst that makes an
// update restate every instruction.)
func sections(v string) []string {
	var out []string
	for block := range strings.SplitSeq(v, "\n\n") {
		line, _, _ := strings.Cut(block, "\n")
		if (strings.HasPrefix(line, discoveryHeader) || strings.HasPrefix(line, entryHeader)) && strings.HasSuffix(line, ":") {
			out = append(out, line)
		}
	}
	return out
}

// RenderBaseline returns the full instruction text for an applied record:
// the non-empty values in source order, separated by blank lines. The runner
// uses it to rebaseline after a completed compaction, passing the merged
// applied record (see Observed.Merge) so unavailable sources are restated
// from the model's last applied belief.
func RenderBaseline(order []string, applied map[string]string) string {
	var parts []string
	for _, k := range order {
		if v := applied[k]; v != "" {
			parts = append(parts, v)
		}
	}
	return strings.Join(parts, "\n\n")
}

// unavailableError names the unavailable sources of obs and why.
func unavailableError(obs Observed) error {
	var parts []string
	for _, r := range obs.Results {
		if err := r.Observation.Err(); err != nil {
			parts = append(parts, fmt.Sprintf("%s (%v)", r.Key, err))
		}
	}
	return messages.Errorf(messages.ErrInstructions, "instruction sources unavailable: %s", strings.Join(parts, ", "))
}
