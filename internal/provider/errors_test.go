package provider

import (
	"errors"
	"fmt"
	"testing"
)

// The kinds of refusal survive wrapping (a provider adds "create node x:"),
// say what they wrap, and are told apart.
func TestTypedErrors(t *testing.T) {
	base := errors.New("quota spent")
	capErr := fmt.Errorf("create node n1: %w", NewInsufficientCapacityError(base))
	if !IsInsufficientCapacity(capErr) || IsConfiguration(capErr) || !errors.Is(capErr, base) {
		t.Errorf("%v: capacity %v, configuration %v, wraps its cause %v; want true, false, true",
			capErr, IsInsufficientCapacity(capErr), IsConfiguration(capErr), errors.Is(capErr, base))
	}
	if got, want := capErr.Error(), "create node n1: insufficient capacity: quota spent"; got != want {
		t.Errorf("message %q; want %q", got, want)
	}
	confErr := fmt.Errorf("create node n1: %w", Configurationf("namespace %q not found", "ml"))
	if !IsConfiguration(confErr) || IsInsufficientCapacity(confErr) {
		t.Errorf("%v: configuration %v, capacity %v; want true, false", confErr, IsConfiguration(confErr), IsInsufficientCapacity(confErr))
	}
	if got, want := confErr.Error(), `create node n1: namespace "ml" not found`; got != want {
		t.Errorf("message %q; want the provider's words %q", got, want)
	}
	plain := errors.New("connection refused")
	if IsConfiguration(plain) || IsInsufficientCapacity(plain) {
		t.Errorf("an untyped error counts as typed")
	}
	if NewInsufficientCapacityError(nil) != nil || NewConfigurationError(nil) != nil {
		t.Error("marking nil gave an error")
	}
}

func TestIgnoreNotFound(t *testing.T) {
	if err := IgnoreNotFound(fmt.Errorf("container x: %w", ErrNotFound)); err != nil {
		t.Errorf("IgnoreNotFound(not found) = %v; want nil", err)
	}
	other := errors.New("engine down")
	if err := IgnoreNotFound(other); err != other {
		t.Errorf("IgnoreNotFound(other) = %v; want it unchanged", err)
	}
}
