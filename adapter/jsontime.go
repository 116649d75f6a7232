package adapter

import (
	"bytes"
	"encoding/json"
	"time"
)

// JSONTime is a time.Time read from an external API's JSON the way the
// JSON spec says a string is read: escapes undone first, then the RFC 3339
// text parsed as time.Time.UnmarshalText does. time.Time's own UnmarshalJSON
// parses the raw bytes between the quotes (golang/go#47353), so a
// timestamp that a server's encoder escaped — System.Text.Json writes '+'
// as \u002B by default, so "2026-12-01T09:00:00\u002B01:00" — would make
// the whole response unreadable. null leaves the zero time, as it does for
// time.Time. It writes itself as time.Time does.
type JSONTime struct{ time.Time }

// UnmarshalJSON implements json.Unmarshaler.
func (t *JSONTime) UnmarshalJSON(b []byte) error {
	if bytes.IndexByte(b, '\\') < 0 {
		// Nothing escaped: the raw bytes are the text (the common case,
		// and what time.Time reads).
		return t.Time.UnmarshalJSON(b)
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	return t.Time.UnmarshalText([]byte(s))
}
