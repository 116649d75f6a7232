package contentcoding

import (
	"net/http"
	"strings"
	"testing"
)

func TestRefused(t *testing.T) {
	for _, c := range []struct {
		values []string
		want   string
	}{
		{nil, ""},
		{[]string{"identity"}, ""},
		{[]string{" Identity , "}, ""},
		{[]string{"gzip"}, "gzip"},
		{[]string{"identity, br"}, "br"},
		{[]string{"identity", "GZIP"}, "GZIP"},
		{[]string{strings.Repeat("x", 100)}, strings.Repeat("x", 32) + "…"},
	} {
		h := http.Header{}
		for _, v := range c.values {
			h.Add("Content-Encoding", v)
		}
		if got := Refused(h); got != c.want {
			t.Errorf("%q: %q, want %q", c.values, got, c.want)
		}
	}
}
