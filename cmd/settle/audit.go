package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/consumers/audit"
	"github.com/settle-dev/settle/node"
)

// auditFlags are settle audit's options.
type auditFlags struct {
	natsURL, data, stream, intent, projection, views, highWater string
	asJSON, quiet                                               bool
	grace, stuckAfter                                           time.Duration
	every                                                       uint64
}

func (f *auditFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.natsURL, "nats-url", "", "audit the stream on the NATS server at `URL`")
	fs.StringVar(&f.data, "data", "", "audit the data `DIR` of a stopped settle serve (the same --data; refused while a process holds it)")
	fs.StringVar(&f.stream, "stream", "SETTLE_INTENTS", "the intents `stream`")
	fs.StringVar(&f.intent, "intent", "", "print the timeline of intent `ID`")
	fs.BoolVar(&f.asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&f.projection, "projection", "", "compare the projection in the SQLite file `DB` with the log")
	fs.BoolVar(&f.quiet, "quiet", false, "print violations only: no progress, no summary")
	fs.DurationVar(&f.grace, "grace", 5*time.Minute, "allowance past attempt deadlines and leases before an intent is stuck")
	fs.DurationVar(&f.stuckAfter, "stuck-after", time.Hour, "an unknown or in_progress intent whose next check is older than this is stuck")
	fs.Uint64Var(&f.every, "progress-every", 10000, "print progress to stderr every `N` events")
	fs.StringVar(&f.views, "views", "", "name the events the log lost from the views `DB` (default with --data: DIR/views.db)")
	fs.StringVar(&f.highWater, "high-water", "", "compare the stream with the high-water mark `FILE` (default with --data: DIR/highwater.json)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: settle audit (--data DIR | --nats-url URL) [flags]\n\n"+
			"Replays the whole intents stream, folds every intent and checks the invariants the log\n"+
			"can prove. Exits non-zero when a violation is found. --data is the directory given to\n"+
			"settle serve --data, after that process stopped (a live one holds its lock: audit it\n"+
			"with --nats-url, e.g. serve --nats-listen).\n\n")
		fs.PrintDefaults()
	}
}

// audit replays the log and checks its invariants (audit.Audit). It
// returns an error, so the process exits non-zero, when the audit finds a
// violation or cannot run.
func (m *Main) audit(ctx context.Context, args []string) error {
	var f auditFlags
	fs, err := m.flags("audit", "(--data DIR | --nats-url URL)", f.register, args)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 || (f.natsURL == "") == (f.data == "") {
		fmt.Fprintln(m.Stderr, "settle audit: give exactly one of --data DIR or --nats-url URL")
		fs.Usage()
		return errUsage
	}
	var lockDir, storeDir string
	if f.data != "" {
		// The same directory serve uses; the lock refuses a live one (an
		// embedded server of our own on a store another server writes
		// would misread it).
		if lockDir, storeDir, err = node.AuditStoreDir(f.data); err != nil {
			return errors.Errorf("audit: %w", err)
		}
		f.views = cmp.Or(f.views, filepath.Join(lockDir, node.ViewsFile))
		f.highWater = cmp.Or(f.highWater, filepath.Join(lockDir, node.HighWaterFile))
	}
	off, err := node.OpenOffline(lockDir, storeDir, f.natsURL, "settle audit",
		slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return errors.Errorf("audit: %w", err)
	}
	defer off.Close()
	cfg := audit.AuditConfig{Stream: f.stream, Intent: f.intent, Grace: f.grace, StuckAfter: f.stuckAfter, ProgressEvery: f.every}
	closeRecords, err := off.AuditRecords(ctx, &cfg, f.views, f.highWater, f.projection, m.Stderr)
	if err != nil {
		return errors.Errorf("audit: %w", err)
	}
	defer closeRecords()
	if !f.quiet {
		cfg.Progress = func(done, total uint64) {
			if total >= f.every { // a short log needs no progress report
				fmt.Fprintf(m.Stderr, "audit: %d/%d events\n", done, total)
			}
		}
	}
	rep, err := audit.Audit(ctx, off.JS, cfg)
	if err != nil {
		return err
	}
	if f.data != "" { // one process writes an embedded store: a second one is named
		if err := off.AuditWriters(ctx, rep, f.views, f.highWater); err != nil {
			return errors.Errorf("audit: %w", err)
		}
	}
	return m.auditResult(&f, rep)
}

// auditResult prints the report as asked and fails on a violation.
func (m *Main) auditResult(f *auditFlags, rep *audit.AuditReport) error {
	switch {
	case f.asJSON:
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			OK bool `json:"ok"`
			*audit.AuditReport
		}{rep.OK(), rep}); err != nil {
			return errors.Errorf("audit: %w", err)
		}
	case f.quiet:
		for _, v := range rep.Violations {
			fmt.Fprintln(m.Stdout, v.String())
		}
	default:
		rep.WriteText(m.Stdout)
	}
	if f.intent != "" && len(rep.Timeline) == 0 {
		return errors.Errorf("audit: intent %s has no event in stream %s", f.intent, rep.Stream)
	}
	if !rep.OK() {
		return errors.Errorf("audit: %d violation(s) in stream %s", len(rep.Violations), rep.Stream)
	}
	return nil
}
