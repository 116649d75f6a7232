package events

import (
	"encoding/json"
	"fmt"

	"github.com/cockroachdb/errors"
)

// Decode codes: the stable name of why bytes on the log are not an event
// this version reads. The projector's quarantine, the audit's report and
// the downstream subscription all use these (defined here once).
const (
	CodeUnknownSchema = "unknown_schema"
	CodeUnknownType   = "unknown_type"
	CodeMalformed     = "malformed"
	CodeMissingField  = "missing_field"
	CodeInvalidField  = "invalid_field"
	CodeBadID         = "bad_id"
)

// DecodeCode is the decode code of an error returned by Decode (anything
// that matches none of the sentinels is CodeMalformed).
func DecodeCode(err error) string {
	switch {
	case errors.Is(err, ErrUnknownSchema):
		return CodeUnknownSchema
	case errors.Is(err, ErrUnknownType):
		return CodeUnknownType
	case errors.Is(err, ErrMissingField):
		return CodeMissingField
	case errors.Is(err, ErrBadID):
		return CodeBadID
	case errors.Is(err, ErrInvalidField):
		return CodeInvalidField
	default:
		return CodeMalformed
	}
}

// Code is the error's decode code.
func (e *DecodeError) Code() string { return DecodeCode(e) }

// Unreadable is why raw, which Decode refused with err, cannot be read.
// Decode refuses some bytes as malformed before it reads their schema (an
// event over MaxEventSize); a lenient look at "schema" tells an event of a
// schema this version does not read (ErrUnknownSchema: a newer writer's,
// left for an upgraded reader) from a broken one.
func Unreadable(raw []byte, err error) *DecodeError {
	var de *DecodeError
	if !errors.As(err, &de) {
		de = &DecodeError{Kind: ErrMalformed, Reason: err.Error()}
	}
	if errors.Is(err, ErrMalformed) {
		var peek struct {
			Schema string `json:"schema"`
		}
		if json.Unmarshal(raw, &peek) == nil && peek.Schema != "" && peek.Schema != SchemaV1 {
			return &DecodeError{Kind: ErrUnknownSchema, Field: "schema", Reason: fmt.Sprintf("%q (this version reads %s)", clip(peek.Schema), SchemaV1)}
		}
	}
	return de
}
