package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/settle-dev/settle/testharness"
)

func TestDemoEndToEnd(t *testing.T) {
	testharness.SkipShort(t, "an embedded nats-server")
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb}
	if err := m.Run(context.Background(), []string{"demo", "--keep", t.TempDir()}); err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out.String(), errb.String())
	}
	s := out.String()
	for _, want := range []string{"OutcomeUnknown", "state: unknown", "CandidateFound", "ReadbackPassed", "state: confirmed",
		"check url", "check visibility", "1 POST request(s), 1 effect(s)"} {
		if !strings.Contains(s, want) {
			t.Errorf("demo output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "FAIL") {
		t.Errorf("a check failed:\n%s", s)
	}
}

func TestUnknownCommandIsUsageError(t *testing.T) {
	var out, errb bytes.Buffer
	m := &Main{Stdout: &out, Stderr: &errb}
	if err := m.Run(context.Background(), []string{"frobnicate"}); err != errUsage {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(errb.String(), `unknown command "frobnicate"`) {
		t.Fatalf("stderr: %s", errb.String())
	}
}
