package events

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cockroachdb/errors"

	"golang.org/x/text/unicode/norm"
)

// CanonV1 names the canonical payload form implemented by Canonicalize.
//
// canon/v1 is RFC 8785 (JCS) with two additions applied to every string,
// keys and values alike, before anything else: line endings are normalised
// ("\r\n" and a lone "\r" become "\n") and the result is put in Unicode NFC.
// Input that cannot be canonicalised without guessing is refused: invalid
// JSON or UTF-8, trailing data, duplicate keys (including keys that only
// collide after normalisation), lone surrogate escapes, integer literals
// beyond ±2^53 (unless already in canonical form, see number), numbers that
// overflow float64, nesting deeper than canonMaxDepth, and documents whose
// input or canonical form is larger than canonMaxBytes.
const CanonV1 = "canon/v1"

// Limits of canon/v1.
const (
	// canonMaxBytes is the largest input Canonicalize accepts (1 MiB).
	canonMaxBytes = 1 << 20
	// canonMaxDepth is the deepest nesting of arrays and objects accepted;
	// the top-level container is depth 1.
	canonMaxDepth = 64
)

// canonMaxSafeInt is 2^53 in decimal: the largest magnitude an integer
// literal may have. Above it, distinct integers share a float64 and the
// canonical form would silently change the value.
const canonMaxSafeInt = "9007199254740992"

// ErrNotCanonicalizable matches (errors.Is) every error returned by
// Canonicalize and PayloadSHA256.
var ErrNotCanonicalizable = errors.New("canon/v1: not canonicalizable")

// CanonError reports why a document cannot be canonicalised. Path is a JSON
// path such as `$.assets[2]` or `$["a b"]`; Reason says what is wrong.
type CanonError struct {
	Path   string
	Reason string
}

func (e *CanonError) Error() string { return CanonV1 + ": " + e.Path + ": " + e.Reason }

// Is makes every CanonError match ErrNotCanonicalizable.
func (e *CanonError) Is(target error) bool { return target == ErrNotCanonicalizable }

// Canonicalize returns the canon/v1 form of a JSON document. The top-level
// value may be any JSON value. Errors are always *CanonError.
func Canonicalize(raw []byte) ([]byte, error) {
	if len(raw) > canonMaxBytes {
		return nil, &CanonError{Path: "$", Reason: fmt.Sprintf("input is %d bytes, the limit is %d", len(raw), canonMaxBytes)}
	}
	p := &canonParser{data: raw}
	p.path = p.pathBuf[:0]
	p.skipWS()
	out, err := p.value(nil)
	if err != nil {
		return nil, err
	}
	p.skipWS()
	if p.pos < len(p.data) {
		return nil, p.fail(fmt.Sprintf("trailing data after the JSON document at offset %d", p.pos))
	}
	// The canonical form can be longer than the input (NFC expansion, "1e20"
	// becoming 21 digits). Capping it as well keeps Canonicalize total on its
	// own output.
	if len(out) > canonMaxBytes {
		return nil, &CanonError{Path: "$", Reason: fmt.Sprintf("canonical form is %d bytes, the limit is %d", len(out), canonMaxBytes)}
	}
	return out, nil
}

// PayloadSHA256 returns the lowercase hex sha256 of Canonicalize(raw).
func PayloadSHA256(raw []byte) (string, error) {
	c, err := Canonicalize(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// canonSeg is one step of a JSON path: an object key or an array index.
type canonSeg struct {
	key   string
	index int
	isKey bool
}

type canonParser struct {
	data    []byte
	pos     int
	depth   int
	path    []canonSeg
	pathBuf [8]canonSeg // path's first backing array
}

func (p *canonParser) pathString() string {
	var b strings.Builder
	b.WriteByte('$')
	for _, s := range p.path {
		switch {
		case !s.isKey:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		case canonIsIdent(s.key):
			b.WriteString("." + s.key)
		default:
			b.WriteString("[" + strconv.Quote(s.key) + "]")
		}
	}
	return b.String()
}

func canonIsIdent(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9')) {
			return false
		}
	}
	return s != ""
}

