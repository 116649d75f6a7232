package events

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// Every kind of decode error has its own stable code, and an error that
// matches no sentinel is malformed.
func TestDecodeCodeOfEveryKind(t *testing.T) {
	for kind, want := range map[error]string{
		ErrUnknownSchema: CodeUnknownSchema, ErrUnknownType: CodeUnknownType, ErrMissingField: CodeMissingField,
		ErrBadID: CodeBadID, ErrInvalidField: CodeInvalidField, ErrMalformed: CodeMalformed,
		errors.New("something else"): CodeMalformed,
	} {
		de := &DecodeError{Kind: kind, Reason: "r"}
		if got := de.Code(); got != want {
			t.Errorf("%v: code %q, want %q", kind, got, want)
		}
		if got := DecodeCode(fmt.Errorf("load: %w", de)); got != want {
			t.Errorf("wrapped %v: code %q, want %q", kind, got, want)
		}
	}
}

// Unreadable tells an event of another schema that Decode refused before
// reading its schema (it is too large) from a broken one, and keeps
// every other refusal as Decode reported it.
func TestUnreadableReadsTheSchemaOfARefusedEvent(t *testing.T) {
	big := bytes.Repeat([]byte("x"), MaxEventSize)
	future := []byte(`{"schema":"settle.event/v9","pad":"` + string(big) + `"}`)
	_, err := Decode(future)
	if DecodeCode(err) != CodeMalformed {
		t.Fatalf("Decode of an oversized event: %v", err)
	}
	if de := Unreadable(future, err); de.Code() != CodeUnknownSchema || de.Field != "schema" {
		t.Fatalf("Unreadable: %+v", de)
	}
	broken := append([]byte(`{"schema":"settle.event/v1","pad":"`), big...)
	_, err = Decode(broken)
	if de := Unreadable(broken, err); de.Code() != CodeMalformed {
		t.Fatalf("Unreadable of a broken event: %+v", de)
	}
	_, err = Decode([]byte(`{"schema":"settle.event/v1","type":"NoSuchType"}`))
	if de := Unreadable(nil, err); de.Code() != DecodeCode(err) {
		t.Fatalf("Unreadable changed %v into %+v", err, de)
	}
}
