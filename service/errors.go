package service

import (
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
)

// What a transport tells apart in the service's errors, whichever layer
// raised them: api and mcp match these (errors.Is, errors.As) and map
// each to their own answer, never a lower layer's errors. ErrForbidden,
// ErrNotFound and ErrInFlight (service.go) are the service's own.
var (
	// ErrInvalidRequest: a field of the request is refused; it wraps an
	// *events.FieldError naming the field.
	ErrInvalidRequest = producer.ErrInvalidRequest
	// ErrPayloadTooLarge: the payload exceeds the log's limit; nothing was
	// recorded.
	ErrPayloadTooLarge = producer.ErrPayloadTooLarge
	// ErrUnknownRoute: no route of that name.
	ErrUnknownRoute = producer.ErrUnknownRoute
	// ErrPayloadMismatch: the request id is recorded with another
	// payload.
	ErrPayloadMismatch = producer.ErrPayloadMismatch
	// ErrOutcomeNotRecorded: the write was made and its outcome is not on
	// the log yet; reconciliation settles it.
	ErrOutcomeNotRecorded = producer.ErrOutcomeNotRecorded
	// ErrNotAllowed: an operator action the intent's state refuses.
	ErrNotAllowed = producer.ErrNotAllowed
	// ErrConflict: the intent changed while the request was recorded.
	ErrConflict = ledger.ErrConflict
	// ErrIntentHeld: the intent lost events in an accepted log loss and
	// is a human's (a *HeldError).
	ErrIntentHeld = producer.ErrIntentHeld
	// ErrLogUnavailable: the log cannot take appends now (wrapping why:
	// ledger.ErrDiskFull, ErrClockOffset, ErrLogDamaged, ErrNotConnected,
	// ErrLogVerifying).
	ErrLogUnavailable = ledger.ErrLogUnavailable
)

// HeldError is a held intent, or one whose history this version cannot
// fold: permanent until a human acts.
type HeldError = producer.HeldError