func (p *canonParser) fail(reason string) *CanonError {
	return &CanonError{Path: p.pathString(), Reason: reason}
}

// unexpected reports a syntax error at the current position.
func (p *canonParser) unexpected(want string) *CanonError {
	if p.pos >= len(p.data) {
		return p.fail("invalid JSON: unexpected end of input, expected " + want)
	}
	return p.fail(fmt.Sprintf("invalid JSON: unexpected %s at offset %d, expected %s", canonQuoteByte(p.data[p.pos]), p.pos, want))
}

func canonQuoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *canonParser) skipWS() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses one JSON value at p.pos (whitespace already skipped) and
// appends its canonical form to dst.
func (p *canonParser) value(dst []byte) ([]byte, error) {
	if p.pos >= len(p.data) {
		return nil, p.unexpected("a JSON value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(dst)
	case c == '[':
		return p.array(dst)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return canonAppendString(dst, canonNormalize(s)), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number(dst)
	case c == 't':
		return p.literal(dst, "true")
	case c == 'f':
		return p.literal(dst, "false")
	case c == 'n':
		return p.literal(dst, "null")
	default:
		return nil, p.unexpected("a JSON value")
	}
}

func (p *canonParser) literal(dst []byte, lit string) ([]byte, error) {
	if len(p.data)-p.pos < len(lit) || string(p.data[p.pos:p.pos+len(lit)]) != lit {
		return nil, p.fail(fmt.Sprintf("invalid JSON: bad literal at offset %d, expected %s", p.pos, lit))
	}
	p.pos += len(lit)
	return append(dst, lit...), nil
}

func (p *canonParser) enter() error {
	p.depth++
	if p.depth > canonMaxDepth {
		return p.fail(fmt.Sprintf("nesting is deeper than %d levels", canonMaxDepth))
	}
	return nil
}

func (p *canonParser) array(dst []byte) ([]byte, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '['
	dst = append(dst, '[')
	p.skipWS()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return append(dst, ']'), nil
	}
	for i := 0; ; i++ {
		if i > 0 {
			dst = append(dst, ',')
		}
		p.path = append(p.path, canonSeg{index: i})
		p.skipWS()
		var err error
		dst, err = p.value(dst)
		if err != nil {
			return nil, err
		}
		p.skipWS()
		if p.pos >= len(p.data) {
			return nil, p.unexpected("',' or ']'")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.path = p.path[:len(p.path)-1]
		case ']':
			p.pos++
			p.path = p.path[:len(p.path)-1]
			p.depth--
			return append(dst, ']'), nil
		default:
			return nil, p.unexpected("',' or ']'")
		}
	}
}

type canonMember struct {
	key        string
	decoded    string   // the key as decoded, before normalisation
	key16      []uint16 // the key's UTF-16 code units; nil when it is ASCII
	start, end int      // the value's canonical form in the object's buffer
}

