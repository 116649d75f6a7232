package adapter_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

func TestFieldPath(t *testing.T) {
	long := strings.Repeat("k", 70)
	for _, c := range []struct{ key, want string }{
		{"body", "payload.body"},
		{"_a1", "payload._a1"},
		{"a_B9", "payload.a_B9"},
		{"1a", `payload["1a"]`},
		{"x y", `payload["x y"]`},
		{"", `payload[""]`},
		{"é", `payload["é"]`},
		{long, `payload["` + strings.Repeat("k", 64) + `..."]`},
	} {
		if got := adapter.FieldPath("payload", c.key); got != c.want {
			t.Errorf("FieldPath(%q) = %q, want %q", c.key, got, c.want)
		}
	}
	// A cut never splits a UTF-8 sequence.
	if got := adapter.FieldPath("p", strings.Repeat("a", 63)+"éé"); got != `p["`+strings.Repeat("a", 63)+`..."]` {
		t.Errorf("cut key: %q", got)
	}
}

func TestIsSHA256Hex(t *testing.T) {
	ok := strings.Repeat("0123456789abcdef", 4)
	for in, want := range map[string]bool{
		ok:                            true,
		strings.ToUpper(ok):           false,
		ok[:63]:                       false,
		ok + "0":                      false,
		ok[:63] + "g":                 false,
		"":                            false,
		strings.Repeat("f", 64):       true,
		strings.Repeat(" ", 64):       false,
		strings.Repeat("a", 63) + "/": false,
	} {
		if got := adapter.IsSHA256Hex(in); got != want {
			t.Errorf("IsSHA256Hex(%q) = %v, want %v", in, got, want)
		}
	}
}

func fieldError(t *testing.T, err error) *events.FieldError {
	t.Helper()
	var fe *events.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("not a *events.FieldError: %#v", err)
	}
	return fe
}

func TestCanonicalizePayload(t *testing.T) {
	for _, c := range []struct{ in, field, reason string }{
		{"", "payload", "is required"},
		{" \n\t", "payload", "is required"},
		{`{"a":1,"a":2}`, "payload.a", `duplicate object key "a"`},
		{`{"a":[1,{"b":1e400}]}`, "payload.a[1].b", "number 1e400 overflows float64"},
		{`{`, "payload", "invalid JSON: unexpected end of input, expected an object key string"},
	} {
		out, err := adapter.CanonicalizePayload([]byte(c.in))
		if out != nil {
			t.Errorf("%q: output %s with an error", c.in, out)
		}
		fe := fieldError(t, err)
		if fe.Field != c.field || fe.Reason != c.reason {
			t.Errorf("%q: got %s: %s, want %s: %s", c.in, fe.Field, fe.Reason, c.field, c.reason)
		}
	}
	out, err := adapter.CanonicalizePayload([]byte(` {"b": 1, "a": [true]} `))
	if err != nil || string(out) != `{"a":[true],"b":1}` {
		t.Fatalf("got %s, %v", out, err)
	}
	// Any JSON value is canonical; being an object is ObjectMembers' check.
	if out, err := adapter.CanonicalizePayload([]byte(`[1]`)); err != nil || string(out) != `[1]` {
		t.Fatalf("array: %s, %v", out, err)
	}
}

func TestObjectMembers(t *testing.T) {
	for _, c := range []struct{ in, field, reason string }{
		{``, "payload.x", "must be a JSON object"},
		{`[1]`, "payload.x", "must be a JSON object"},
		{`"s"`, "payload.x", "must be a JSON object"},
		{`{"a":`, "payload.x", "must be a JSON object"},
		{`{"b":1,"zz":1,"x y":2,"a":3}`, `payload.x["x y"]`, "is not a known field (known: b, a)"},
		{`{"b":1,"zz":1,"c":2}`, "payload.x.c", "is not a known field (known: b, a)"},
	} {
		m, err := adapter.ObjectMembers([]byte(c.in), "payload.x", "b", "a")
		if m != nil {
			t.Errorf("%q: members with an error", c.in)
		}
		fe := fieldError(t, err)
		if fe.Field != c.field || fe.Reason != c.reason {
			t.Errorf("%q: got %s: %s, want %s: %s", c.in, fe.Field, fe.Reason, c.field, c.reason)
		}
	}
	m, err := adapter.ObjectMembers([]byte(`{"a":[1],"b":null}`), "payload", "b", "a")
	if err != nil || len(m) != 2 || string(m["a"]) != "[1]" || string(m["b"]) != "null" {
		t.Fatalf("got %v, %v", m, err)
	}
	if _, err := adapter.ObjectMembers([]byte(`{"a":1}`), "payload"); fieldError(t, err).Reason != "is not a known field (known: )" {
		t.Fatalf("no known members: %v", err)
	}
}
