package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
)

// SchemaV1 is the envelope schema this version writes and reads.
const SchemaV1 = "settle.event/v1"

// MaxEventSize bounds a decoded event (the payload is frozen inside
// IntentRecorded, so this also bounds a payload).
const MaxEventSize = 1 << 20

// MaxPayloadSize bounds a payload as it is frozen into IntentRecorded (its
// canonical form, as encoded in the event). It leaves room for the envelope
// and the intent's other fields, whose free-form ids are each at most
// MaxFreeformLen bytes (up to 6 bytes per byte once escaped): an accepted
// payload can never make an event that the decoder refuses. Encode checks
// the event itself as well.
const MaxPayloadSize = MaxEventSize - 64<<10

// Event is one fact on the log. EventID equals MsgID(IntentID, Version).
type Event struct {
	Schema    string    `json:"schema"`
	EventID   string    `json:"event_id"`
	IntentID  string    `json:"intent_id"`
	Version   uint64    `json:"version"`
	Type      Type      `json:"type"`
	At        time.Time `json:"at"`
	Actor     string    `json:"actor"`
	AttemptID string    `json:"attempt_id,omitempty"`
	Data      Data      `json:"-"`
}

// New builds an event for intent at version with the given body.
func New(intentID string, version uint64, at time.Time, actor, attemptID string, data Data) Event {
	return Event{
		Schema:    SchemaV1,
		EventID:   MsgID(intentID, version),
		IntentID:  intentID,
		Version:   version,
		Type:      data.EventType(),
		At:        at.UTC(),
		Actor:     actor,
		AttemptID: attemptID,
		Data:      data,
	}
}

// wire is an event as encoding/json reads and writes it: its body raw
// (D json.RawMessage), or a pointer to the body type the envelope names
// (D any), which encoding/json fills in place.
type wire[D any] struct {
	Schema    string    `json:"schema"`
	EventID   string    `json:"event_id"`
	IntentID  string    `json:"intent_id"`
	Version   uint64    `json:"version"`
	Type      Type      `json:"type"`
	At        time.Time `json:"at"`
	Actor     string    `json:"actor"`
	AttemptID string    `json:"attempt_id,omitempty"`
	Data      D         `json:"data"`
}

func (w *wire[D]) event(data Data) Event {
	return Event{
		Schema: w.Schema, EventID: w.EventID, IntentID: w.IntentID, Version: w.Version,
		Type: w.Type, At: w.At, Actor: w.Actor, AttemptID: w.AttemptID, Data: data,
	}
}

// Validate checks the envelope and its body.
func (e Event) Validate() error {
	if e.Schema != SchemaV1 {
		return &DecodeError{Kind: ErrUnknownSchema, Field: "schema", Reason: fmt.Sprintf("%q (this version reads %s)", clip(e.Schema), SchemaV1)}
	}
	if err := ValidateIntentID(e.IntentID); err != nil {
		return &DecodeError{Kind: ErrBadID, Field: "intent_id", Reason: err.(*FieldError).Reason}
	}
	if e.Version == 0 {
		return &DecodeError{Kind: ErrMissingField, Field: "version", Reason: "must be ≥ 1"}
	}
	if !isMsgID(e.EventID, e.IntentID, e.Version) {
		return &DecodeError{Kind: ErrBadID, Field: "event_id", Reason: fmt.Sprintf("%q is not %s", clip(e.EventID), MsgID(e.IntentID, e.Version))}
	}
	if e.Type == "" {
		return &DecodeError{Kind: ErrMissingField, Field: "type", Reason: "is required"}
	}
	if !e.Type.Known() {
		return &DecodeError{Kind: ErrUnknownType, Field: "type", Reason: fmt.Sprintf("%q", clip(string(e.Type)))}
	}
	if e.At.IsZero() {
		return &DecodeError{Kind: ErrMissingField, Field: "at", Reason: "is required"}
	}
	if strings.TrimSpace(e.Actor) == "" {
		return &DecodeError{Kind: ErrMissingField, Field: "actor", Reason: "is required"}
	}
	if e.AttemptID != "" {
		id, _, err := ParseAttemptID(e.AttemptID)
		if err != nil {
			return &DecodeError{Kind: ErrBadID, Field: "attempt_id", Reason: err.(*FieldError).Reason}
		}
		if id != e.IntentID {
			return &DecodeError{Kind: ErrBadID, Field: "attempt_id", Reason: "belongs to another intent"}
		}
	}
	if e.Data == nil {
		return &DecodeError{Kind: ErrMissingField, Field: "data", Reason: "is required"}
	}
	if e.Data.EventType() != e.Type {
		return &DecodeError{Kind: ErrInvalidField, Field: "data", Reason: fmt.Sprintf("body is %s, envelope says %s", e.Data.EventType(), e.Type)}
	}
	if e.Type.StartsWrite() && e.AttemptID == "" {
		return &DecodeError{Kind: ErrMissingField, Field: "attempt_id", Reason: string(e.Type) + " needs its attempt id"}
	}
	if err := e.Data.Validate(); err != nil {
		fe, ok := err.(*FieldError)
		if !ok {
			return &DecodeError{Kind: ErrInvalidField, Field: "data", Reason: err.Error()}
		}
		kind := ErrInvalidField
		if fe.Reason == "is required" {
			kind = ErrMissingField
		}
		return &DecodeError{Kind: kind, Field: fe.Field, Reason: fe.Reason}
	}
	return nil
}