// canonCompareKeys orders keys by their UTF-16 code units (RFC 8785
// §3.2.3). For ASCII keys those are the bytes.
func canonCompareKeys(a, b *canonMember) int {
	if a.key16 == nil && b.key16 == nil {
		return strings.Compare(a.key, b.key)
	}
	ka, kb := a.key16, b.key16
	if ka == nil {
		ka = utf16.Encode([]rune(a.key))
	}
	if kb == nil {
		kb = utf16.Encode([]rune(b.key))
	}
	return slices.Compare(ka, kb)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func (p *canonParser) object(dst []byte) ([]byte, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // '{'
	p.skipWS()
	var (
		mbuf    [8]canonMember
		members = mbuf[:0]
		values  []byte            // the members' canonical values, one after another
		seen    map[string]string // normalised key -> key as decoded, past 8 members
	)
	if p.depth == 1 {
		// At the top, the values are about as long as the input.
		values = make([]byte, 0, len(p.data)-p.pos)
	}
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
	} else {
		for {
			p.skipWS()
			if p.pos >= len(p.data) || p.data[p.pos] != '"' {
				return nil, p.unexpected("an object key string")
			}
			decoded, err := p.str()
			if err != nil {
				return nil, err
			}
			key := canonNormalize(decoded)
			p.path = append(p.path, canonSeg{key: key, isKey: true})
			if seen, err = p.checkKey(members, seen, key, decoded); err != nil {
				return nil, err
			}
			p.skipWS()
			if p.pos >= len(p.data) || p.data[p.pos] != ':' {
				return nil, p.unexpected("':'")
			}
			p.pos++
			p.skipWS()
			start := len(values)
			values, err = p.value(values)
			if err != nil {
				return nil, err
			}
			m := canonMember{key: key, decoded: decoded, start: start, end: len(values)}
			if !isASCII(key) {
				m.key16 = utf16.Encode([]rune(key))
			}
			members = append(members, m)
			p.skipWS()
			if p.pos >= len(p.data) {
				return nil, p.unexpected("',' or '}'")
			}
			c := p.data[p.pos]
			if c != ',' && c != '}' {
				return nil, p.unexpected("',' or '}'")
			}
			p.pos++
			p.path = p.path[:len(p.path)-1]
			if c == '}' {
				break
			}
		}
	}
	p.depth--
	return canonAppendObject(dst, members, values), nil
}

// canonAppendObject appends the object of members, whose values are in
// values, sorted by the UTF-16 code units of the (normalised) keys (RFC
// 8785 §3.2.3).
func canonAppendObject(dst []byte, members []canonMember, values []byte) []byte {
	slices.SortFunc(members, func(a, b canonMember) int { return canonCompareKeys(&a, &b) })
	need := len(values) + 2
	for i := range members {
		need += len(members[i].key) + 4
	}
	dst = slices.Grow(dst, need)
	dst = append(dst, '{')
	for i, m := range members {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = canonAppendString(dst, m.key)
		dst = append(dst, ':')
		dst = append(dst, values[m.start:m.end]...)
	}
	return append(dst, '}')
}

// checkKey refuses a key that an earlier member has (after
// normalisation). Past 8 members the keys are looked up in seen, which
// it creates and returns.
func (p *canonParser) checkKey(members []canonMember, seen map[string]string, key, decoded string) (map[string]string, error) {
	prev, dup := "", false
	if seen != nil {
		prev, dup = seen[key]
	} else {
		for i := range members {
			if members[i].key == key {
				prev, dup = members[i].decoded, true
				break
			}
		}
	}
	if dup {
		if prev == decoded {
			return nil, p.fail(fmt.Sprintf("duplicate object key %q", key))
		}
		return nil, p.fail(fmt.Sprintf("duplicate object key %q: it collides with an earlier key after newline/NFC normalisation", key))
	}
	if seen == nil && len(members) >= 8 {
		seen = make(map[string]string, 2*len(members))
		for i := range members {
			seen[members[i].key] = members[i].decoded
		}
	}
	if seen != nil {
		seen[key] = decoded
	}
	return seen, nil
}

