package social

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/settle-dev/settle/adapter"
)

// Fast paths of the write path's JSON. encoding/json was most of the
// social adapter's CPU per write (decoding the POST's response, reading the
// caller's payload through canon/v1 and a map, encoding the request). Each
// fast path below reads or writes only the common shape and says ok only
// where the result is certainly what the full way gives; on anything else
// the caller runs the full way, so results and errors are unchanged for
// every input. fastjson_internal_test.go checks each against the full way
// (TestCreatedPostAgrees, TestNormalizeAgrees, TestCreateBodyAgrees and a
// Fuzz...Agrees for each; TestScanString for the scanner they share).

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func isHexDigit(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// stringStop marks the bytes that end a run of plain bytes in a JSON
// string: '"', '\\' and the control characters.
var stringStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// scanString checks the JSON string that starts at b[i] (a '"') and
// returns the index after its closing quote; plain says it holds no escape.
// ok is false where a JSON parser refuses it: a raw control byte, a bad
// escape, no closing quote. Bytes of 0x80 and above are not checked
// (encoding/json takes invalid UTF-8 there).
func scanString(b []byte, i int) (end int, plain, ok bool) {
	plain = true
	for i++; ; i++ {
		// Eight bytes at a time while none is '"', '\\' or below 0x20
		// (each test is exact as to whether any byte matches).
		for i+8 <= len(b) {
			const ones, highs = 0x0101010101010101, 0x8080808080808080
			x := binary.LittleEndian.Uint64(b[i:])
			q, bs := x^(ones*'"'), x^(ones*'\\')
			if ((x-ones*0x20)&^x|(q-ones)&^q|(bs-ones)&^bs)&highs != 0 {
				break
			}
			i += 8
		}
		for i < len(b) && !stringStop[b[i]] {
			i++
		}
		if i >= len(b) || b[i] < 0x20 {
			return 0, false, false
		}
		if b[i] == '"' {
			return i + 1, plain, true
		}
		// An escape.
		plain = false
		i++
		if i >= len(b) {
			return 0, false, false
		}
		switch b[i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		case 'u':
			if len(b)-i < 5 || !isHexDigit(b[i+1]) || !isHexDigit(b[i+2]) || !isHexDigit(b[i+3]) || !isHexDigit(b[i+4]) {
				return 0, false, false
			}
			i += 4
		default:
			return 0, false, false
		}
	}
}

// scanNumber checks the JSON number that starts at b[i] and returns the
// index after it.
func scanNumber(b []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		n := digits(i + 1)
		if n == i+1 {
			return 0, false
		}
		i = n
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		n := digits(i)
		if n == i {
			return 0, false
		}
		i = n
	}
	return i, true
}

// maxSkipDepth bounds the nesting skipValue follows; deeper input goes the
// full way (encoding/json's own limit is far higher).
const maxSkipDepth = 32

// skipValue checks the JSON value that starts at b[i] (white space already
// skipped) and returns the index after it. What follows it is the caller's
// to check.
func skipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; c {
	case '"':
		end, _, ok := scanString(b, i)
		return end, ok
	case '{', '[':
		if depth >= maxSkipDepth {
			return 0, false
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == closer {
			return i + 1, true
		}
		for {
			var ok bool
			if c == '{' {
				if i >= len(b) || b[i] != '"' {
					return 0, false
				}
				if i, _, ok = scanString(b, i); !ok {
					return 0, false
				}
				i = skipSpace(b, i)
				if i >= len(b) || b[i] != ':' {
					return 0, false
				}
				i = skipSpace(b, i+1)
			}
			if i, ok = skipValue(b, i, depth+1); !ok {
				return 0, false
			}
			i = skipSpace(b, i)
			switch {
			case i >= len(b):
				return 0, false
			case b[i] == closer:
				return i + 1, true
			case b[i] != ',':
				return 0, false
			}
			i = skipSpace(b, i+1)
		}
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	default:
		return scanNumber(b, i)
	}
}

func literal(b []byte, i int, lit string) (int, bool) {
	if !bytes.HasPrefix(b[i:], []byte(lit)) {
		return 0, false
	}
	return i + len(lit), true
}

// --- the POST's response ---

// The members of apiPost, in createdFields' order.
const (
	fieldID = iota
	fieldURL
	fieldAuthorID
	fieldBody
	fieldAssets
	fieldParentID
	fieldVisibility
	fieldCreatedAt
	// fieldOther: a member apiPost does not have.
	fieldOther = -1
	// fieldDoubt: a key that may match a member other than exactly
	// (encoding/json matches keys case-insensitively, with Unicode folding).
	fieldDoubt = -2
)

var createdFields = [...]string{"id", "url", "author_id", "body", "assets", "parent_id", "visibility", "created_at"}

