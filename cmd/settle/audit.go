package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/consumers/audit"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/projector"
)

// audit replays the log and checks its invariants (audit.Audit). It
// returns an error, so the process exits non-zero, when the audit finds a
// violation or cannot run.
func (m *Main) audit(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	natsURL := fs.String("nats-url", "", "audit the stream on the NATS server at `URL`")
	data := fs.String("data", "", "audit the data `DIR` of a stopped settle serve (the same --data; refused while a process holds it)")
	stream := fs.String("stream", "SETTLE_INTENTS", "the intents `stream`")
	intent := fs.String("intent", "", "print the timeline of intent `ID`")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	projection := fs.String("projection", "", "compare the projection in the SQLite file `DB` with the log")
	quiet := fs.Bool("quiet", false, "print violations only: no progress, no summary")
	grace := fs.Duration("grace", 5*time.Minute, "allowance past attempt deadlines and leases before an intent is stuck")
	stuckAfter := fs.Duration("stuck-after", time.Hour, "an unknown or in_progress intent whose next check is older than this is stuck")
	every := fs.Uint64("progress-every", 10000, "print progress to stderr every `N` events")
	views := fs.String("views", "", "name the events the log lost from the views `DB` (default with --data: DIR/views.db)")
	highWater := fs.String("high-water", "", "compare the stream with the high-water mark `FILE` (default with --data: DIR/highwater.json)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: settle audit (--data DIR | --nats-url URL) [flags]\n\n"+
			"Replays the whole intents stream, folds every intent and checks the invariants the log\n"+
			"can prove. Exits non-zero when a violation is found. --data is the directory given to\n"+
			"settle serve --data, after that process stopped (a live one holds its lock: audit it\n"+
			"with --nats-url, e.g. serve --nats-listen).\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() > 0 || (*natsURL == "") == (*data == "") {
		fmt.Fprintln(m.Stderr, "settle audit: give exactly one of --data DIR or --nats-url URL")
		fs.Usage()
		return errUsage
	}

	var nc *nats.Conn
	if *data != "" {
		// The same directory serve uses; the lock refuses a live one (an
		// embedded server of our own on a store another server writes
		// would misread it).
		lockDir, storeDir, err := auditStoreDir(*data)
		if err != nil {
			return errors.Errorf("audit: %w", err)
		}
		if *views == "" {
			*views = filepath.Join(lockDir, viewsFile)
		}
		if *highWater == "" {
			*highWater = filepath.Join(lockDir, highWaterFile)
		}
		dd, err := lockDataDir(lockDir, "settle audit", false)
		if err != nil {
			return errors.Errorf("audit: %w", err)
		}
		defer dd.Unlock()
		if !isDir(storeDir) {
			return errors.Errorf("audit: --data %s: no JetStream store at %s", *data, storeDir)
		}
		srv, err := embedded.Start(embedded.Config{Dir: storeDir, Durability: embedded.SyncAlways, Port: -1,
			Logger: slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			return errors.Errorf("audit: %w", err)
		}
		defer srv.Stop()
		if nc, err = srv.Connect(nats.Name("settle-audit")); err != nil {
			return errors.Errorf("audit: connect: %w", err)
		}
	} else {
		var err error
		if nc, err = nats.Connect(*natsURL, nats.Name("settle-audit")); err != nil {
			return errors.Errorf("audit: connect %s: %w", redactURL(*natsURL), err)
		}
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return errors.Errorf("audit: %w", err)
	}

	cfg := audit.AuditConfig{Stream: *stream, Intent: *intent, Grace: *grace, StuckAfter: *stuckAfter, ProgressEvery: *every}
	if err := auditRecords(ctx, &cfg, *views, *highWater, m.Stderr); err != nil { // audit_loss.go (here)
		return err
	}
	if c, ok := cfg.Known.(io.Closer); ok {
		defer c.Close()
	}
	if *projection != "" {
		if _, err := os.Stat(*projection); err != nil {
			return errors.Errorf("audit: --projection: %w", err)
		}
		p, err := projector.Open(ctx, js, projector.Config{Stream: *stream, DBPath: *projection,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		switch {
		case errors.Is(err, projector.ErrStreamMismatch):
			// The stream is not what the views projected (shorter, or
			// another): the loss checks say what is gone.
			fmt.Fprintf(m.Stderr, "audit: the projection is not compared: %v\n", err)
		case err != nil:
			return errors.Errorf("audit: %w", err)
		default:
			defer p.Close()
			cfg.Projection = p
		}
	}
	if !*quiet {
		cfg.Progress = func(done, total uint64) {
			if total < *every {
				return // a short log needs no progress report
			}
			fmt.Fprintf(m.Stderr, "audit: %d/%d events\n", done, total)
		}
	}
	rep, err := audit.Audit(ctx, js, cfg)
	if err != nil {
		return err
	}

	switch {
	case *asJSON:
		enc := json.NewEncoder(m.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			OK bool `json:"ok"`
			*audit.AuditReport
		}{rep.OK(), rep}); err != nil {
			return errors.Errorf("audit: %w", err)
		}
	case *quiet:
		for _, v := range rep.Violations {
			fmt.Fprintln(m.Stdout, v.String())
		}
	default:
		printAudit(m.Stdout, rep)
	}
	if *intent != "" && len(rep.Timeline) == 0 {
		return errors.Errorf("audit: intent %s has no event in stream %s", *intent, rep.Stream)
	}
	if !rep.OK() {
		return errors.Errorf("audit: %d violation(s) in stream %s", len(rep.Violations), rep.Stream)
	}
	return nil
}

// printAudit renders the human report: summary, unreadable events,
// violations, the requested timeline and the verdict.
func printAudit(w io.Writer, rep *audit.AuditReport) {
	fmt.Fprintf(w, "settle audit — stream %s, %d events (last seq %d), %d intents, at %s\n\n",
		rep.Stream, rep.Events, rep.LastSeq, rep.Intents, rep.At.Format(time.RFC3339))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  STATE\tINTENTS")
	states := make([]string, 0, len(rep.States))
	for s := range rep.States {
		states = append(states, string(s))
	}
	sort.Strings(states)
	for _, s := range states {
		fmt.Fprintf(tw, "  %s\t%d\n", s, rep.States[fsm.State(s)])
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  unknown schema\t%d event(s)\n", rep.UnknownSchema)
	fmt.Fprintf(tw, "  unknown type\t%d event(s)\n", rep.UnknownType)
	fmt.Fprintf(tw, "  malformed\t%d event(s)\n", rep.Malformed)
	if rep.AcceptedLoss > 0 {
		fmt.Fprintf(tw, "  accepted loss\t%d event(s) an operator accepted as lost (--accept-log-loss)\n", rep.AcceptedLoss)
	}
	if len(rep.Held) > 0 {
		fmt.Fprintf(tw, "  held\t%d intent(s) held after an accepted loss, to check by hand (listed below); %d cannot be folded\n", len(rep.Held), rep.HeldUnfoldable)
	}
	if rep.Incomplete > 0 {
		fmt.Fprintf(tw, "  incomplete\t%d intent(s) not fully checked\n", rep.Incomplete)
	}
	if p := rep.Projection; p != nil {
		fmt.Fprintf(tw, "  projection\t%d intent(s) compared at checkpoint %d", p.Compared, p.Checkpoint)
		if p.Skipped > 0 {
			fmt.Fprintf(tw, ", %d projected past the audited log", p.Skipped)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if len(rep.Unreadable) > 0 {
		fmt.Fprintf(w, "\nunreadable events (skipped):\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  SEQ\tSUBJECT\tCODE\tREASON")
		for _, u := range rep.Unreadable {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", u.Seq, u.Subject, u.Code, u.Reason)
		}
		tw.Flush()
	}
	if len(rep.Violations) > 0 {
		fmt.Fprintf(w, "\nviolations: %d\n", len(rep.Violations))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  KIND\tINTENT\tVERSION\tSEQ\tDETAIL")
		for _, v := range rep.Violations {
			id := v.IntentID
			if id == "" {
				id = "-"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\n", v.Kind, id, v.Version, v.Seq, v.Detail)
		}
		tw.Flush()
	}
	if len(rep.Held) > 0 {
		fmt.Fprintf(w, "\nheld after an accepted log loss (check each by hand): %d\n", len(rep.Held))
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  INTENT\tFOLDS\tSTATE\tHANDED OFF\tLOST")
		for _, h := range rep.Held {
			state := string(h.State)
			if !h.Folds {
				state = "- (" + h.Why + ")"
			}
			fmt.Fprintf(tw, "  %s\t%t\t%s\t%t\t%s\n", h.IntentID, h.Folds, state, h.HandedOff, h.Lost)
		}
		tw.Flush()
	}
	if rep.Intent != "" {
		fmt.Fprintf(w, "\ntimeline of %s:\n", rep.Intent)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		if len(rep.Timeline) == 0 {
			fmt.Fprintln(tw, "  (no event on the log)")
		} else {
			fmt.Fprintln(tw, "  SEQ\tV\tAT\tTYPE\tACTOR\tSTATE\tDETAIL")
		}
		for _, e := range rep.Timeline {
			state, detail := string(e.State), e.Detail
			if e.Refused != "" {
				state = "REFUSED"
				detail = strings.TrimSpace(e.Refused + " " + detail)
			}
			at := ""
			if !e.At.IsZero() {
				at = e.At.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "  %d\t%d\t%s\t%s\t%s\t%s\t%s\n", e.Seq, e.Version, at, e.Type, e.Actor, state, detail)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	if rep.OK() {
		fmt.Fprintln(w, "result: OK — no violation")
		return
	}
	kinds := make([]string, 0, len(rep.ByKind))
	for k, n := range rep.ByKind {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "result: FAIL — %d violation(s): %s\n", len(rep.Violations), strings.Join(kinds, ", "))
}