// str parses a JSON string at p.pos and returns it decoded (escapes resolved,
// not yet normalised).
func (p *canonParser) str() (string, error) {
	start := p.pos
	p.pos++ // opening quote
	var buf []byte
	for {
		// Copy the run of plain bytes.
		runStart := p.pos
		for p.pos < len(p.data) {
			c := p.data[p.pos]
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			p.pos++
		}
		run := p.data[runStart:p.pos]
		if !utf8.Valid(run) {
			off := runStart
			for len(run) > 0 {
				r, size := utf8.DecodeRune(run)
				if r == utf8.RuneError && size <= 1 {
					break
				}
				run = run[size:]
				off += size
			}
			return "", p.fail(fmt.Sprintf("invalid UTF-8 in string at offset %d", off))
		}
		if p.pos >= len(p.data) {
			return "", p.fail(fmt.Sprintf("invalid JSON: unterminated string starting at offset %d", start))
		}
		c := p.data[p.pos]
		if c == '"' && buf == nil {
			p.pos++
			return string(run), nil // no escape: one copy
		}
		buf = append(buf, run...)
		switch {
		case c == '"':
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.fail(fmt.Sprintf("invalid JSON: unescaped control character 0x%02x in string at offset %d", c, p.pos))
		}
		// Escape.
		var err error
		if buf, err = p.escape(buf, start); err != nil {
			return "", err
		}
	}
}

// escape appends what the escape at p.pos (a backslash) stands for to
// buf; start is where the string began.
func (p *canonParser) escape(buf []byte, start int) ([]byte, error) {
	escAt := p.pos
	p.pos++
	if p.pos >= len(p.data) {
		return nil, p.fail(fmt.Sprintf("invalid JSON: unterminated string starting at offset %d", start))
	}
	e := p.data[p.pos]
	p.pos++
	switch {
	case jcsUnescape[e] != 0:
		buf = append(buf, jcsUnescape[e])
	case e == 'u':
		r, ok := p.hex4()
		if !ok {
			return nil, p.fail(fmt.Sprintf("invalid JSON: bad \\u escape at offset %d", escAt))
		}
		if utf16.IsSurrogate(r) {
			if r >= 0xdc00 {
				return nil, p.fail(fmt.Sprintf("lone low surrogate \\u%04x at offset %d is not valid Unicode", r, escAt))
			}
			lo := rune(-1)
			if p.pos+1 < len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
				save := p.pos
				p.pos += 2
				if l, ok := p.hex4(); ok && l >= 0xdc00 && l <= 0xdfff {
					lo = l
				} else {
					p.pos = save
				}
			}
			if lo < 0 {
				return nil, p.fail(fmt.Sprintf("lone high surrogate \\u%04x at offset %d is not valid Unicode", r, escAt))
			}
			r = utf16.DecodeRune(r, lo)
		}
		buf = utf8.AppendRune(buf, r)
	default:
		return nil, p.fail(fmt.Sprintf("invalid JSON: bad escape %s at offset %d", canonQuoteByte(e), escAt))
	}
	return buf, nil
}

func (p *canonParser) hex4() (rune, bool) {
	if len(p.data)-p.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	p.pos += 4
	return r, true
}

// canonNormalize turns "\r\n" and lone "\r" into "\n", then applies NFC.
// NFC is x/text's, which follows the Unicode Stream-Safe Text Format: a run
// of more than 30 non-starters gets U+034F inserted. Other NFC
// implementations may differ on such (pathological) strings only.
func canonNormalize(s string) string {
	if strings.IndexByte(s, '\r') >= 0 {
		s = strings.ReplaceAll(s, "\r\n", "\n")
		s = strings.ReplaceAll(s, "\r", "\n")
	}
	return norm.NFC.String(s)
}

// jcsShortEscape is the two-character escape of each byte that has one;
// jcsUnescape what each such escape (and "\/") stands for.
var (
	jcsShortEscape = [256]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}
	jcsUnescape    = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}
)