// createdField names the apiPost member an unescaped key decodes into.
func createdField(key []byte) int {
	for f, name := range createdFields {
		if string(key) == name {
			return f
		}
	}
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return fieldDoubt
		}
	}
	for _, name := range createdFields {
		if asciiEqualFold(key, name) {
			return fieldDoubt
		}
	}
	return fieldOther
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// createdPost reads what Write needs of the POST's response: the ID and
// URL that json.Unmarshal into an apiPost gives, ok false where it fails.
func createdPost(body []byte) (id, url string, ok bool) {
	if id, url, ok := createdPostFast(body); ok {
		return id, url, true
	}
	var p apiPost
	if err := json.Unmarshal(body, &p); err != nil {
		return "", "", false
	}
	return p.ID, p.URL, true
}

// createdPostFast is createdPost in one pass over the body (json.Unmarshal
// into apiPost was a tenth of an Execute's CPU) for a response in the
// common shape: a valid JSON object whose keys are apiPost's exactly, each
// at most once, or keys that match none of them in any case; every member
// of apiPost of a type it decodes without error; id and url strings
// without escapes in valid UTF-8. ok is false on anything else, which
// createdPost then reads with json.Unmarshal; where ok, id and url are
// json.Unmarshal's and it succeeds (TestCreatedPostAgrees,
// FuzzCreatedPostAgrees).
func createdPostFast(b []byte) (id, url string, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return "", "", false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		var seen uint
		for {
			if i >= len(b) || b[i] != '"' {
				return "", "", false
			}
			end, plain, good := scanString(b, i)
			if !good || !plain {
				return "", "", false
			}
			f := createdField(b[i+1 : end-1])
			if f == fieldDoubt {
				return "", "", false
			}
			if f >= 0 {
				if seen&(1<<f) != 0 {
					return "", "", false
				}
				seen |= 1 << f
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return "", "", false
			}
			i = skipSpace(b, i+1)
			if i >= len(b) {
				return "", "", false
			}
			start := i
			switch {
			case bytes.HasPrefix(b[i:], []byte("null")):
				// Leaves every member of apiPost as it is, without error.
				i += 4
			case f == fieldID || f == fieldURL:
				if b[i] != '"' {
					return "", "", false
				}
				end, plain, good := scanString(b, i)
				if !good || !plain || !utf8.Valid(b[i+1:end-1]) {
					return "", "", false
				}
				if f == fieldID {
					id = string(b[i+1 : end-1])
				} else {
					url = string(b[i+1 : end-1])
				}
				i = end
			case f == fieldAuthorID || f == fieldBody || f == fieldParentID || f == fieldVisibility:
				if b[i] != '"' {
					return "", "", false
				}
				if i, _, good = scanString(b, i); !good {
					return "", "", false
				}
			case f == fieldAssets:
				if i, good = stringArray(b, i); !good {
					return "", "", false
				}
			case f == fieldCreatedAt:
				if b[i] != '"' {
					return "", "", false
				}
				if i, _, good = scanString(b, i); !good {
					return "", "", false
				}
				// What json.Unmarshal calls with the value's bytes.
				var t adapter.JSONTime
				if t.UnmarshalJSON(b[start:i]) != nil {
					return "", "", false
				}
			default:
				if i, good = skipValue(b, i, 1); !good {
					return "", "", false
				}
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return "", "", false
			}
			if b[i] == '}' {
				i++
				break
			}
			if b[i] != ',' {
				return "", "", false
			}
			i = skipSpace(b, i+1)
		}
	}
	if skipSpace(b, i) != len(b) {
		return "", "", false
	}
	return id, url, true
}

// stringArray checks a JSON array of strings and nulls (what a []string
// decodes without error) at b[i] and returns the index after it.
func stringArray(b []byte, i int) (int, bool) {
	if b[i] != '[' {
		return 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		switch {
		case i >= len(b):
			return 0, false
		case b[i] == '"':
			if i, _, ok = scanString(b, i); !ok {
				return 0, false
			}
		default:
			if i, ok = literal(b, i, "null"); !ok {
				return 0, false
			}
		}
		i = skipSpace(b, i)
		switch {
		case i >= len(b):
			return 0, false
		case b[i] == ']':
			return i + 1, true
		case b[i] != ',':
			return 0, false
		}
		i = skipSpace(b, i+1)
	}
}

// --- the caller's payload ---

// normalizeFastMax bounds the payloads normalizeFast reads, far below
// canon/v1's size limit, which the full way enforces.
const normalizeFastMax = 1 << 16