// Encode validates and marshals an event.
func Encode(e Event) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, errors.Errorf("encode %s v%d: %w", e.Type, e.Version, err)
	}
	b, err := e.MarshalJSON()
	if err != nil {
		return nil, errors.Errorf("encode %s v%d: %w", e.Type, e.Version, err)
	}
	if len(b) > MaxEventSize {
		return nil, &DecodeError{Kind: ErrTooLarge, Reason: fmt.Sprintf("encode %s v%d: %d bytes exceeds %d", e.Type, e.Version, len(b), MaxEventSize)}
	}
	return b, nil
}

// Decode parses one event strictly: unknown fields, a missing field, an
// unknown schema or type, or an inconsistent id give a *DecodeError that
// matches the sentinels with errors.Is. It never panics.
func Decode(b []byte) (Event, error) {
	if len(b) > MaxEventSize {
		return Event{}, &DecodeError{Kind: ErrMalformed, Reason: fmt.Sprintf("%d bytes exceeds %d", len(b), MaxEventSize)}
	}
	// The common case first: an envelope as settle writes it, read without
	// encoding/json (canonical.go); then a v1 envelope of a known type, its
	// body read in the same pass. Anything else (or any doubt) takes the
	// careful path below, which gives every error its precise kind.
	if e, ok := decodeCanonical(b); ok {
		return e, nil
	}
	if e, ok := decodeTyped(b); ok {
		return e, nil
	}
	return decodeCareful(b)
}

// decodeCareful is Decode without its fast path.
func decodeCareful(b []byte) (Event, error) {
	var w wire[json.RawMessage]
	strictErr := strictUnmarshal(b, &w)
	if strictErr == nil && w.Schema == SchemaV1 {
		return decodeBody(w)
	}
	// Otherwise read the schema first, leniently: a future schema may add
	// envelope fields, and must be reported as unknown, not as malformed.
	var peek struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(b, &peek); err != nil {
		return Event{}, &DecodeError{Kind: ErrMalformed, Reason: err.Error()}
	}
	if peek.Schema == "" {
		return Event{}, &DecodeError{Kind: ErrMissingField, Field: "schema", Reason: "is required"}
	}
	if peek.Schema != SchemaV1 {
		return Event{}, &DecodeError{Kind: ErrUnknownSchema, Field: "schema", Reason: fmt.Sprintf("%q (this version reads %s)", clip(peek.Schema), SchemaV1)}
	}
	// A v1 schema here means the strict read failed.
	return Event{}, &DecodeError{Kind: ErrMalformed, Reason: strictErr.Error()}
}

var typeKey, dataKey = []byte(`"type":"`), []byte(`"data":`)

// decodeTyped reads b in one strict pass, guessing the body's type from
// the first "type" member: ok only when the guess was the envelope's type,
// the body was present and the event is valid. It never decides an error:
// the careful path does.
func decodeTyped(b []byte) (Event, bool) {
	// One "data" member, written as settle writes it: a missing body
	// would be left zero here, and a repeated one merged (the careful path
	// reports the first and keeps the last).
	if bytes.Count(b, dataKey) != 1 {
		return Event{}, false
	}
	i := bytes.Index(b, typeKey)
	if i < 0 {
		return Event{}, false
	}
	rest := b[i+len(typeKey):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return Event{}, false
	}
	guess := Type(rest[:j])
	data := NewData(guess)
	if data == nil {
		return Event{}, false
	}
	w := wire[any]{Data: data}
	if err := strictUnmarshal(b, &w); err != nil || w.Schema != SchemaV1 || w.Type != guess || w.Data != data {
		return Event{}, false
	}
	e := w.event(data)
	if e.Validate() != nil {
		return Event{}, false
	}
	return e, true
}

// decodeBody decodes the body of a v1 envelope and validates the event.
func decodeBody(w wire[json.RawMessage]) (Event, error) {
	if w.Type == "" {
		return Event{}, &DecodeError{Kind: ErrMissingField, Field: "type", Reason: "is required"}
	}
	data := NewData(w.Type)
	if data == nil {
		return Event{}, &DecodeError{Kind: ErrUnknownType, Field: "type", Reason: fmt.Sprintf("%q", clip(string(w.Type)))}
	}
	if len(w.Data) == 0 || bytes.Equal(w.Data, []byte("null")) {
		return Event{}, &DecodeError{Kind: ErrMissingField, Field: "data", Reason: "is required"}
	}
	if err := strictUnmarshal(w.Data, data); err != nil {
		return Event{}, &DecodeError{Kind: ErrInvalidField, Field: "data", Reason: err.Error()}
	}
	e := w.event(data)
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.Errorf("trailing data after the JSON document")
	}
	return nil
}

// MarshalJSON renders the envelope with its data, for the log, APIs and
// audit output.
func (e Event) MarshalJSON() ([]byte, error) {
	return json.Marshal(wire[any]{
		Schema: e.Schema, EventID: e.EventID, IntentID: e.IntentID, Version: e.Version,
		Type: e.Type, At: e.At, Actor: e.Actor, AttemptID: e.AttemptID, Data: e.Data,
	})
}
