package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/producer"
)

const chromiumPath = "/usr/bin/chromium"

var (
	installOnce   sync.Once
	installResult string
)

// findChromium returns a Chromium binary: /usr/bin/chromium, another
// Chromium or Chrome on PATH, or — once per test binary, as root and unless
// SETTLE_NO_BROWSER_INSTALL is set — Debian's chromium installed with
// apt-get. When none can be had it skips the test, saying why — except
// under CI=true (.ci/run installs Chromium), where it fails: the console
// must not go untested where it matters.
func findChromium(t *testing.T) string {
	t.Helper()
	return findBrowser(t, os.Getenv("CI") != "", lookupChromium)
}

// lookupChromium is the browser lookup of findChromium.
func lookupChromium() string {
	if st, err := os.Stat(chromiumPath); err == nil && !st.IsDir() {
		return chromiumPath
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// skipper is the part of testing.TB findBrowser uses, so that its CI
// behaviour can be tested without failing the test that tests it.
type skipper interface {
	Helper()
	Logf(format string, args ...any)
	Skip(args ...any)
	Fatal(args ...any)
}

func findBrowser(t skipper, ci bool, lookup func() string) string {
	t.Helper()
	skip := func(why string) {
		if ci {
			t.Fatal("CI=true and no browser for the console test: " + why)
			return
		}
		t.Skip(why)
	}
	if p := lookup(); p != "" {
		return p
	}
	why := "no Chromium at " + chromiumPath + " or on PATH"
	switch {
	case os.Getenv("SETTLE_NO_BROWSER_INSTALL") != "":
		skip(why + "; SETTLE_NO_BROWSER_INSTALL is set, so no install was tried (apt-get install chromium to run this test)")
		return ""
	case os.Geteuid() != 0:
		skip(why + "; not root, so no install was tried (apt-get install chromium to run this test)")
		return ""
	}
	installOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "sh", "-c",
			"apt-get install -y --no-install-recommends chromium || (apt-get update && apt-get install -y --no-install-recommends chromium)")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		if err != nil {
			tail := string(out)
			if len(tail) > 600 {
				tail = tail[len(tail)-600:]
			}
			installResult = "installing it with apt-get failed: " + err.Error() + ": " + tail
			return
		}
		installResult = "apt-get installed chromium"
	})
	t.Logf("browser install: %s", installResult)
	if p := lookup(); p != "" {
		return p
	}
	skip(why + "; " + installResult)
	return ""
}

