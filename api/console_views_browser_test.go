package api

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
)

// The console's screenshots, taken by TestConsoleViewsInBrowser: in
// testdata/screenshots (committed, to look at the console without
// running it) with -update-screenshots; else in a directory of the
// system's temporary one that outlives the test (its paths are logged),
// so that a test run leaves the checkout as it was.
var updateScreenshots = flag.Bool("update-screenshots", false, "write the console's screenshots to testdata/screenshots")

func screenshotDir() string {
	if *updateScreenshots {
		return filepath.Join("testdata", "screenshots")
	}
	return filepath.Join(os.TempDir(), "settle-console-screenshots")
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// text is the text of the element matched by a CSS selector ("" when none).
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return eval[string](t, ctx, `(function(){var e=document.querySelector(`+jsString(sel)+`);return e?e.textContent:"";})()`)
}

// count is the number of elements a CSS selector matches.
func count(t *testing.T, ctx context.Context, sel string) int {
	t.Helper()
	return eval[int](t, ctx, `document.querySelectorAll(`+jsString(sel)+`).length`)
}

// visible reports whether the element a CSS selector matches is shown.
func visible(t *testing.T, ctx context.Context, sel string) bool {
	t.Helper()
	return eval[bool](t, ctx, `(function(){var e=document.querySelector(`+jsString(sel)+`);return !!(e&&e.getClientRects().length);})()`)
}

// waitView waits until the console shows view, loaded (and, for the
// intent page, loaded for id).
func waitView(t *testing.T, ctx context.Context, view, id string) {
	t.Helper()
	cond := `document.body.getAttribute("data-view") === ` + jsString(view) + ` && document.body.getAttribute("data-loaded") === "true"`
	if id != "" {
		cond += ` && document.getElementById("view-intent").getAttribute("data-loaded") === ` + jsString(id)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			return
		}
		if lostContext(err) && time.Now().Before(deadline) {
			// The poll ran in a page that navigated meanwhile (its
			// JavaScript context is gone): poll the new one.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		t.Fatalf("view %s %s did not load: %v (status %q)", view, id, err, text(t, ctx, "#status"))
	}
}

// lostContext reports whether err is Chromium's answer to a script run in
// a JavaScript context that a navigation destroyed or replaced (the
// protocol's -32000 "Cannot find context with specified id", "Execution
// context was destroyed", "Inspected target navigated or closed").
func lostContext(err error) bool {
	m := err.Error()
	return strings.Contains(m, "(-32000)") &&
		(strings.Contains(m, "context") || strings.Contains(m, "navigated"))
}

// setValue sets the value of the form field with this id.
func setValue(id, v string) chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`(function(){var e=document.getElementById(` + jsString(id) + `);e.value=` + jsString(v) +
		`;e.dispatchEvent(new Event("change"));})()`)
}

// saveScreenshot writes the whole page to screenshotDir()/name.
func saveScreenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Fatalf("%s: not a PNG", name)
	}
	dir := screenshotDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s (%d bytes)", path, len(png))
}

