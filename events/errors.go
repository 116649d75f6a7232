package events

import "github.com/cockroachdb/errors"

// Sentinel errors. Every error this package returns matches one of them with
// errors.Is, and carries the field and reason in its text.
var (
	// ErrInvalidField: a field is missing, malformed or out of range.
	ErrInvalidField = errors.New("invalid field")
	// ErrUnknownSchema: the envelope's schema is not one this version reads.
	ErrUnknownSchema = errors.New("unknown schema")
	// ErrUnknownType: the event type is not one this version knows.
	ErrUnknownType = errors.New("unknown event type")
	// ErrMissingField: a required field is absent.
	ErrMissingField = errors.New("missing field")
	// ErrBadID: an id is malformed or inconsistent with the envelope.
	ErrBadID = errors.New("bad id")
	// ErrMalformed: the bytes are not a JSON envelope at all.
	ErrMalformed = errors.New("malformed event")
	// ErrTooLarge: an encoded event would exceed MaxEventSize, so no reader
	// could decode it. Encode refuses it: nothing undecodable is appended.
	ErrTooLarge = errors.New("event too large")
	// ErrLogFormat: a stream holds another log format than this build
	// reads (CheckLogFormat).
	ErrLogFormat = errors.New("log format")
)

// FieldError names a field and why its value is refused.
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Is makes FieldError match ErrInvalidField.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidField }

// DecodeError is returned by Decode. Kind is one of the sentinels above;
// Field names the offending field ("" for the whole document).
type DecodeError struct {
	Kind   error
	Field  string
	Reason string
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return "decode event: " + e.Kind.Error() + ": " + e.Reason
	}
	return "decode event: " + e.Kind.Error() + ": " + e.Field + ": " + e.Reason
}

func (e *DecodeError) Unwrap() error { return e.Kind }
