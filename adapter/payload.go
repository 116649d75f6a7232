package adapter

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
)

// Payload helpers of every adapter: their error texts are part of each
// adapter's contract.

// PayloadError is a payload validation error naming the field
// (payload.body, payload.assets[2], ...): a *events.FieldError.
func PayloadError(field, reason string) error {
	return &events.FieldError{Field: field, Reason: reason}
}

// FieldPath renders parent.key, or parent["key"] when key is not a plain
// identifier; long keys are cut.
func FieldPath(parent, key string) string {
	plain := key != ""
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			plain = false
			break
		}
	}
	if len(key) > 64 {
		key = strings.ToValidUTF8(key[:64], "") + "..."
		plain = false
	}
	if plain {
		return parent + "." + key
	}
	return parent + "[" + strconv.Quote(key) + "]"
}

// IsSHA256Hex reports whether s is a sha256 in 64 lowercase hex characters.
func IsSHA256Hex(s string) bool {
	return len(s) == 64 && strings.Trim(s, "0123456789abcdef") == ""
}

// CanonicalizePayload returns canon/v1 of a caller's payload. Errors are
// *events.FieldError: "payload" when it is empty or not canonicalizable,
// the offending member (payload.a[1], ...) when canon/v1 names one.
func CanonicalizePayload(raw []byte) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, PayloadError("payload", "is required")
	}
	canon, err := events.Canonicalize(raw)
	if err != nil {
		var ce *events.CanonError
		if errors.As(err, &ce) {
			return nil, PayloadError("payload"+strings.TrimPrefix(ce.Path, "$"), ce.Reason)
		}
		return nil, PayloadError("payload", "is not canonicalizable")
	}
	return canon, nil
}

// ObjectMembers decodes raw, which must be a JSON object, into its members,
// refusing any member not in known. Errors are *events.FieldError naming
// field, or the first unknown member in sorted order; the reason lists
// known in the order given.
func ObjectMembers(raw []byte, field string, known ...string) (map[string]json.RawMessage, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, PayloadError(field, "must be a JSON object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, PayloadError(field, "must be a JSON object")
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, PayloadError(FieldPath(field, unknown[0]), "is not a known field (known: "+strings.Join(known, ", ")+")")
	}
	return m, nil
}