// Each view of the console, in a real headless Chromium, over intents in
// every state a human looks at (confirmed, rejected, unknown, manual
// action twice, awaiting approval, abandoned): the queues with the error
// under each reason and safe forms, the list of all intents with its
// filters, paging and search, an intent's page (receipt and checks,
// attempts, candidates and why, timeline), and the per-route charts, each
// checked for what it shows and saved as a screenshot.
func TestConsoleViewsInBrowser(t *testing.T) {
	browser := findChromium(t)
	e := newEnv(t, envOptions{dev: true})
	f := newConsoleFixture(t, e)
	ctx := startBrowser(t, browser)
	base := e.http.URL + "/console"

	// --- Queues ---
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"#queues")); err != nil {
		t.Fatal(err)
	}
	waitView(t, ctx, "queues", "")
	queue := func(state string) []string {
		return eval[[]string](t, ctx, `Array.from(document.querySelectorAll("#queue-`+state+` article")).map(function(a){return a.getAttribute("data-intent-id")})`)
	}
	for state, want := range map[string][]string{"manual_action": {f.manual, f.readFailing}, "awaiting_approval": {f.approval}, "unknown": {f.unknown}} {
		got := queue(state)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("queue %s lists %v, want %v", state, got, want)
		}
	}
	// The card's top: the reason's name, and under it the error.
	rf := e.intent("social_post", f.readFailing)
	if r := text(t, ctx, "#reason-"+f.readFailing); r != string(events.ReasonReadFailing) {
		t.Fatalf("read-failing card's reason %q", r)
	}
	errText := text(t, ctx, "#error-"+f.readFailing)
	lastErr := rf.Evidence.Errors[len(rf.Evidence.Errors)-1]
	if !strings.Contains(errText, "external reads have failed since") || !strings.Contains(errText, "last error: "+lastErr) {
		t.Fatalf("read-failing card's error %q (last error %q)", errText, lastErr)
	}
	if !eval[bool](t, ctx, `!!document.querySelector("#problem-`+f.readFailing+` .reason + .error")`) {
		t.Fatal("the error is not under the reason")
	}
	if r, msg := text(t, ctx, "#reason-"+f.manual), text(t, ctx, "#error-"+f.manual); r != string(events.ReasonDuplicateExactMatches) || msg == "" {
		t.Fatalf("duplicates card: reason %q error %q", r, msg)
	}
	unk := lastOf(e.history("social_post", f.unknown), events.OutcomeUnknown).Data.(*events.OutcomeUnknownData)
	if r, msg := text(t, ctx, "#reason-"+f.unknown), text(t, ctx, "#error-"+f.unknown); r != "outcome_unknown" || !strings.Contains(msg, unk.Code) {
		t.Fatalf("unknown card: reason %q error %q (code %q)", r, msg, unk.Code)
	}

	// Resolve opens with no outcome chosen, and cannot be sent so.
	before := len(e.history("social_post", f.manual))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("resolve-"+f.manual)), chromedp.WaitVisible(chromedp.ID("form-"+f.manual))); err != nil {
		t.Fatal(err)
	}
	if v := eval[string](t, ctx, `document.getElementById("resolution-`+f.manual+`").value`); v != "" {
		t.Fatalf("resolve form opens with outcome %q chosen", v)
	}
	if !eval[bool](t, ctx, `document.getElementById("submit-`+f.manual+`").disabled`) || visible(t, ctx, "#external-id-"+f.manual) {
		t.Fatal("resolve form: submit enabled, or external id shown, with no outcome chosen")
	}
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("op-reason-"+f.manual), "not sure yet"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("form-`+f.manual+`").requestSubmit()`),
		chromedp.Sleep(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n := len(e.history("social_post", f.manual)); n != before {
		t.Fatalf("a resolve without an outcome appended %d events", n-before)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("cancel-"+f.manual))); err != nil {
		t.Fatal(err)
	}
	// Approve asks only for the operator and the reason.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("approve-"+f.approval)), chromedp.WaitVisible(chromedp.ID("form-"+f.approval))); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"resolution", "external-id", "live-url"} {
		if visible(t, ctx, "#"+field+"-"+f.approval) {
			t.Fatalf("approve form shows %s", field)
		}
	}
	if !visible(t, ctx, "#operator-"+f.approval) || !visible(t, ctx, "#op-reason-"+f.approval) {
		t.Fatal("approve form lacks operator or reason")
	}
	saveScreenshot(t, ctx, "queues.png")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("cancel-"+f.approval))); err != nil {
		t.Fatal(err)
	}

	// --- All intents ---
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"#intents")); err != nil {
		t.Fatal(err)
	}
	waitView(t, ctx, "intents", "")
	rows := func() map[string]string {
		return eval[map[string]string](t, ctx, `(function(){var m={};document.querySelectorAll("#intents-body tr[data-intent-id]").forEach(function(r){m[r.getAttribute("data-intent-id")]=r.querySelector("[data-col=state]").textContent});return m;})()`)
	}
	all := rows()
	if len(all) != len(f.ids()) {
		t.Fatalf("all intents lists %d rows: %v", len(all), all)
	}
	for id, st := range f.ids() {
		if all[id] != string(st) {
			t.Fatalf("all intents shows %s as %q, want %s", id, all[id], st)
		}
	}
	if !strings.Contains(text(t, ctx, `#intents-body tr[data-intent-id="`+f.readFailing+`"]`), string(events.ReasonReadFailing)) {
		t.Fatal("the list does not show the read-failing intent's reason")
	}
	saveScreenshot(t, ctx, "intents.png")
	apply := func(actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		actions = append(actions, chromedp.Click(chromedp.ID("f-apply")))
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatal(err)
		}
		waitView(t, ctx, "intents", "")
	}
	// By state, by route and by request id.
	apply(setValue("f-state", "manual_action"))
	if got := rows(); len(got) != 2 || got[f.manual] == "" || got[f.readFailing] == "" {
		t.Fatalf("state=manual_action: %v", got)
	}
	apply(setValue("f-state", ""), setValue("f-route", "social_approval"))
	if got := rows(); len(got) != 2 || got[f.approval] != "awaiting_approval" || got[f.abandoned] != "abandoned" {
		t.Fatalf("route=social_approval: %v", got)
	}
	apply(setValue("f-route", ""), chromedp.SendKeys(chromedp.ID("f-request"), "fx-unknown"))
	if got := rows(); len(got) != 1 || got[f.unknown] != "unknown" {
		t.Fatalf("request_id=fx-unknown: %v", got)
	}
	// By time: created before the rejected one (the clock moved on after
	// the first two) leaves out all but those made earlier.
	cutAt := e.intent("social_post", f.rejected).CreatedAt.UTC()
	apply(setValue("f-request", ""), setValue("f-to", cutAt.Format("2006-01-02T15:04:05")))
	var earlier []string
	for id := range f.ids() {
		route := "social_post"
		if id == f.approval || id == f.abandoned {
			route = "social_approval"
		}
		if e.intent(route, id).CreatedAt.Before(cutAt) {
			earlier = append(earlier, id)
		}
	}
	if got := rows(); len(earlier) == 0 || len(got) != len(earlier) || got[f.confirmed] == "" {
		t.Fatalf("created before %s: %v, want %v", cutAt, got, earlier)
	}
	// Paging by cursor: 5 then 3, each intent once.
	apply(setValue("f-to", ""), setValue("f-limit", "5"))
	page1 := rows()
	if len(page1) != 5 || eval[bool](t, ctx, `document.getElementById("page-next").disabled`) {
		t.Fatalf("page 1: %v", page1)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("page-next"))); err != nil {
		t.Fatal(err)
	}
	waitView(t, ctx, "intents", "")
	page2 := rows()
	if len(page2) != 3 || !eval[bool](t, ctx, `document.getElementById("page-next").disabled`) || text(t, ctx, "#page-info") == "" {
		t.Fatalf("page 2: %v", page2)
	}
	for id := range page2 {
		if page1[id] != "" {
			t.Fatalf("%s on both pages", id)
		}
	}
	// The search box: a request id, then an intent id.
	for q, want := range map[string]string{"fx-rejected": f.rejected, f.approval: f.approval} {
		if err := chromedp.Do(ctx, setValue("search", q), chromedp.Click(chromedp.ID("search-go"))); err != nil {
			t.Fatal(err)
		}
		waitView(t, ctx, "intents", "")
		if got := rows(); len(got) != 1 || got[want] == "" {
			t.Fatalf("search %q: %v", q, got)
		}
	}

	// --- One intent: settled by reconciliation, with a receipt ---
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"#intent/"+f.settled)); err != nil {
		t.Fatal(err)
	}
	waitView(t, ctx, "intent", f.settled)
	si := e.intent("social_post", f.settled)
	if st := text(t, ctx, "#page-state"); st != string(fsm.Confirmed) {
		t.Fatalf("intent page state %q", st)
	}
	if x := text(t, ctx, "#page-receipt-external-id"); x == "" || x != si.Receipt.ExternalID {
		t.Fatalf("receipt external id %q, want %q", x, si.Receipt.ExternalID)
	}
	for _, c := range si.Receipt.Checks {
		if n := count(t, ctx, `#page-receipt-checks li[data-check="`+c.Name+`"][data-ok="true"]`); n != 1 {
			t.Fatalf("receipt check %s shown %d times", c.Name, n)
		}
	}
	if n, want := count(t, ctx, "#page-receipt-checks li"), len(si.Receipt.Checks); n != want || n == 0 {
		t.Fatalf("%d checks shown, want %d", n, want)
	}
	h := e.history("social_post", f.settled)
	if n := count(t, ctx, "#page-timeline li[data-event-type]"); n != len(h) {
		t.Fatalf("timeline shows %d events, history has %d", n, len(h))
	}
	for _, ev := range h {
		if count(t, ctx, `#page-timeline li[data-event-type="`+string(ev.Type)+`"]`) == 0 {
			t.Fatalf("timeline lacks %s", ev.Type)
		}
	}
	if n := count(t, ctx, "#page-attempts li[data-attempt]"); n != len(si.Attempts) {
		t.Fatalf("%d attempts shown, want %d", n, len(si.Attempts))
	}
	chosen := `#page-candidates li[data-external-id="` + si.Receipt.ExternalID + `"][data-match="true"]`
	if c := text(t, ctx, chosen); !strings.Contains(c, "exact match") || !strings.Contains(c, "chosen") {
		t.Fatalf("the chosen candidate reads %q", c)
	}
	saveScreenshot(t, ctx, "intent-confirmed.png")

	// --- One intent: two exact duplicates, handed to a human ---
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"#intent/"+f.manual)); err != nil {
		t.Fatal(err)
	}
	waitView(t, ctx, "intent", f.manual)
	if r := text(t, ctx, "#reason-page"); r != string(events.ReasonDuplicateExactMatches) {
		t.Fatalf("manual page reason %q", r)
	}
	if n := count(t, ctx, `#page-candidates li[data-match="true"]`); n != 2 {
		t.Fatalf("manual page shows %d matching candidates", n)
	}
	if c := text(t, ctx, "#page-candidates"); !strings.Contains(c, "from the first attempt") || !strings.Contains(c, "author ") {
		t.Fatalf("the candidates do not say what was seen: %q", c)
	}
	if !strings.Contains(text(t, ctx, "#page-receipt"), "No receipt") || count(t, ctx, "#resolve-page") != 1 {
		t.Fatal("manual page: a receipt, or no resolve button")
	}
	saveScreenshot(t, ctx, "intent-manual.png")

	// --- One intent: rejected, with the API's code ---
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"#intent/"+f.rejected)); err != nil {
		t.Fatal(err)
	}
	waitView(t, ctx, "intent", f.rejected)
	rej := lastOf(e.history("social_post", f.rejected), events.WriteRejected).Data.(*events.WriteRejectedData)
	if r, msg := text(t, ctx, "#reason-page"), text(t, ctx, "#error-page"); r != rej.Code || !strings.Contains(msg, rej.Code) {
		t.Fatalf("rejected page: reason %q error %q, code %q", r, msg, rej.Code)
	}

	// --- Charts ---
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"#charts")); err != nil {
		t.Fatal(err)
	}
	waitView(t, ctx, "charts", "")
	drawn := func(route string) map[string]int {
		return eval[map[string]int](t, ctx, `(function(){var m={};document.querySelectorAll('svg[data-chart="states"][data-route="`+route+`"] rect[data-state]').forEach(function(r){var s=r.getAttribute("data-state");m[s]=(m[s]||0)+Number(r.getAttribute("data-count"))});return m;})()`)
	}
	for route, want := range map[string]map[string]int{
		"social_post":     {"confirmed": 2, "rejected": 1, "unknown": 1, "manual_action": 2},
		"social_approval": {"awaiting_approval": 1, "abandoned": 1},
		"social_other":    {},
	} {
		got := drawn(route)
		if len(got) != len(want) {
			t.Fatalf("%s chart draws %v, want %v", route, got, want)
		}
		for s, n := range want {
			if got[s] != n || count(t, ctx, `#chart-`+route+` ul.legend li[data-state="`+s+`"][data-count="`+strconv.Itoa(n)+`"]`) != 1 {
				t.Fatalf("%s chart: %s drawn %d, want %d (legend %q)", route, s, got[s], n, text(t, ctx, "#chart-"+route+" ul.legend"))
			}
		}
	}
	settleBars := eval[map[string]string](t, ctx, `(function(){var m={};document.querySelectorAll('svg[data-chart="settle"][data-route="social_post"] rect').forEach(function(r){m[r.getAttribute("data-intent-id")]=r.getAttribute("data-settled")});return m;})()`)
	if len(settleBars) != 4 || settleBars[f.settled] != "true" || settleBars[f.manual] != "true" || settleBars[f.readFailing] != "true" || settleBars[f.unknown] != "false" {
		t.Fatalf("settle chart bars %v", settleBars)
	}
	from, to := unknownEpisode(t, e, "social_post", f.readFailing)
	if s := eval[float64](t, ctx, `Number(document.querySelector('svg[data-chart="settle"] rect[data-intent-id="`+f.readFailing+`"]').getAttribute("data-seconds"))`); s != to.Sub(from).Seconds() {
		t.Fatalf("read-failing settle bar %vs, want %vs", s, to.Sub(from).Seconds())
	}
	if n := count(t, ctx, `#chart-social_approval [data-chart="settle-empty"]`); n != 1 {
		t.Fatal("social_approval has settle bars")
	}
	if s := text(t, ctx, "#chart-social_post p[data-settled]"); !strings.Contains(s, "3 settled") || !strings.Contains(s, "1 still unknown") {
		t.Fatalf("settle summary %q", s)
	}
	saveScreenshot(t, ctx, "charts.png")
}
