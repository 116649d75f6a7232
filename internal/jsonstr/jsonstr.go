package jsonstr

import (
	"strconv"
	"unicode/utf8"
)

// ValidUnicode reports whether the JSON text raw (already known to be
// valid JSON) holds only valid Unicode: valid UTF-8, and every \u escape
// of a surrogate one half of a high-low pair.
func ValidUnicode(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++ // the escaped character: \", \\, \/, \b ... or u
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw, i+1)
		if !ok {
			return false
		}
		i += 4
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return false // a low surrogate without its high one
		case r >= 0xd800 && r <= 0xdbff:
			if i+2 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return false
			}
			lo, ok := hex4(raw, i+3)
			if !ok || lo < 0xdc00 || lo > 0xdfff {
				return false
			}
			i += 6
		}
	}
	return true
}

// hex4 reads the four hex digits of a \u escape at raw[at:].
func hex4(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(raw[at:at+4]), 16, 32)
	return rune(v), err == nil
}
