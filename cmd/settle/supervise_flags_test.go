package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// serve's fault flags are checked before anything starts, each error
// naming its flag and why.
func TestFaultFlagsValidate(t *testing.T) {
	for args, want := range map[string]string{
		"":                            "",
		"--lease 5s":                  "",
		"--lease 500ms":               "--lease: 500ms must be at least 1s",
		"--lease -1s":                 "--lease: -1s must be at least 1s",
		"--min-free-mb 0":             "--min-free-mb: 0 must be ≥ 1",
		"--max-clock-offset -1s":      "--max-clock-offset: -1s is negative",
		"--max-inflight 0":            "--max-inflight: 0 must be ≥ 1",
		"--max-inflight 4 --lease 2m": "",
	} {
		var f faultFlags
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.register(fs)
		if err := fs.Parse(strings.Fields(args)); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		err := f.validate()
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: %v", args, err)
		case want != "" && (err == nil || err.Error() != want):
			t.Errorf("%q: got %v, want %q", args, err, want)
		}
	}
}
