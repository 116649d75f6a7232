package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/consumers/receipts"
	"github.com/settle-dev/settle/consumers/webhook"
)

var (
	secret = []byte("whsec-example-0123456789abcdef")
	t0     = time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)
)

// This Verify, written from the documentation, accepts exactly what
// settle's own accepts: every signature settle makes, and nothing a
// changed body, secret, timestamp or header turns into.
func TestVerifyAgreesWithSettle(t *testing.T) {
	body := []byte(`{"schema":"settle.webhook/v1","id":"in_x:3"}`)
	good := webhook.Sign(secret, t0, body)
	sig := good[strings.Index(good, "v1=")+3:]
	ts := strconv.FormatInt(t0.Unix(), 10)
	for _, c := range []struct {
		header string
		body   []byte
		secret []byte
		now    time.Time
		ok     bool
	}{
		{good, body, secret, t0, true},
		{good, body, secret, t0.Add(5 * time.Minute), true},
		{"v0=00, t=" + ts + " ,v1=" + strings.Repeat("0", 64) + ",v1=" + sig, body, secret, t0, true},
		{good, body, secret, t0.Add(5*time.Minute + time.Second), false},
		{good, body, secret, t0.Add(-5*time.Minute - time.Second), false},
		{good, append(bytes.Clone(body), '\n'), secret, t0, false},
		{good, body, []byte("whsec-other"), t0, false},
		{good, body, nil, t0, false},
		{"t=" + ts, body, secret, t0, false},
		{"v1=" + sig, body, secret, t0, false},
		{"t=" + ts + ",t=" + ts + ",v1=" + sig, body, secret, t0, false},
		{"t=0" + ts + ",v1=" + sig, body, secret, t0, false},
		{"t=" + ts + ",v1=" + strings.ToUpper(sig), body, secret, t0, true},
		{"t=99999999999999999,v1=" + sig, body, secret, t0, false},
		{webhook.Sign(secret, time.Unix(99999999999999999, 0), body), body, secret, t0, false}, // far ahead: Sub saturates
	} {
		mine := Verify(c.header, c.body, c.secret, 5*time.Minute, c.now)
		theirs := webhook.Verify(c.header, c.body, c.secret, 5*time.Minute, c.now)
		if (mine == nil) != c.ok || (theirs == nil) != c.ok {
			t.Errorf("%q at %s: example %v, settle %v, want ok=%v", c.header, c.now.Sub(t0), mine, theirs, c.ok)
		}
	}
}

// Whatever a request carries, the two agree (and neither panics).
func FuzzVerifyAgrees(f *testing.F) {
	body := []byte(`{"id":"in_x:3"}`)
	f.Add(webhook.Sign(secret, t0, body), body, int64(0))
	f.Add("t=,t=1,v1=00", []byte("x"), int64(-1))
	f.Add("t=9223372036854775807,v1="+strings.Repeat("ab", 32), body, int64(0))
	f.Fuzz(func(t *testing.T, header string, body []byte, skew int64) {
		now := t0.Add(time.Duration(skew) * time.Second)
		mine := Verify(header, body, secret, 5*time.Minute, now)
		theirs := webhook.Verify(header, body, secret, 5*time.Minute, now)
		if (mine == nil) != (theirs == nil) {
			t.Fatalf("%q %q at %+ds: example %v, settle %v", header, body, skew, mine, theirs)
		}
	})
}

// A verified settlement is applied once, however often it comes; a
// request whose signature fails applies nothing and gets a 4xx, so
// settle sends it again.
func TestReceiverAppliesEachSettlementOnce(t *testing.T) {
	db, err := receipts.OpenSQLite(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(schema); err != nil {
		t.Fatal(err)
	}
	dedup, err := receipts.NewDeduper(context.Background(), db, "")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := &receiver{secret: secret, tolerance: 5 * time.Minute, now: func() time.Time { return t0 }, db: db, dedup: dedup, out: &out}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	post := func(body []byte, sig string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		req.Header.Set("Settle-Signature", sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	rows := func() int {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM settlements`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	body := []byte(`{"schema":"settle.webhook/v1","id":"in_a:3","type":"intent.confirmed","intent":{"id":"in_a","route":"social_post","account":"acct_1","request_id":"r1","state":"confirmed"},"event":{}}`)
	if code, got := post(body, webhook.Sign(secret, t0, body)); code != 200 || !strings.Contains(got, `"applied":true`) {
		t.Fatalf("first delivery: %d %s", code, got)
	}
	// Again, signed a minute later (a retry after a lost answer).
	if code, got := post(body, webhook.Sign(secret, t0.Add(time.Minute), body)); code != 200 || !strings.Contains(got, `"applied":false`) {
		t.Fatalf("second delivery: %d %s", code, got)
	}
	if n := rows(); n != 1 {
		t.Fatalf("%d rows after two deliveries of one settlement", n)
	}
	forged := bytes.Replace(body, []byte("in_a:3"), []byte("in_b:3"), 1)
	for _, c := range []struct {
		body []byte
		sig  string
	}{
		{forged, webhook.Sign(secret, t0, body)},
		{forged, webhook.Sign([]byte("whsec-attacker-000000000"), t0, forged)},
		{forged, webhook.Sign(secret, t0.Add(-10*time.Minute), forged)},
		{forged, ""},
	} {
		if code, got := post(c.body, c.sig); code != http.StatusBadRequest {
			t.Errorf("forged request: %d %s", code, got)
		}
	}
	if code, _ := post([]byte(`{"id":""}`), webhook.Sign(secret, t0, []byte(`{"id":""}`))); code != http.StatusBadRequest {
		t.Errorf("a signed body that is no settlement: %d", code)
	}
	if resp, err := http.Get(srv.URL); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %v %v", resp, err)
	}
	if n := rows(); n != 1 {
		t.Fatalf("%d rows: a refused request applied something", n)
	}
	if !strings.Contains(out.String(), "already applied in_a:3") {
		t.Errorf("output: %s", out.String())
	}
}
