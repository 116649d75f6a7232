package events

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on ids. Tokens end up in NATS subjects, so they are restricted to a
// subject-safe alphabet; free-form ids (request ids, accounts) are hashed
// before they reach a subject and only need to be printable.
const (
	MaxTokenLen    = 64
	MaxFreeformLen = 256
)

// SubjectPrefix is the root of every subject settle writes.
const SubjectPrefix = "settle.intents"

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// ValidateToken checks a subject-safe token (tenant, route): 1..64 bytes of
// [a-z0-9_-]. field names the field in the error.
func ValidateToken(field, v string) error {
	if v == "" {
		return &FieldError{Field: field, Reason: "is required"}
	}
	if len(v) > MaxTokenLen {
		return &FieldError{Field: field, Reason: fmt.Sprintf("is %d bytes, the limit is %d", len(v), MaxTokenLen)}
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' {
			continue
		}
		return &FieldError{Field: field, Reason: fmt.Sprintf("has %q at byte %d; allowed are a-z 0-9 _ -", c, i)}
	}
	return nil
}

// ValidateFreeform checks a free-form id (request id, account id, parent id):
// 1..256 bytes of valid UTF-8 without control characters or surrounding space.
func ValidateFreeform(field, v string) error {
	if v == "" {
		return &FieldError{Field: field, Reason: "is required"}
	}
	if len(v) > MaxFreeformLen {
		return &FieldError{Field: field, Reason: fmt.Sprintf("is %d bytes, the limit is %d", len(v), MaxFreeformLen)}
	}
	if !utf8.ValidString(v) {
		return &FieldError{Field: field, Reason: "is not valid UTF-8"}
	}
	if strings.TrimSpace(v) != v {
		return &FieldError{Field: field, Reason: "has leading or trailing white space"}
	}
	for i, r := range v {
		if unicode.IsControl(r) {
			return &FieldError{Field: field, Reason: fmt.Sprintf("has a control character at byte %d", i)}
		}
	}
	return nil
}

// ScopedIntentID derives the stable, subject-safe id of an intent
// ("intent/v2") from tenant, route, account and request id: the same four
// always give the same id, and the same request id (idempotency key) used
// by another tenant or for another account is another intent. Every
// intent's id is derived with it.
func ScopedIntentID(tenant, route, account, requestID string) string {
	return digest("in_", "intent/v2", tenant, route, account, requestID)
}

// IdempotencyKey derives the key sent to the external API for an intent. It
// is identical on every attempt of the intent and never depends on time or
// on the attempt number.
func IdempotencyKey(intentID string) string {
	return digest("sk_", "idem/v1", intentID)
}

// ToolKey derives a request id for a caller (an agent tool call) from its
// task and step, and optionally the payload hash: never from an attempt or
// a clock, so a re-run of the same step maps to the same intent.
func ToolKey(task, step, payloadSHA256 string) string {
	if payloadSHA256 == "" {
		return digest("tool:", "tool/v1", task, step)
	}
	return digest("tool:", "tool/v1", task, step, payloadSHA256)
}

func digest(prefix, domain string, parts ...string) string {
	// sha256(domain, then per part: 0, its length in decimal, 0, the part),
	// its first 20 bytes in lower-case unpadded base32, after prefix. Built
	// in buffers on the stack: one allocation, the string.
	var in [256]byte
	b := append(in[:0], domain...)
	for _, p := range parts {
		b = append(b, 0)
		b = strconv.AppendInt(b, int64(len(p)), 10)
		b = append(b, 0)
		b = append(b, p...)
	}
	sum := sha256.Sum256(b)
	var out [64]byte
	n := copy(out[:], prefix)
	enc := out[n : n+b32.EncodedLen(20)]
	b32.Encode(enc, sum[:20])
	for i, c := range enc {
		if c >= 'A' && c <= 'Z' {
			enc[i] = c + 'a' - 'A'
		}
	}
	return string(out[:n+len(enc)])
}