// startBrowser starts a headless browser for the test and returns a
// context of its first tab, bounded to 90 seconds.
func startBrowser(t *testing.T, browser string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1600),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	// The first action starts the browser: no timeout on it (a timeout on
	// the browser's own context would stop the browser).
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", browser, err)
	}
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The console lists a manual_action intent with its evidence; an operator
// resolves it as abandoned in a real headless Chromium, and the decision is
// on the log with the operator's name.
func TestConsoleResolvesManualActionInBrowser(t *testing.T) {
	browser := findChromium(t)
	e := newEnv(t, envOptions{dev: true})
	id := e.manualIntent("console-1")
	approval, err := e.Prod.Execute(context.Background(), producer.Request{Route: "social_approval", Account: "acct_1",
		RequestID: "console-2", Payload: json.RawMessage(`{"body":"needs approval"}`)})
	if err != nil || approval.State != fsm.AwaitingApproval {
		t.Fatalf("approval intent: %v %v", approval, err)
	}
	e.CatchUp()

	ctx := startBrowser(t, browser)

	card := chromedp.CSS(`#queue-manual_action article[data-intent-id="` + id + `"]`)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e.http.URL+"/console"),
		chromedp.WaitVisible(card),
	); err != nil {
		t.Fatalf("console did not list the intent: %v", err)
	}
	reason, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("reason-"+id)))
	if err != nil {
		t.Fatal(err)
	}
	state, err := chromedp.Run(ctx, chromedp.AttributeValue(card, "data-state"))
	if err != nil {
		t.Fatal(err)
	}
	if reason != string(events.ReasonDuplicateExactMatches) || state.Value != string(fsm.ManualAction) {
		t.Fatalf("listed with reason %q state %q", reason, state.Value)
	}
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+jsString(sel)+`).length`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if c, tl := count("#candidates-"+id+" li[data-external-id]"), count("#timeline-"+id+" li[data-event-type]"); c != 2 || tl != len(e.history("social_post", id)) {
		t.Fatalf("evidence shows %d candidates and %d timeline events", c, tl)
	}
	if n := count("#approve-" + approval.IntentID); n != 1 {
		t.Fatalf("the awaiting_approval intent has %d approve buttons", n)
	}
	if n := count("#approve-" + id); n != 0 {
		t.Fatalf("the manual_action intent has %d approve buttons", n)
	}

	// Forms stay closed until asked for.
	if n := count("form.action:not([hidden])"); n != 0 {
		t.Fatalf("%d action forms are open before any click", n)
	}
	screenshot(t, ctx, ".before.png")

	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("resolve-"+id)),
		chromedp.WaitVisible(chromedp.ID("form-"+id)),
		chromedp.SetValue(chromedp.ID("resolution-"+id), "abandoned"),
		chromedp.SendKeys(chromedp.ID("operator-"+id), "alice"),
		chromedp.SendKeys(chromedp.ID("op-reason-"+id), "two copies exist; keep them, write nothing more"),
		chromedp.Click(chromedp.ID("submit-"+id)),
		chromedp.WaitVisible(chromedp.CSS(`#last-action[data-state="abandoned"][data-intent-id="`+id+`"]`)),
	); err != nil {
		t.Fatalf("resolving in the console: %v", err)
	}

	// The decision is on the log, with the operator and the reason.
	h := e.history("social_post", id)
	i, err := fsm.Fold(h)
	if err != nil {
		t.Fatal(err)
	}
	if i.State != fsm.Abandoned || i.AbandonedFrom != fsm.ManualAction {
		t.Fatalf("on the log: %s (from %s)", i.State, i.AbandonedFrom)
	}
	ab, _ := h[len(h)-1].Data.(*events.AbandonedData)
	if ab == nil || ab.By != "alice" || ab.Reason != "two copies exist; keep them, write nothing more" {
		t.Fatalf("last event %s %+v", h[len(h)-1].Type, h[len(h)-1].Data)
	}

	// Once projected, a refresh drops it from the manual queue.
	e.CatchUp()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("refresh"))); err != nil {
		t.Fatal(err)
	}
	gone, err := chromedp.Run(ctx, chromedp.Poll[bool](
		`document.body.getAttribute("data-loaded") === "true" && !document.querySelector(`+jsString(string(card))+`)`,
		chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil || !gone {
		t.Fatalf("the resolved intent is still listed: %v", err)
	}
	screenshot(t, ctx, ".after.png")

	// With tokens (not dev): the console asks for one and keeps it out of
	// the page.
	e2 := newEnv(t, envOptions{})
	id2 := e2.manualIntent("console-3")
	e2.CatchUp()
	card2 := chromedp.CSS(`#queue-manual_action article[data-intent-id="` + id2 + `"]`)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(e2.http.URL+"/console"),
		chromedp.WaitVisible(chromedp.CSS(`#status.bad`)),
	); err != nil {
		t.Fatalf("token mode: %v", err)
	}
	if msg, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("status"))); err != nil || !strings.Contains(msg, "token") {
		t.Fatalf("without a token the console says %q (%v)", msg, err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("token"), secretOperator),
		chromedp.Click(chromedp.ID("token-save")),
		chromedp.WaitVisible(card2),
	); err != nil {
		t.Fatalf("token mode with a token: %v", err)
	}
	html, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML + document.getElementById("token").value`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(html, secretOperator) {
		t.Fatal("the token is in the page")
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the browser session timed out")
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// screenshot saves the page to $SETTLE_CONSOLE_SCREENSHOT+suffix when that
// variable is set (to look at the console by eye).
func screenshot(t *testing.T, ctx context.Context, suffix string) {
	t.Helper()
	path := os.Getenv("SETTLE_CONSOLE_SCREENSHOT")
	if path == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+suffix, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// recordingT records what findBrowser asks of the test.
type recordingT struct {
	skipped, fatal string
}

func (r *recordingT) Helper()             {}
func (r *recordingT) Logf(string, ...any) {}
func (r *recordingT) Skip(args ...any)    { r.skipped = strings.TrimSpace(fmt.Sprintln(args...)) }
func (r *recordingT) Fatal(args ...any)   { r.fatal = strings.TrimSpace(fmt.Sprintln(args...)) }
func noBrowser() string                   { return "" }
func someBrowser() string                 { return "/opt/browser" }

// Without a browser the console test skips on a developer's machine but
// fails under CI=true (where .ci/run installs Chromium).
func TestBrowserMissingFailsUnderCI(t *testing.T) {
	t.Setenv("SETTLE_NO_BROWSER_INSTALL", "1") // no apt-get from this test
	var dev, ci recordingT
	if p := findBrowser(&dev, false, noBrowser); p != "" || dev.skipped == "" || dev.fatal != "" {
		t.Fatalf("developer machine: path %q skip %q fatal %q", p, dev.skipped, dev.fatal)
	}
	if p := findBrowser(&ci, true, noBrowser); p != "" || ci.fatal == "" || ci.skipped != "" {
		t.Fatalf("CI: path %q skip %q fatal %q", p, ci.skipped, ci.fatal)
	}
	if !strings.Contains(ci.fatal, "CI=true") {
		t.Fatalf("CI failure does not say why: %q", ci.fatal)
	}
	var found recordingT
	if p := findBrowser(&found, true, someBrowser); p != "/opt/browser" || found.fatal != "" || found.skipped != "" {
		t.Fatalf("with a browser: %q %+v", p, found)
	}
}
