package tools

import (
	"errors"

	"github.com/sessiond/sessiond/messages"
)

// Registration errors.
var (
	// ErrInvalidDefinition means a tool's definition is unusable: a bad
	// name, no description, or a schema that does not compile.
	ErrInvalidDefinition = errors.New("tools: invalid tool definition")
	// ErrDuplicateTool means a tool of the same name is already registered.
	ErrDuplicateTool = errors.New("tools: tool already registered")
	// ErrScopeClosed means the registration scope was closed.
	ErrScopeClosed = errors.New("tools: scope closed")
	// ErrForeignScope means the scope belongs to another registry.
	ErrForeignScope = errors.New("tools: scope belongs to another registry")
	// ErrInvalidConfig means a registry or tool configuration is unusable.
	ErrInvalidConfig = errors.New("tools: invalid configuration")
)

// Permission errors.
var (
	// ErrInvalidRule means a permission rule lacks a permission or pattern
	// or has an unknown action.
	ErrInvalidRule = errors.New("tools: invalid permission rule")
	// ErrAskCancelled means a permission question was withdrawn before the
	// user answered, as on interrupt or shutdown.
	ErrAskCancelled = errors.New("tools: permission request cancelled")
	// ErrRequestNotFound means no permission question with the given ID is
	// waiting. *RequestNotFoundError matches it.
	ErrRequestNotFound = errors.New("tools: permission request not found")
	// ErrUserRejected marks, beside its permission.rejected error, a call
	// the user refused: the runner ends the busy period there, so that the
	// user, not the model, decides what comes next (a reply's message is
	// in the error, which the model reads at its next step). A refusal by
	// the agent's rules, or because nobody can be asked, lets the model go
	// on with the error before it.
	ErrUserRejected = errors.New("tools: the user rejected the call")
)

// Path errors. *PathError wraps one of them.
var (
	// ErrAbsolutePath means a tool path was absolute.
	ErrAbsolutePath = errors.New("tools: absolute paths are not allowed; use a path relative to the Location root")
	// ErrPathEscape means a path leaves its root through "..".
	ErrPathEscape = errors.New("tools: path escapes its root directory")
	// ErrSymlinkEscape means a path leaves its root through a symbolic link.
	ErrSymlinkEscape = errors.New("tools: path escapes its root directory through a symbolic link")
	// ErrUnknownReference means an "@name/..." path names no configured
	// project reference.
	ErrUnknownReference = errors.New("tools: unknown project reference")
	// ErrInvalidPath means a path is empty, contains a NUL byte, or cannot
	// name a file (for example a name longer than the file system allows).
	ErrInvalidPath = errors.New("tools: invalid path")
	// ErrNotDirectory means a directory was required.
	ErrNotDirectory = errors.New("tools: not a directory")
)

// RequestNotFoundError reports a reply to a permission question that is not
// waiting. It matches ErrRequestNotFound with errors.Is and converts to a
// *messages.Error of type not-found with errors.As, so the HTTP layer maps
// it to 404.
type RequestNotFoundError struct {
	RequestID string
}

// Error implements error.
func (e *RequestNotFoundError) Error() string {
	return "tools: permission request " + e.RequestID + " not found"
}

// Is reports whether target is ErrRequestNotFound.
func (e *RequestNotFoundError) Is(target error) bool { return target == ErrRequestNotFound }

// As converts e to a *messages.Error of type not-found.
func (e *RequestNotFoundError) As(target any) bool {
	if t, ok := target.(**messages.Error); ok {
		*t = messages.Errorf(messages.ErrNotFound, "permission request %s not found (already answered, cancelled, or never asked)", e.RequestID)
		return true
	}
	return false
}
