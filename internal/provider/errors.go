package provider

import (
	"errors"
	"fmt"
)

// ErrNotFound is returned (wrapped) when a provider has no such node.
var ErrNotFound = errors.New("node not found in provider")

// IgnoreNotFound returns nil for an ErrNotFound (wrapped or not) and err
// otherwise: for a caller to whom a node that is gone is done.
func IgnoreNotFound(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// InsufficientCapacityError is a Create refused for want of room now: a
// cloud out of machines of the size, a Kubernetes namespace's resource
// quota spent, a subnet out of addresses, this machine out of job users.
// The same call may succeed later, as others free capacity: the controller
// backs off, and the compute says that capacity is what it waits for.
type InsufficientCapacityError struct{ Err error }

func (e *InsufficientCapacityError) Error() string { return "insufficient capacity: " + e.Err.Error() }
func (e *InsufficientCapacityError) Unwrap() error { return e.Err }

// NewInsufficientCapacityError marks err as a want of capacity (nil stays
// nil).
func NewInsufficientCapacityError(err error) error {
	if err == nil {
		return nil
	}
	return &InsufficientCapacityError{Err: err}
}

// InsufficientCapacityf is NewInsufficientCapacityError(fmt.Errorf(…)).
func InsufficientCapacityf(format string, args ...any) error {
	return &InsufficientCapacityError{Err: fmt.Errorf(format, args...)}
}

// IsInsufficientCapacity reports whether err (or one it wraps) is an
// InsufficientCapacityError.
func IsInsufficientCapacity(err error) bool {
	var e *InsufficientCapacityError
	return errors.As(err, &e)
}

// ConfigurationError is a Create refused because the node cannot be made
// as configured — the compute's settings (its subnet, its Kubernetes
// placement, enableNodePublicIp) or the provider's own (a missing node
// image, namespace or permission) — so the same call fails again until
// someone changes them. Its message is the provider's words, for the
// person who must make that change; the controller stops trying and the
// compute shows them.
type ConfigurationError struct{ Err error }

func (e *ConfigurationError) Error() string { return e.Err.Error() }
func (e *ConfigurationError) Unwrap() error { return e.Err }

// NewConfigurationError marks err as a configuration error (nil stays
// nil).
func NewConfigurationError(err error) error {
	if err == nil {
		return nil
	}
	return &ConfigurationError{Err: err}
}

// Configurationf is NewConfigurationError(fmt.Errorf(…)).
func Configurationf(format string, args ...any) error {
	return &ConfigurationError{Err: fmt.Errorf(format, args...)}
}

// IsConfiguration reports whether err (or one it wraps) is a
// ConfigurationError.
func IsConfiguration(err error) bool {
	var e *ConfigurationError
	return errors.As(err, &e)
}
