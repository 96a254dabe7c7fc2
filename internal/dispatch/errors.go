package dispatch

import "errors"

// Kinds of refusal; an *Error wraps one, so callers check them with
// errors.Is and show the *Error's text to the agent.
var (
	// ErrUnauthorized: the token does not authenticate.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrConflict: the node or its compute is in no state for the request.
	ErrConflict = errors.New("conflict")
)

// Error is a request the protocol refuses. Its text is written for the
// agent's operator; Kind says which refusal it is.
type Error struct {
	Kind error
	Msg  string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Kind }

func unauthorized(msg string) *Error { return &Error{Kind: ErrUnauthorized, Msg: msg} }
func conflict(msg string) *Error     { return &Error{Kind: ErrConflict, Msg: msg} }