// canonAppendString appends s as a JCS string literal (RFC 8785 §3.2.2.2).
func canonAppendString(dst []byte, s string) []byte {
	const hexdigits = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		if e := jcsShortEscape[c]; e != 0 {
			dst = append(dst, '\\', e)
		} else {
			dst = append(dst, '\\', 'u', '0', '0', hexdigits[c>>4], hexdigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// number parses a JSON number and appends its ECMAScript rendering.
func (p *canonParser) number(dst []byte) ([]byte, error) {
	start := p.pos
	d := p.data
	if d[p.pos] == '-' {
		p.pos++
	}
	intStart := p.pos
	switch {
	case p.pos < len(d) && d[p.pos] == '0':
		p.pos++
		if p.pos < len(d) && d[p.pos] >= '0' && d[p.pos] <= '9' {
			return nil, p.fail(fmt.Sprintf("invalid JSON: number with a leading zero at offset %d", start))
		}
	case p.pos < len(d) && d[p.pos] >= '1' && d[p.pos] <= '9':
		p.digits()
	default:
		return nil, p.fail(fmt.Sprintf("invalid JSON: malformed number at offset %d", start))
	}
	intDigits := d[intStart:p.pos]
	isInt := true
	if p.pos < len(d) && d[p.pos] == '.' {
		isInt = false
		p.pos++
		if p.digits() == 0 {
			return nil, p.fail(fmt.Sprintf("invalid JSON: malformed number at offset %d: no digits after '.'", start))
		}
	}
	if p.pos < len(d) && (d[p.pos] == 'e' || d[p.pos] == 'E') {
		isInt = false
		p.pos++
		if p.pos < len(d) && (d[p.pos] == '+' || d[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return nil, p.fail(fmt.Sprintf("invalid JSON: malformed number at offset %d: no digits in exponent", start))
		}
	}
	lit := d[start:p.pos]
	bigInt := isInt && (len(intDigits) > len(canonMaxSafeInt) ||
		(len(intDigits) == len(canonMaxSafeInt) && string(intDigits) > canonMaxSafeInt))
	// ECMAScript never prints more than 21 integer digits, so a longer integer
	// literal cannot be canonical; refuse it without parsing.
	if bigInt && len(intDigits) > 21 {
		return nil, p.fail(canonBigIntReason(lit))
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		// The grammar was checked above, so this is ErrRange: overflow to ±Inf.
		// (Underflow is not an error: it rounds to zero, as in ECMAScript.)
		return nil, p.fail(fmt.Sprintf("number %s overflows float64", canonClip(lit)))
	}
	n := len(dst)
	dst = canonAppendNumber(dst, f)
	// An integer literal beyond 2^53 is refused when canonicalisation would
	// change its digits, i.e. when it does not survive the float64 round trip
	// as written (9007199254740993 would become ...992). The one exception to
	// "refuse every integer beyond 2^53" is a literal that is already in
	// canonical form: canon/v1 itself emits those (1e20 is written
	// 100000000000000000000), and refusing them would make Canonicalize
	// reject its own output.
	if bigInt && string(dst[n:]) != string(lit) {
		return nil, p.fail(canonBigIntReason(lit))
	}
	return dst, nil
}

// digits reads a run of decimal digits and returns its length.
func (p *canonParser) digits() int {
	start := p.pos
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
	}
	return p.pos - start
}

func canonBigIntReason(lit []byte) string {
	return fmt.Sprintf("integer %s exceeds 2^53 and would lose precision as a JSON number; send it as a string", canonClip(lit))
}

func canonClip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// canonAppendNumber appends f formatted like ECMAScript
// Number.prototype.toString (ECMA-262 Number::toString, radix 10), which is
// what RFC 8785 §3.2.2.3 requires. f must be finite.
func canonAppendNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // also -0
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	// Shortest round-trip digits: "d.ddddde±XX" or "de±XX".
	e := strconv.FormatFloat(f, 'e', -1, 64)
	ePos := strings.IndexByte(e, 'e')
	mant, expStr := e[:ePos], e[ePos+1:]
	exp, _ := strconv.Atoi(expStr) // strconv always writes a valid exponent
	digits := strings.Replace(mant, ".", "", 1)
	const zeros = "000000000000000000000" // the most either padding below needs
	k := len(digits)
	n := exp + 1 // value = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		dst = append(dst, zeros[:n-k]...)
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		dst = append(dst, zeros[:-n]...)
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}
