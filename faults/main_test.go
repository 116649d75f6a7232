package faults

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/settle-dev/settle/testharness"
)

var (
	full   = flag.Bool("faults.full", false, "run the whole fault suite (several seeds, more intents) instead of one short scenario of each kind")
	report = flag.String("faults.report", "", "write the results table (markdown) to this `file`")
	seed0  = flag.Int64("faults.seed", 1, "first seed")
)

func TestMain(m *testing.M) {
	runHelper()
	flag.Parse()
	code := m.Run()
	if *report != "" {
		if err := writeReport(*report); err != nil {
			fmt.Fprintln(os.Stderr, "faults report:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	testharness.RemoveBinaries()
	os.Exit(code)
}
