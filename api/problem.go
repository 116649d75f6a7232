package api

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/service"
)

// ProblemTypePrefix prefixes every problem type URI (RFC 9457 "type").
const ProblemTypePrefix = "urn:settle:problem:"

// Problem is an RFC 9457 problem details document. Field names the
// offending request field of a validation problem; IntentID and State
// are set when the problem concerns one intent.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	Field    string `json:"field,omitempty"`
	IntentID string `json:"intent_id,omitempty"`
	State    string `json:"state,omitempty"`
}

// Problem types.
const (
	ProbInvalidRequest   = "invalid-request"
	ProbUnauthorized     = "unauthorized"
	ProbForbidden        = "forbidden"
	ProbNotFound         = "not-found"
	ProbMethodNotAllowed = "method-not-allowed"
	ProbPayloadMismatch  = "payload-mismatch"
	ProbInFlight         = "request-in-flight"
	ProbNotAllowed       = "action-not-allowed"
	ProbConflict         = "conflict"
	ProbUnsupportedMedia = "unsupported-media-type"
	ProbTooLarge         = "request-too-large"
	ProbTimeout          = "request-timeout"
	ProbUnavailable      = "unavailable"
	ProbOutcomeUnsettled = "outcome-not-recorded"
	ProbIntentHeld       = "intent-held"
	ProbUnreadable       = "history-unreadable"
	ProbInternal         = "internal"
)

var problemTitles = map[string]string{
	ProbInvalidRequest:   "The request is invalid",
	ProbUnauthorized:     "Authentication is required",
	ProbForbidden:        "The token may not do this",
	ProbNotFound:         "Not found",
	ProbMethodNotAllowed: "Method not allowed",
	ProbPayloadMismatch:  "The request id is already used with another payload",
	ProbInFlight:         "A request with this request id is still in flight",
	ProbNotAllowed:       "The action is not allowed in the intent's state",
	ProbConflict:         "The intent changed concurrently",
	ProbUnsupportedMedia: "The body must be uncompressed application/json",
	ProbTooLarge:         "The request body is too large",
	ProbTimeout:          "The request was not received in time",
	ProbUnavailable:      "A dependency is unavailable",
	ProbOutcomeUnsettled: "The write happened but its outcome is not recorded yet",
	ProbIntentHeld:       "The intent is held: the log lost some of its events",
	ProbUnreadable:       "The intent's history on the log cannot be read",
	ProbInternal:         "Internal error",
}

func newProblem(status int, kind, detail string) *Problem {
	return &Problem{Type: ProblemTypePrefix + kind, Title: problemTitles[kind], Status: status, Detail: detail}
}

func (p *Problem) withField(f string) *Problem { p.Field = f; return p }

func (p *Problem) withIntent(id, state string) *Problem { p.IntentID, p.State = id, state; return p }

func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

func writeProblem(w http.ResponseWriter, p *Problem) {
	writeBody(w, "application/problem+json", p.Status, p)
}

func writeJSON(w http.ResponseWriter, status int, v any) { writeBody(w, "application/json", status, v) }

func writeBody(w http.ResponseWriter, contentType string, status int, v any) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// problemOf is the problem of a refusal of the service: forbidden (403,
// naming the route or account when it is one), not found (404), invalid
// (400 naming the field) or in flight (409); nil for any other error.
func problemOf(err error) *Problem {
	if p := heldProblem(err); p != nil {
		return p
	}
	var fe *events.FieldError
	switch {
	case errors.Is(err, service.ErrForbidden):
		detail := "the token may not do this"
		p := newProblem(http.StatusForbidden, ProbForbidden, detail)
		if errors.As(err, &fe) {
			p.Detail = strings.Replace(fe.Reason, "the caller", "the token", 1)
			p.Field = fe.Field
		}
		return p
	case errors.Is(err, service.ErrNotFound):
		return newProblem(http.StatusNotFound, ProbNotFound, "no such intent")
	case errors.Is(err, service.ErrInvalidRequest):
		return fieldProblem(err)
	case errors.Is(err, service.ErrInFlight):
		return newProblem(http.StatusConflict, ProbInFlight, "a request with this request id is executing; retry later")
	}
	return nil
}

// invalid is a 400 naming field.
func invalid(field, detail string) *Problem {
	return newProblem(http.StatusBadRequest, ProbInvalidRequest, detail).withField(field)
}

// fieldProblem maps an error wrapping *events.FieldError to a 400 naming
// the field as the API calls it ("data.reason" of an event body is the
// request's "reason").
func fieldProblem(err error) *Problem {
	var fe *events.FieldError
	if errors.As(err, &fe) {
		f := apiField(fe.Field)
		return invalid(f, f+": "+fe.Reason)
	}
	return newProblem(http.StatusBadRequest, ProbInvalidRequest, "the request is invalid")
}

func apiField(f string) string {
	f = strings.TrimPrefix(f, "data.")
	f = strings.TrimPrefix(f, "receipt.")
	if f == "by" {
		f = "operator"
	}
	return f
}

// heldProblem maps a history that cannot be folded
// (producer.ErrIntentHeld, producer.ErrHistoryUnreadable) to a 409 that
// names the intent and, for a held one, the loss; nil for other errors.
// Nothing was recorded or written for the request.
func heldProblem(err error) *Problem {
	var he *service.HeldError
	if !errors.As(err, &he) {
		return nil
	}
	if errors.Is(err, service.ErrIntentHeld) {
		detail := "the log lost some of this intent's events and an operator accepted the loss: the intent is held for a human and nothing is recorded or written for it (" + he.Why + ")"
		if he.Hold != nil {
			detail += "; lost: " + he.Hold.Named()
		}
		return newProblem(http.StatusConflict, ProbIntentHeld, detail+"; see settle audit --intent "+he.IntentID).withIntent(he.IntentID, "")
	}
	return newProblem(http.StatusConflict, ProbUnreadable,
		"this version cannot fold the intent's history ("+he.Why+"); nothing was recorded or written; see settle audit --intent "+he.IntentID).withIntent(he.IntentID, "")
}