// ValidateIntentID checks an id produced by IntentID.
func ValidateIntentID(v string) error {
	if !strings.HasPrefix(v, "in_") || len(v) != 3+32 {
		return &FieldError{Field: "intent_id", Reason: fmt.Sprintf("%q is not an intent id (in_ + 32 base32 characters)", clip(v))}
	}
	for i := 3; i < len(v); i++ {
		c := v[i]
		if !((c >= 'a' && c <= 'z') || (c >= '2' && c <= '7')) {
			return &FieldError{Field: "intent_id", Reason: fmt.Sprintf("%q has %q at byte %d", clip(v), c, i)}
		}
	}
	return nil
}

// AttemptID names attempt n (1-based) of an intent: "<intent_id>.a<n>".
func AttemptID(intentID string, n int) string {
	return intentID + ".a" + strconv.Itoa(n)
}

// ParseAttemptID splits an attempt id into intent id and attempt number.
func ParseAttemptID(v string) (intentID string, n int, err error) {
	i := strings.LastIndex(v, ".a")
	if i < 0 {
		return "", 0, &FieldError{Field: "attempt_id", Reason: fmt.Sprintf("%q has no .a<n> suffix", clip(v))}
	}
	n, convErr := strconv.Atoi(v[i+2:])
	if convErr != nil || n < 1 || n > 1000 {
		return "", 0, &FieldError{Field: "attempt_id", Reason: fmt.Sprintf("%q has a bad attempt number", clip(v))}
	}
	if err := ValidateIntentID(v[:i]); err != nil {
		return "", 0, &FieldError{Field: "attempt_id", Reason: err.(*FieldError).Reason}
	}
	return v[:i], n, nil
}

// Subject is the subject that carries every event of one intent.
func Subject(route, intentID string) string {
	return SubjectPrefix + "." + route + "." + intentID
}

// RouteSubjects is the filter for every intent of one route.
func RouteSubjects(route string) string { return SubjectPrefix + "." + route + ".*" }

// AllSubjects is the filter for every intent.
const AllSubjects = SubjectPrefix + ".>"

// RouteFilters is the filters for every intent of routes, or AllSubjects
// when routes is empty.
func RouteFilters(routes []string) []string {
	if len(routes) == 0 {
		return []string{AllSubjects}
	}
	filters := make([]string, len(routes))
	for i, r := range routes {
		filters[i] = RouteSubjects(r)
	}
	return filters
}

// ParseSubject returns route and intent id of an intent subject.
func ParseSubject(subject string) (route, intentID string, err error) {
	rest, ok := strings.CutPrefix(subject, SubjectPrefix+".")
	if !ok {
		return "", "", &FieldError{Field: "subject", Reason: fmt.Sprintf("%q is not under %s", clip(subject), SubjectPrefix)}
	}
	route, intentID, ok = strings.Cut(rest, ".")
	if !ok {
		return "", "", &FieldError{Field: "subject", Reason: fmt.Sprintf("%q has no intent id", clip(subject))}
	}
	if err := ValidateToken("route", route); err != nil {
		return "", "", err
	}
	if err := ValidateIntentID(intentID); err != nil {
		return "", "", err
	}
	return route, intentID, nil
}

// MsgID is the Nats-Msg-Id of the event at version (1-based) of an intent.
// It doubles as the event id: a retried append carries the same id and is
// deduplicated; a competing append is refused by the per-subject CAS.
func MsgID(intentID string, version uint64) string {
	return intentID + ":" + strconv.FormatUint(version, 10)
}

// isMsgID reports whether id is MsgID(intentID, version), without
// building it.
func isMsgID(id, intentID string, version uint64) bool {
	n := len(intentID)
	if len(id) <= n+1 || id[:n] != intentID || id[n] != ':' {
		return false
	}
	var buf [20]byte
	return id[n+1:] == string(strconv.AppendUint(buf[:0], version, 10))
}

// ParseMsgID splits a Nats-Msg-Id into intent id and version.
func ParseMsgID(v string) (intentID string, version uint64, err error) {
	id, ver, ok := strings.Cut(v, ":")
	if !ok {
		return "", 0, &FieldError{Field: "event_id", Reason: fmt.Sprintf("%q has no :version", clip(v))}
	}
	n, convErr := strconv.ParseUint(ver, 10, 64)
	if convErr != nil || n == 0 {
		return "", 0, &FieldError{Field: "event_id", Reason: fmt.Sprintf("%q has a bad version", clip(v))}
	}
	if err := ValidateIntentID(id); err != nil {
		return "", 0, err
	}
	return id, n, nil
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
