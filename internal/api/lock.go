package api

import (
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Management locks are Azure Resource Manager's Microsoft.Authorization/locks
// (api-version 2016-09-01): an extension resource at the id of the resource
// it locks, {scope}/providers/Microsoft.Authorization/locks/{name}.

// TypeLock is the type ARM writes in a lock's "type" field.
const TypeLock = "Microsoft.Authorization/locks"

// LockProvider is the path segment that follows "providers" in a lock's id.
const LockProvider = "Microsoft.Authorization"

// Lock levels. CanNotDelete refuses deletion; ReadOnly refuses every change.
const (
	LockCanNotDelete = "CanNotDelete"
	LockReadOnly     = "ReadOnly"
)

// CodeScopeLocked is ARM's code for a request refused by a lock (409).
const CodeScopeLocked = "ScopeLocked"

// CodeLockNotFound is ARM's code for a lock that does not exist (404).
const CodeLockNotFound = "LockNotFound"

// Lock limits, as ARM documents them.
const (
	MaxLockNameLength  = 260
	MaxLockNotesLength = 512
)

// Lock is a management lock as the API reads and writes it.
type Lock struct {
	ID         string         `json:"id,omitempty"`
	Name       string         `json:"name,omitempty"`
	Type       string         `json:"type,omitempty"`
	Properties LockProperties `json:"properties"`
}

// LockProperties are a lock's writable fields.
type LockProperties struct {
	Level  string      `json:"level"`
	Notes  string      `json:"notes,omitempty"`
	Owners []LockOwner `json:"owners,omitempty"`
}

// LockOwner is an owner of a lock, by the application id ARM names it with.
type LockOwner struct {
	ApplicationID string `json:"applicationId,omitempty"`
}

// LockList is a page of locks.
type LockList struct {
	Value    []Lock `json:"value"`
	NextLink string `json:"nextLink,omitempty"`
}

// LockID is the ARM id of the lock name at scope.
func LockID(scope, name string) string {
	return strings.TrimSuffix(scope, "/") + "/providers/" + LockProvider + "/locks/" + name
}

// CheckLockName validates a lock's name as ARM does: at most 260
// characters, none of < > % & : \ ? / and no control characters.
func CheckLockName(name string) error {
	switch {
	case name == "":
		return BadRequest(CodeInvalidName, "the lock name is empty")
	case len(name) > MaxLockNameLength:
		return BadRequest(CodeInvalidName, "the lock name is longer than %d characters", MaxLockNameLength)
	case !utf8.ValidString(name):
		return BadRequest(CodeInvalidName, "the lock name %q is not valid UTF-8", name)
	case strings.HasPrefix(name, "-"):
		return BadRequest(CodeInvalidName, "the lock name %q may not begin with '-' (a command line would read it as an option)", name)
	case strings.Contains(name, ".."), strings.HasSuffix(name, "."):
		return BadRequest(CodeInvalidName, "the lock name %q may not contain '..' or end with '.'", name)
	}
	for _, r := range name {
		if strings.ContainsRune(`<>%&:\?/`, r) || unicode.IsControl(r) {
			return BadRequest(CodeInvalidName, "the lock name %q may not contain %q: it cannot contain <, >, %%, &, :, \\, ?, / or control characters", name, r)
		}
		if !unicode.IsPrint(r) && r != ' ' {
			return BadRequest(CodeInvalidName, "the lock name %q may not contain %U: invisible and direction-changing characters would make it read as another name", name, r)
		}
	}
	return nil
}

// PrepareLock validates a lock's body and writes its level in ARM's
// spelling (levels match in any case).
func PrepareLock(l *Lock) error {
	var v Validation
	switch {
	case strings.EqualFold(l.Properties.Level, LockCanNotDelete):
		l.Properties.Level = LockCanNotDelete
	case strings.EqualFold(l.Properties.Level, LockReadOnly):
		l.Properties.Level = LockReadOnly
	case l.Properties.Level == "":
		v.Add(CodeValidationError, "properties.level", `the lock level is required: "CanNotDelete" or "ReadOnly"`)
	default:
		v.Add(CodeValidationError, "properties.level", `lock level %q is not one of "CanNotDelete", "ReadOnly"`, l.Properties.Level)
	}
	if len(l.Properties.Notes) > MaxLockNotesLength {
		v.Add(CodeValidationError, "properties.notes", "the notes are %d characters long; at most %d are allowed", len(l.Properties.Notes), MaxLockNotesLength)
	}
	return v.Err()
}

// LockNotFound is the 404 of a lock that does not exist.
func LockNotFound(name, scope string) *Error {
	return newErr(http.StatusNotFound, CodeLockNotFound, "the lock '%s' could not be found at scope '%s'", name, scope)
}
