package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/internal/contentcoding"
	"github.com/settle-dev/settle/internal/jsonstr"
)

// MaxBodyBytes bounds a request body (a payload is at most 1 MiB in
// canonical form; the rest is room for white space and the envelope).
const MaxBodyBytes = 4 << 20

// readJSONBody reads a POST body that must be application/json, sent as
// is. Requiring the media type also means a cross-site form cannot post
// to the API (a JSON content type needs a CORS preflight, which is never
// granted).
func readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, *Problem) {
	if p := checkContentEncoding(w, r.Header); p != nil {
		return nil, p
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return nil, newProblem(http.StatusUnsupportedMediaType, ProbUnsupportedMedia, "send Content-Type: application/json")
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, newProblem(http.StatusRequestEntityTooLarge, ProbTooLarge, fmt.Sprintf("the body exceeds %d bytes", MaxBodyBytes))
		}
		var ne net.Error
		if errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			return nil, newProblem(http.StatusRequestTimeout, ProbTimeout, "the body did not arrive within the server's read timeout; nothing was recorded")
		}
		return nil, invalid("body", "the body could not be read")
	}
	return data, nil
}

// checkContentEncoding refuses a body sent with a content coding (415
// naming the header, with Accept-Encoding: identity, RFC 7694): the API
// reads bodies as sent and decodes none, so a body labelled gzip is
// refused whether or not it is compressed, rather than read as if it
// were not.
func checkContentEncoding(w http.ResponseWriter, h http.Header) *Problem {
	c := contentcoding.Refused(h)
	if c == "" {
		return nil
	}
	w.Header().Set("Accept-Encoding", "identity")
	return newProblem(http.StatusUnsupportedMediaType, ProbUnsupportedMedia,
		"Content-Encoding: "+c+" is not supported; send the body uncompressed, without Content-Encoding; nothing was recorded").
		withField("Content-Encoding")
}

// decodeObject decodes a JSON object strictly into fields: every member
// must be one of fields (unknown members are refused by name), none may
// appear twice, and nothing may follow the object. Destinations are
// *string, *bool, *json.RawMessage and *time.Time (RFC 3339); null leaves
// a destination at its zero value. A string that is not valid Unicode is
// refused naming the member (a raw value is checked by its reader).
func decodeObject(data []byte, fields map[string]any) *Problem {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return invalid("body", "the body is not JSON: "+jsonErr(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return invalid("body", "the body must be a JSON object")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return invalid("body", "malformed JSON: "+jsonErr(err))
		}
		key, ok := tok.(string)
		if !ok {
			return invalid("body", "malformed JSON: expected a member name")
		}
		name := clip(key, 64)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return invalid(name, name+": malformed JSON: "+jsonErr(err))
		}
		dst, known := fields[key]
		if !known {
			return invalid(name, name+": unknown field")
		}
		if seen[key] {
			return invalid(name, name+": appears more than once")
		}
		seen[key] = true
		if p := decodeField(name, raw, dst); p != nil {
			return p
		}
	}
	if _, err := dec.Token(); err != nil {
		return invalid("body", "malformed JSON: "+jsonErr(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("body", "malformed JSON: data after the object")
	}
	return nil
}

func decodeField(name string, raw json.RawMessage, dst any) *Problem {
	if string(raw) == "null" {
		return nil
	}
	if _, isRaw := dst.(*json.RawMessage); !isRaw && !jsonstr.ValidUnicode(raw) {
		// encoding/json would read it as U+FFFD: two different request
		// ids would be one.
		return invalid(name, name+": is not valid Unicode (invalid UTF-8, or half of a surrogate pair escaped)")
	}
	switch d := dst.(type) {
	case *string:
		if err := json.Unmarshal(raw, d); err != nil {
			return invalid(name, name+": must be a string")
		}
	case *bool:
		if err := json.Unmarshal(raw, d); err != nil {
			return invalid(name, name+": must be true or false")
		}
	case *json.RawMessage:
		*d = append(json.RawMessage(nil), raw...)
	case *time.Time:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return invalid(name, name+": must be an RFC 3339 time string")
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return invalid(name, name+": must be an RFC 3339 time like 2026-01-02T15:04:05Z")
		}
		if t.Year() < 1970 || t.Year() > 9999 {
			return invalid(name, name+": is out of range")
		}
		*d = t.UTC()
	default:
		panic(fmt.Sprintf("decodeField: unsupported destination %T", dst))
	}
	return nil
}

// jsonErr describes a JSON syntax error without quoting the input.
func jsonErr(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return "invalid JSON"
}

// parseIdempotencyKey reads an Idempotency-Key header value: an RFC 8941
// sf-string ("..." with \" and \\ escapes), as the IETF draft specifies,
// or, leniently, a bare value.
func parseIdempotencyKey(v string) (string, error) {
	v = strings.TrimSpace(v)
	if !strings.HasPrefix(v, `"`) {
		return v, nil
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i >= len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", errors.New("bad escape in the sf-string")
			}
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", errors.New("data after the sf-string")
			}
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", errors.New("an sf-string holds printable ASCII only")
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("unterminated sf-string")
}
