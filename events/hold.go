package events

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
)

// The hold marker. When an operator accepts that the log lost events
// (serve --accept-log-loss), every intent that lost some is held: its
// history may be older than what happened (a WriteStarted gone makes a
// written intent look recorded), so nothing may be written for it again.
// The hold is recorded on the log itself, as one message on the intent's
// own subject, after what the subject still holds: the hold marker. It is
// not an event of the lifecycle (it has no version and folds into
// nothing); a reader tells it by its header (HoldHeader) and reads its
// body with DecodeHold. Because it is on the subject, no writer can record
// the intent anew there (a first event is appended with "subject empty"
// CAS), and every process that reads the subject — this one or another on
// the same stream — sees the hold before it writes.

// HoldHeader is the header that marks a hold marker; its value is the
// hold's reason.
const HoldHeader = "Settle-Hold"

// HoldSchema is the schema of a hold marker's body.
const HoldSchema = "settle.hold/v1"

// HoldMsgID is the Nats-Msg-Id of an intent's hold marker. It is not an
// event id (ParseMsgID refuses it): a reader that expects the intent's
// last message to be an event sees another one there.
func HoldMsgID(intentID string) string { return intentID + ":hold" }

// Hold is the body of a hold marker: which intent, why, and what the log
// is known to have lost of it.
type Hold struct {
	Schema   string `json:"schema"`
	IntentID string `json:"intent_id"`
	// Reason is ReasonLogEventsLost.
	Reason string `json:"reason"`
	// Versions are the intent's versions known lost (from the views), and
	// Seqs their stream sequences; both may be empty (the loss is then
	// known by its ranges only).
	Versions []uint64 `json:"versions,omitempty"`
	Seqs     []uint64 `json:"seqs,omitempty"`
	// Accepted are the stream's lost sequence ranges (inclusive) the
	// operator accepted when the hold was made.
	Accepted [][2]uint64 `json:"accepted,omitempty"`
	At       time.Time   `json:"at"`
	By       string      `json:"by"`
	Message  string      `json:"message"`
}

// maxHoldListed bounds the versions a hold lists (a history longer than
// that is named by its first ones and the count).
const maxHoldListed = 256

// Validate checks a hold's fields, naming the first invalid one.
func (h Hold) Validate() error {
	switch {
	case h.Schema != HoldSchema:
		return &FieldError{Field: "schema", Reason: fmt.Sprintf("%q (this version reads %s)", clip(h.Schema), HoldSchema)}
	case h.Reason != string(ReasonLogEventsLost):
		return &FieldError{Field: "reason", Reason: fmt.Sprintf("%q is not %s", clip(h.Reason), ReasonLogEventsLost)}
	case h.At.IsZero():
		return &FieldError{Field: "at", Reason: "is required"}
	case h.By == "":
		return &FieldError{Field: "by", Reason: "is required"}
	case len(h.Versions) > maxHoldListed || len(h.Seqs) > maxHoldListed || len(h.Accepted) > maxHoldListed:
		return &FieldError{Field: "versions", Reason: fmt.Sprintf("lists more than %d entries", maxHoldListed)}
	case len(h.Message) > MaxFreeformLen*4:
		return &FieldError{Field: "message", Reason: fmt.Sprintf("is longer than %d bytes", MaxFreeformLen*4)}
	}
	if err := ValidateIntentID(h.IntentID); err != nil {
		return err
	}
	for _, r := range h.Accepted {
		if r[0] == 0 || r[1] < r[0] {
			return &FieldError{Field: "accepted", Reason: fmt.Sprintf("%d..%d is not a sequence range", r[0], r[1])}
		}
	}
	return nil
}

// NewHold returns the hold of intentID for a loss of versions (at seqs)
// inside the accepted ranges, cut to what a hold may list.
func NewHold(intentID string, versions, seqs []uint64, accepted [][2]uint64, at time.Time, by, message string) Hold {
	return Hold{Schema: HoldSchema, IntentID: intentID, Reason: string(ReasonLogEventsLost),
		Versions: versions[:min(len(versions), maxHoldListed)], Seqs: seqs[:min(len(seqs), maxHoldListed)],
		Accepted: accepted[:min(len(accepted), maxHoldListed)], At: at.UTC(), By: by, Message: message}
}

// EncodeHold validates and encodes a hold marker's body.
func EncodeHold(h Hold) ([]byte, error) {
	if err := h.Validate(); err != nil {
		return nil, errors.Errorf("encode hold: %w", err)
	}
	return json.Marshal(h)
}

// DecodeHold decodes a hold marker's body strictly (unknown fields
// refused). It never panics.
func DecodeHold(data []byte) (Hold, error) {
	var h Hold
	if len(data) > MaxEventSize {
		return h, errors.Errorf("decode hold: %w", &FieldError{Field: "body", Reason: "is too large"})
	}
	if err := strictUnmarshal(data, &h); err != nil {
		return Hold{}, errors.Errorf("decode hold: %w", &FieldError{Field: "body", Reason: clip(err.Error())})
	}
	if err := h.Validate(); err != nil {
		return Hold{}, errors.Errorf("decode hold: %w", err)
	}
	return h, nil
}

// Named says which of the intent's events the hold names lost, for an
// answer or a log line: "versions 2, 3 (sequences 120..121)", or the
// accepted ranges when the versions are not known.
func (h Hold) Named() string {
	s := "events the views did not know"
	if len(h.Versions) > 0 {
		vs := make([]string, len(h.Versions))
		for k, v := range h.Versions {
			vs[k] = strconv.FormatUint(v, 10)
		}
		s = "versions " + strings.Join(vs, ", ")
		if len(h.Seqs) > 0 {
			s += " (sequences " + seqList(h.Seqs) + ")"
		}
	}
	if len(h.Accepted) > 0 {
		rs := make([]string, len(h.Accepted))
		for k, r := range h.Accepted {
			rs[k] = seqRange(r[0], r[1])
		}
		s += " in the loss of sequences " + strings.Join(rs, ", ")
	}
	return s + ", accepted at " + h.At.UTC().Format(time.RFC3339)
}

func seqList(s []uint64) string {
	var out []string
	for k := 0; k < len(s); {
		j := k
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		out = append(out, seqRange(s[k], s[j]))
		k = j + 1
	}
	return strings.Join(out, ", ")
}

// seqRange is "a..b", or "a" alone when b is a.
func seqRange(a, b uint64) string {
	if a == b {
		return fmt.Sprint(a)
	}
	return fmt.Sprintf("%d..%d", a, b)
}
