package errkind

import (
	"fmt"

	"github.com/cockroachdb/errors"
	"github.com/cockroachdb/redact"
)

// Wrap returns cause as an error of kind (a sentinel): its text is
// "kind: cause", errors.Is matches kind and everything cause matches, and
// errors.As finds what cause holds — with the standard library's errors
// and with cockroachdb/errors alike. In a redacted log line the kind's
// text is kept (a sentinel holds no value); the cause keeps its own safe
// parts.
func Wrap(kind, cause error) error {
	if cause == nil {
		return kind
	}
	return &kindError{kind: kind, cause: cause}
}

type kindError struct{ kind, cause error }

var (
	_ errors.SafeFormatter = (*kindError)(nil)
	_ fmt.Formatter        = (*kindError)(nil)
)

func (e *kindError) Error() string { return e.kind.Error() + ": " + e.cause.Error() }

func (e *kindError) Unwrap() error { return e.cause }

// Is makes the error match its kind.
func (e *kindError) Is(target error) bool { return target == e.kind }

// SafeFormatError prints the kind, safe, and hands on to the cause.
func (e *kindError) SafeFormatError(p errors.Printer) error {
	p.Print(redact.SafeString(e.kind.Error()))
	return e.cause
}

// Format prints the error as cockroachdb/errors does (%+v: with details).
func (e *kindError) Format(s fmt.State, verb rune) { errors.FormatError(e, s, verb) }
