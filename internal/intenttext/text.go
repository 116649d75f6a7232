package intenttext

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/cockroachdb/errors"
)

// Str is v as a table cell: "-" for nothing.
func Str(v any) string {
	if v == nil {
		return "-"
	}
	s := fmt.Sprint(v)
	if s == "" {
		return "-"
	}
	return s
}

// Page is one page of GET /v1/intents.
type Page struct {
	Items []map[string]any `json:"items"`
	Next  string           `json:"next"`
}

// List writes a page as a table. REASON is the manual action's reason,
// a failure's code, or for a rejected intent its rejection code, which
// only the intent's detail holds: rejectionCode(id) fetches it ("" when
// unknown).
func List(w io.Writer, raw []byte, rejectionCode func(id string) string) error {
	var page Page
	if err := json.Unmarshal(raw, &page); err != nil {
		return errors.Errorf("list: unexpected answer: %w", err)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INTENT\tSTATE\tROUTE\tACCOUNT\tREQUEST\tEXTERNAL\tREASON")
	for _, it := range page.Items {
		reason := Str(it["manual_reason"])
		if reason == "-" && it["held"] == true {
			reason = "log_events_lost(held)"
		}
		if reason == "-" {
			reason = Str(it["failure"])
		}
		if reason == "-" && it["state"] == "rejected" && rejectionCode != nil {
			reason = Str(rejectionCode(Str(it["intent_id"])))
		}
		fmt.Fprintf(tw, "%v\t%v\t%v\t%v\t%v\t%v\t%v\n", Str(it["intent_id"]), Str(it["state"]), Str(it["route"]), Str(it["account"]),
			Str(it["request_id"]), Str(it["external_id"]), reason)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(w, "more: --after %s\n", page.Next)
	}
	return nil
}

// RejectionCode is the code of the last rejected attempt in an intent's
// detail (GET /v1/intents/{id}), "" when none.
func RejectionCode(raw []byte) string {
	var d struct {
		Attempts []struct {
			Outcome string `json:"outcome"`
			Code    string `json:"code"`
		} `json:"attempt_history"`
	}
	if json.Unmarshal(raw, &d) != nil {
		return ""
	}
	for k := len(d.Attempts) - 1; k >= 0; k-- {
		if d.Attempts[k].Outcome == "WriteRejected" {
			return d.Attempts[k].Code
		}
	}
	return ""
}

// Show writes one intent (GET /v1/intents/{id}): its fields, a summary
// of why it is where it is, its history and its receipt.
func Show(w io.Writer, raw []byte) error {
	var d map[string]any
	if err := json.Unmarshal(raw, &d); err != nil {
		return errors.Errorf("show: unexpected answer: %w", err)
	}
	line := func(label string, v any) {
		if v != nil && fmt.Sprint(v) != "" {
			fmt.Fprintf(w, "%-16s %v\n", label+":", v)
		}
	}
	for _, k := range []string{"intent_id", "state", "route", "account", "request_id", "idempotency_key", "external_id", "live_url"} {
		line(k, d[k])
	}
	hist, _ := d["history"].([]any)
	for _, f := range summary(d, hist) {
		line(f.label, f.v)
	}
	if ev, ok := d["evidence"].(map[string]any); ok {
		writeCandidates(w, ev)
	}
	if a, ok := d["actions"].([]any); ok && len(a) > 0 {
		line("actions", a)
	}
	if len(hist) > 0 {
		fmt.Fprintln(w, "history:")
		for _, h := range hist {
			if e, ok := h.(map[string]any); ok {
				fmt.Fprintf(w, "  v%-3v %-22v %v %v\n", e["version"], e["type"], e["at"], e["actor"])
				if op := OperatorLine(e); op != "" {
					fmt.Fprintf(w, "       %s\n", op)
				}
			}
		}
	}
	if rc, ok := d["receipt"].(map[string]any); ok {
		fmt.Fprintln(w, "receipt:")
		checks, _ := rc["checks"].([]any)
		for _, c := range checks {
			if cm, ok := c.(map[string]any); ok {
				fmt.Fprintf(w, "  check %-10v ok=%v %v\n", cm["name"], cm["ok"], Str(cm["detail"]))
			}
		}
	}
	return nil
}

// writeCandidates lists a hand-off's candidates as they were seen: each
// with its creation time against the first attempt, its author, its
// parent as read (and from which field), and why each check failed.
func writeCandidates(w io.Writer, ev map[string]any) {
	cands, _ := ev["candidates"].([]any)
	if len(cands) == 0 {
		return
	}
	fmt.Fprintln(w, "candidates:")
	for _, c := range cands {
		m, _ := c.(map[string]any)
		if m == nil {
			continue
		}
		match := "not a match"
		if m["match"] == true {
			match = "exact match"
		}
		created := Str(m["created_at"])
		if off := Str(m["from_first_attempt"]); off != "-" {
			created += " (" + off + " from the first attempt)"
		}
		parent := fmt.Sprintf("%q", fmt.Sprint(nonNil(m["parent"])))
		if from := Str(m["parent_from"]); from != "-" {
			parent += " from " + from
		}
		fmt.Fprintf(w, "  %v  %s  created %s  author %q  parent %s\n", Str(m["external_id"]), match, created, fmt.Sprint(nonNil(m["author"])), parent)
		if n, ok := m["normalised"].([]any); ok && len(n) > 0 {
			fmt.Fprintf(w, "       payload equal after the route's normalisations %v\n", n)
		}
		whys, _ := m["why"].([]any)
		for _, y := range whys {
			fmt.Fprintf(w, "       %v\n", y)
		}
	}
	if n, ok := ev["candidates_omitted"].(float64); ok && n > 0 {
		fmt.Fprintf(w, "  (%d more not listed)\n", int(n))
	}
}

func nonNil(v any) any {
	if v == nil {
		return ""
	}
	return v
}

type field struct {
	label string
	v     any
}

// summary is why the intent is where it is, as label/value pairs: the
// manual action's reason, a failure's code, each attempt's outcome and
// code, the next check, the last deferral and the last error.
func summary(d map[string]any, hist []any) []field {
	var out []field
	if r := Str(d["manual_reason"]); r != "-" {
		if o := Str(d["manual_owner"]); o != "-" {
			r += " (owner " + o + ")"
		}
		out = append(out, field{"reason", r})
	}
	out = append(out, field{"failure", d["failure"]})
	if codes := attemptCodes(d); codes != "" {
		out = append(out, field{"codes", codes})
	}
	out = append(out, field{"next check", d["next_check_at"]})
	deferral, lastErr := lastDeferral(hist)
	out = append(out, field{"deferred", deferral})
	if ev, ok := d["evidence"].(map[string]any); ok {
		if errs, ok := ev["errors"].([]any); ok && len(errs) > 0 {
			lastErr = fmt.Sprint(errs[len(errs)-1])
		}
	}
	return append(out, field{"last error", lastErr})
}

// attemptCodes lists each attempt's outcome and code:
// "1 WriteRejected invalid_body; 2 ...".
func attemptCodes(d map[string]any) string {
	atts, _ := d["attempt_history"].([]any)
	var parts []string
	for _, a := range atts {
		m, _ := a.(map[string]any)
		if m == nil || Str(m["outcome"]) == "-" {
			continue
		}
		p := fmt.Sprintf("%v %v", m["n"], m["outcome"])
		if c := Str(m["code"]); c != "-" {
			p += " " + c
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// lastDeferral describes the last CheckDeferred (its reason, error and
// the wait the API asked for) and returns the last error an event named
// (a deferral's, or an unknown or rejected outcome's code and message).
func lastDeferral(hist []any) (deferral, lastErr string) {
	for _, h := range hist {
		e, _ := h.(map[string]any)
		data, _ := e["data"].(map[string]any)
		if data == nil {
			continue
		}
		switch e["type"] {
		case "CheckDeferred":
			deferral = Str(data["reason"])
			if x := Str(data["error"]); x != "-" {
				deferral += ", error " + x
				lastErr = x
			}
			if x := Str(data["retry_after"]); x != "-" {
				deferral += ", the API asked to wait " + x
			}
		case "OutcomeUnknown", "WriteRejected", "TargetFailed", "ReadbackFailed":
			msg := Str(data["code"])
			if m := Str(data["message"]); m != "-" {
				msg += ": " + m
			}
			if msg != "-" {
				lastErr = msg
			}
		}
	}
	return deferral, lastErr
}

// OperatorLine describes an operator event (Approved, Abandoned,
// OperatorConfirmed, OperatorReleased) and a hand-off
// (ManualActionRequired): who decided and why. "" for other events.
func OperatorLine(e map[string]any) string {
	data, _ := e["data"].(map[string]any)
	if data == nil {
		return ""
	}
	var parts []string
	add := func(label, key string) {
		if v, ok := data[key]; ok && v != nil && fmt.Sprint(v) != "" {
			parts = append(parts, fmt.Sprintf("%s=%q", label, fmt.Sprint(v)))
		}
	}
	switch e["type"] {
	case "Approved", "OperatorConfirmed", "OperatorReleased":
		add("operator", "operator")
		add("reason", "reason")
	case "Abandoned":
		add("operator", "by")
		add("reason", "reason")
		if data["effect_possible"] == true {
			parts = append(parts, "effect_possible=true")
		}
	case "ManualActionRequired":
		add("reason", "reason")
		add("message", "message")
		add("owner", "owner")
	default:
		return ""
	}
	return strings.Join(parts, " ")
}
