package audit

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the human report: summary, unreadable events,
// violations, the requested timeline and the verdict.
func (rep *AuditReport) WriteText(w io.Writer) {
	fmt.Fprintf(w, "settle audit — stream %s, %d events (last seq %d), %d intents, at %s\n\n",
		rep.Stream, rep.Events, rep.LastSeq, rep.Intents, rep.At.Format(time.RFC3339))
	rep.writeStates(w)
	fmt.Fprintln(w)
	rep.writeCounts(w)
	if len(rep.Unreadable) > 0 {
		table(w, "\nunreadable events (skipped):\n", "SEQ\tSUBJECT\tCODE\tREASON", func(tw io.Writer) {
			for _, u := range rep.Unreadable {
				fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\n", u.Seq, u.Subject, u.Code, u.Reason)
			}
		})
	}
	if len(rep.Violations) > 0 {
		table(w, fmt.Sprintf("\nviolations: %d\n", len(rep.Violations)), "KIND\tINTENT\tVERSION\tSEQ\tDETAIL", func(tw io.Writer) {
			for _, v := range rep.Violations {
				fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\n", v.Kind, cmp.Or(v.IntentID, "-"), v.Version, v.Seq, v.Detail)
			}
		})
	}
	if len(rep.Held) > 0 {
		table(w, fmt.Sprintf("\nheld after an accepted log loss (check each by hand): %d\n", len(rep.Held)), "INTENT\tFOLDS\tSTATE\tHANDED OFF\tLOST", func(tw io.Writer) {
			for _, h := range rep.Held {
				state := string(h.State)
				if !h.Folds {
					state = "- (" + h.Why + ")"
				}
				fmt.Fprintf(tw, "  %s\t%t\t%s\t%t\t%s\n", h.IntentID, h.Folds, state, h.HandedOff, h.Lost)
			}
		})
	}
	if rep.Intent != "" {
		rep.writeTimeline(w)
	}
	fmt.Fprintln(w)
	rep.writeVerdict(w)
}

// table writes title, then a table of header (tab-separated) and the rows
// rows writes, each starting with two spaces.
func table(w io.Writer, title, header string, rows func(tw io.Writer)) {
	fmt.Fprint(w, title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if header != "" {
		fmt.Fprintln(tw, "  "+header)
	}
	rows(tw)
	tw.Flush()
}

func (rep *AuditReport) writeStates(w io.Writer) {
	table(w, "", "STATE\tINTENTS", func(tw io.Writer) {
		for _, s := range slices.Sorted(maps.Keys(rep.States)) {
			fmt.Fprintf(tw, "  %s\t%d\n", s, rep.States[s])
		}
	})
}

func (rep *AuditReport) writeCounts(w io.Writer) {
	table(w, "", "", func(tw io.Writer) {
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
	})
}

func (rep *AuditReport) writeTimeline(w io.Writer) {
	header := "SEQ\tV\tAT\tTYPE\tACTOR\tSTATE\tDETAIL"
	if len(rep.Timeline) == 0 {
		header = "(no event on the log)"
	}
	table(w, fmt.Sprintf("\ntimeline of %s:\n", rep.Intent), header, func(tw io.Writer) {
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
	})
}

func (rep *AuditReport) writeVerdict(w io.Writer) {
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
