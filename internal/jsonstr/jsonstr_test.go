package jsonstr

import "testing"

func TestValidUnicode(t *testing.T) {
	for raw, want := range map[string]bool{
		`"plain"`:            true,
		`"é and \u00e9"`:     true,
		`"\ud83d\ude00"`:     true, // a pair
		`"\uD83D\uDE00"`:     true,
		`"\\ud800"`:          true, // an escaped backslash, then text
		`"\ufffd"`:           true, // U+FFFD itself is a character
		"\"\xef\xbf\xbd\"":   true,
		`{"a":["\u0041",1]}`: true,
		"\"r\xff\"":          false,
		"\"\xc3\"":           false,
		`"r\ud800"`:          false,
		`"r\ud800x"`:         false,
		`"r\ud800\u0041"`:    false,
		`"r\udc00"`:          false,
		`"\ude00\ud83d"`:     false,
		`{"k\udbff":1}`:      false,
		`"\\\ud800"`:         false, // an escaped backslash, then a lone surrogate
	} {
		if got := ValidUnicode([]byte(raw)); got != want {
			t.Errorf("%s: %v, want %v", raw, got, want)
		}
	}
}