// sha256Item reports whether b[i:] starts with a JSON string of 64
// lowercase hex digits.
func sha256Item(b []byte, i int) bool {
	if len(b)-i < 66 || b[i] != '"' || b[i+65] != '"' {
		return false
	}
	for _, c := range b[i+1 : i+65] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// normalizeFast is NormalizePayload for a payload in a common shape: an
// object of "body" (a string in valid UTF-8 and NFC, without escapes or
// control characters, not blank) and optionally "assets" (an array of
// sha256 hex strings), in either order, JSON white space anywhere, each
// key once and without escapes. Its canonical form is then the body's and
// assets' own bytes, written without canon/v1's parse, a map and
// json.Marshal (those were ~20 µs of each Execute). ok is false on
// anything else, which NormalizePayload then reads the full way; where
// ok, the result is the full way's (TestNormalizeAgrees,
// FuzzNormalizeAgrees).
func normalizeFast(raw []byte) (json.RawMessage, bool) {
	if len(raw) > normalizeFastMax {
		return nil, false
	}
	var (
		body      []byte // the body string's content
		assets    []byte // the assets array, brackets included
		nAssets   int
		hasBody   bool
		hasAssets bool
	)
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	i = skipSpace(raw, i+1)
	for {
		switch {
		case !hasBody && bytes.HasPrefix(raw[i:], []byte(`"body"`)):
			hasBody = true
			i = skipSpace(raw, i+len(`"body"`))
			if i >= len(raw) || raw[i] != ':' {
				return nil, false
			}
			i = skipSpace(raw, i+1)
			if i >= len(raw) || raw[i] != '"' {
				return nil, false
			}
			end, plain, ok := scanString(raw, i)
			if !ok || !plain {
				return nil, false
			}
			body = raw[i+1 : end-1]
			// canon/v1 puts strings in NFC (and a raw CR, refused by
			// scanString, would become LF): a body that is not would
			// change.
			if !utf8.Valid(body) || !norm.NFC.IsNormal(body) || len(bytes.TrimSpace(body)) == 0 {
				return nil, false
			}
			i = end
		case !hasAssets && bytes.HasPrefix(raw[i:], []byte(`"assets"`)):
			hasAssets = true
			i = skipSpace(raw, i+len(`"assets"`))
			if i >= len(raw) || raw[i] != ':' {
				return nil, false
			}
			i = skipSpace(raw, i+1)
			if i >= len(raw) || raw[i] != '[' {
				return nil, false
			}
			start := i
			i = skipSpace(raw, i+1)
			if i < len(raw) && raw[i] == ']' {
				i++
			} else {
				for {
					if !sha256Item(raw, i) {
						return nil, false
					}
					nAssets++
					i = skipSpace(raw, i+66)
					if i >= len(raw) {
						return nil, false
					}
					if raw[i] == ']' {
						i++
						break
					}
					if raw[i] != ',' {
						return nil, false
					}
					i = skipSpace(raw, i+1)
				}
			}
			assets = raw[start:i]
		default:
			return nil, false
		}
		i = skipSpace(raw, i)
		if i >= len(raw) {
			return nil, false
		}
		if raw[i] == '}' {
			i++
			break
		}
		if raw[i] != ',' {
			return nil, false
		}
		i = skipSpace(raw, i+1)
	}
	if !hasBody || skipSpace(raw, i) != len(raw) {
		return nil, false
	}
	out := make([]byte, 0, len(`{"assets":[],"body":""}`)+67*nAssets+len(body))
	out = append(out, `{"assets":[`...)
	for j, n := 0, 0; j < len(assets); j++ {
		if assets[j] == '"' {
			if n > 0 {
				out = append(out, ',')
			}
			out = append(out, assets[j:j+66]...)
			j += 65
			n++
		}
	}
	out = append(out, `],"body":"`...)
	out = append(out, body...)
	out = append(out, `"}`...)
	return out, true
}

// --- the request body ---

// htmlSafe marks the ASCII bytes json.Marshal writes as they are: not
// control characters, '"', '\\' or the HTML characters '<', '>', '&'.
var htmlSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// plainJSONString reports whether json.Marshal writes s as its bytes
// between quotes: valid UTF-8 of htmlSafe ASCII and other runes than
// U+2028 and U+2029.
func plainJSONString(s string) bool {
	ascii := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf {
			ascii = false
		} else if !htmlSafe[c] {
			return false
		}
	}
	return ascii || (utf8.ValidString(s) && !strings.Contains(s, "\u2028") && !strings.Contains(s, "\u2029"))
}

// encodeCreateBody is json.Marshal(c), byte for byte, written directly
// when every string is plain (json.Marshal's reflection was ~2 µs of each
// write); otherwise json.Marshal's (TestCreateBodyAgrees,
// FuzzCreateBodyAgrees).
func encodeCreateBody(c createBody) ([]byte, error) {
	n := len(`{"account":"","body":""}`) + len(c.Account) + len(c.Body)
	plain := plainJSONString(c.Account) && plainJSONString(c.Body) && plainJSONString(c.ParentID)
	if len(c.Assets) > 0 {
		n += len(`,"assets":[]`)
		for _, a := range c.Assets {
			n += len(a) + 3
			plain = plain && plainJSONString(a)
		}
	}
	if c.ParentID != "" {
		n += len(`,"parent_id":""`) + len(c.ParentID)
	}
	if !plain {
		return json.Marshal(c)
	}
	out := make([]byte, 0, n)
	out = append(out, `{"account":"`...)
	out = append(out, c.Account...)
	out = append(out, `","body":"`...)
	out = append(out, c.Body...)
	out = append(out, '"')
	if len(c.Assets) > 0 {
		out = append(out, `,"assets":[`...)
		for i, a := range c.Assets {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, '"')
			out = append(out, a...)
			out = append(out, '"')
		}
		out = append(out, ']')
	}
	if c.ParentID != "" {
		out = append(out, `,"parent_id":"`...)
		out = append(out, c.ParentID...)
		out = append(out, '"')
	}
	return append(out, '}'), nil
}
