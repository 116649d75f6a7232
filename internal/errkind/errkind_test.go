package errkind

import (
	stderrors "errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/errors"
	"github.com/cockroachdb/redact"
)

type fieldError struct{ field string }

func (e *fieldError) Error() string { return e.field + ": is required" }

var errKind = errors.New("invalid request")

// A wrapped error reads "kind: cause" and matches the kind, the cause and
// what the cause wraps, with either errors package; its redacted text
// keeps the kind and hides the cause's values.
func TestWrapMatchesKindAndCause(t *testing.T) {
	base := errors.New("base")
	cause := fmt.Errorf("%w: %w", &fieldError{"account"}, base)
	err := errors.Wrapf(Wrap(errKind, cause), "execute %s", "in_x")
	if got, want := err.Error(), "execute in_x: invalid request: account: is required: base"; got != want {
		t.Fatalf("text %q, want %q", got, want)
	}
	var fe *fieldError
	if !stderrors.Is(err, errKind) || !errors.Is(err, errKind) || !stderrors.Is(err, base) || !errors.Is(err, base) ||
		!stderrors.As(err, &fe) || !errors.As(err, &fe) || fe.field != "account" {
		t.Fatalf("matching: %v", err)
	}
	if stderrors.Is(err, errors.New("invalid request")) {
		t.Fatal("another error with the kind's text matched")
	}
	if got := string(redact.Sprint(err).Redact()); got != "execute ‹×›: invalid request: ‹×›" {
		t.Fatalf("redacted: %q", got)
	}
	if Wrap(errKind, nil) != errKind {
		t.Fatal("a nil cause is not the kind itself")
	}
}
