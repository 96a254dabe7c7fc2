// Package api holds the ARM-shaped resource types of the
// Microsoft.MachineLearningServices API (api-version 2024-04-01), their
// defaults and their validation. It does no I/O.
package api

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is an ARM error: it carries the HTTP status it maps to and is
// rendered as {"error":{"code","message","target","details"}}.
type Error struct {
	Status  int      `json:"-"`
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Target  string   `json:"target,omitempty"`
	Details []*Error `json:"details,omitempty"`
}

func (e *Error) Error() string {
	if e.Target != "" {
		return fmt.Sprintf("%s: %s (%s)", e.Code, e.Message, e.Target)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// ErrorResponse is the body of every failed ARM call.
type ErrorResponse struct {
	Error *Error `json:"error"`
}

// Error codes used across the API. They follow the codes Azure returns so
// that clients which switch on them behave the same.
const (
	CodeBadRequest          = "BadRequest"
	CodeInvalidRequest      = "InvalidRequestContent"
	CodeValidationError     = "ValidationError"
	CodeInvalidName         = "InvalidResourceName"
	CodeNotFound            = "ResourceNotFound"
	CodeParentNotFound      = "ParentResourceNotFound"
	CodeConflict            = "Conflict"
	CodePreconditionFailed  = "PreconditionFailed"
	CodeUnauthorized        = "AuthenticationFailed"
	CodeForbidden           = "AuthorizationFailed"
	CodeInvalidAPIVersion   = "InvalidApiVersionParameter"
	CodeMissingAPIVersion   = "MissingApiVersionParameter"
	CodeMethodNotAllowed    = "MethodNotAllowed"
	CodeInternal            = "InternalServerError"
	CodeQuotaExceeded       = "QuotaExceeded"
	CodeOperationInProgress = "OperationNotAllowed"
	CodeUnsupported         = "UnsupportedComputeType"
	CodeImmutable           = "PropertyChangeNotAllowed"
	CodeUserError           = "UserError" // the ML resource provider's code for a call the resource does not support
)

// Codes of a compute's status errors (AmlCompute properties.errors), written
// by the cluster controller.
const (
	CodeScaleUpBlocked         = "ScaleUpBlocked"         // queued jobs wait and the cluster may not grow
	CodeNodeProvisioningFailed = "NodeProvisioningFailed" // the provider failed to create nodes; retried
	CodeNodeNotReady           = "NodeNotReady"           // a node is being prepared (pulling an image, …)
	CodeNodeUnusable           = "NodeUnusable"           // a node is unusable, with why
)

func newErr(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// BadRequest is a 400 with the given code.
func BadRequest(code, format string, args ...any) *Error {
	return newErr(http.StatusBadRequest, code, format, args...)
}

// NotFound is a 404 ResourceNotFound.
func NotFound(format string, args ...any) *Error {
	return newErr(http.StatusNotFound, CodeNotFound, format, args...)
}

// Conflict is a 409 with the given code.
func Conflict(code, format string, args ...any) *Error {
	return newErr(http.StatusConflict, code, format, args...)
}

// Validation collects field errors into one 400 ValidationError whose
// details name each offending field.
type Validation struct{ details []*Error }

// Add records one field error.
func (v *Validation) Add(code, target, format string, args ...any) {
	v.details = append(v.details, &Error{Code: code, Target: target, Message: fmt.Sprintf(format, args...)})
}

// Err returns nil when nothing was added. With one problem the top-level
// error is that problem; with several it says how many and lists them.
func (v *Validation) Err() error {
	switch len(v.details) {
	case 0:
		return nil
	case 1:
		d := *v.details[0]
		d.Status = http.StatusBadRequest
		return &d
	}
	first := v.details[0]
	return &Error{
		Status:  http.StatusBadRequest,
		Code:    first.Code,
		Target:  first.Target,
		Message: fmt.Sprintf("%s (and %d more problems, see details)", first.Message, len(v.details)-1),
		Details: v.details,
	}
}

// AsError returns the *Error in err's chain, or an internal error that
// hides err's text (which may hold paths or SQL) from the caller.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		if e.Status == 0 {
			c := *e
			c.Status = http.StatusBadRequest
			return &c
		}
		return e
	}
	return newErr(http.StatusInternalServerError, CodeInternal, "the server failed to process the request; see the server log")
}
