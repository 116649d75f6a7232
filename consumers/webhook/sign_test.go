package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/events"
)

var (
	testSecret = []byte("whsec-test-0123456789abcdef")
	t0         = time.Date(2026, 7, 22, 9, 0, 0, 0, time.UTC)
)

// The scheme as documented, computed here by hand: HMAC-SHA256 of
// "<t>.<body>", hex, after "t=<t>,v1=".
func TestSignIsStripesScheme(t *testing.T) {
	body := []byte(`{"id":"i:7"}`)
	h := hmac.New(sha256.New, testSecret)
	fmt.Fprintf(h, "%d.%s", t0.Unix(), body)
	want := "t=" + strconv.FormatInt(t0.Unix(), 10) + ",v1=" + hex.EncodeToString(h.Sum(nil))
	if got := Sign(testSecret, t0, body); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
}

func TestVerify(t *testing.T) {
	body := []byte(`{"id":"i:7","type":"intent.confirmed"}`)
	good := Sign(testSecret, t0, body)
	sig := strings.TrimPrefix(good[strings.Index(good, ",v1="):], ",v1=")
	other := Sign([]byte("another-secret-0123456789"), t0, body)
	otherSig := strings.TrimPrefix(other[strings.Index(other, ",v1="):], ",v1=")
	ts := strconv.FormatInt(t0.Unix(), 10)
	cases := []struct {
		name   string
		header string
		body   []byte
		secret []byte
		now    time.Time
		want   error
	}{
		{"valid", good, body, testSecret, t0, nil},
		{"valid at the tolerance's edge", good, body, testSecret, t0.Add(DefaultTolerance), nil},
		{"valid from a clock ahead", good, body, testSecret, t0.Add(-DefaultTolerance), nil},
		{"spaces and an unknown scheme", " t=" + ts + " , v0=abc , v1=" + sig, body, testSecret, t0, nil},
		{"rotation: one of two v1 matches", "t=" + ts + ",v1=" + otherSig + ",v1=" + sig, body, testSecret, t0, nil},
		{"too old", good, body, testSecret, t0.Add(DefaultTolerance + time.Second), ErrTimestamp},
		{"from the future", good, body, testSecret, t0.Add(-DefaultTolerance - time.Second), ErrTimestamp},
		{"body changed", good, append(bytes.Clone(body), ' '), testSecret, t0, ErrSignatureDiffer},
		{"wrong secret", good, body, []byte("another-secret-0123456789"), t0, ErrSignatureDiffer},
		{"timestamp changed", "t=" + strconv.FormatInt(t0.Unix()+1, 10) + ",v1=" + sig, body, testSecret, t0, ErrSignatureDiffer},
		{"empty header", "", body, testSecret, t0, ErrNoSignature},
		{"no v1", "t=" + ts + ",v0=" + sig, body, testSecret, t0, ErrNoSignature},
		{"v1 not hex", "t=" + ts + ",v1=zz", body, testSecret, t0, ErrNoSignature},
		{"v1 short", "t=" + ts + ",v1=" + sig[:62], body, testSecret, t0, ErrNoSignature},
		{"no timestamp", "v1=" + sig, body, testSecret, t0, ErrBadHeader},
		{"timestamp not a number", "t=12a,v1=" + sig, body, testSecret, t0, ErrBadHeader},
		{"timestamp with a sign", "t=+" + ts + ",v1=" + sig, body, testSecret, t0, ErrBadHeader},
		{"two timestamps", "t=" + ts + ",t=" + ts + ",v1=" + sig, body, testSecret, t0, ErrBadHeader},
	}
	for _, c := range cases {
		err := Verify(c.header, c.body, c.secret, DefaultTolerance, c.now)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: Verify = %v, want %v", c.name, err, c.want)
		}
	}
	if err := Verify(good, body, nil, DefaultTolerance, t0); err == nil {
		t.Error("an empty secret verified")
	}
}

// Whatever the header and body, Verify never panics, and it accepts only
// a header holding the HMAC of "<its t>.<body>" under the secret, with t
// within the tolerance.
func FuzzVerify(f *testing.F) {
	body := []byte(`{"id":"i:7"}`)
	f.Add(Sign(testSecret, t0, body), body, int64(0))
	f.Add("t=1,v1=00", []byte("x"), int64(3))
	f.Add("t=,v1=,v1=,,==,", []byte{}, int64(-400))
	f.Add("t=99999999999999999999,v1="+strings.Repeat("a", 64), body, int64(1<<40))
	f.Fuzz(func(t *testing.T, header string, body []byte, skew int64) {
		now := t0.Add(time.Duration(skew) * time.Second)
		if Verify(header, body, testSecret, DefaultTolerance, now) != nil {
			return
		}
		var ts string
		var sigs []string
		for _, p := range strings.Split(header, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(p), "=")
			switch k {
			case "t":
				ts = v
			case "v1":
				sigs = append(sigs, v)
			}
		}
		sec, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			t.Fatalf("accepted a header without a timestamp: %q", header)
		}
		if d := now.Sub(time.Unix(sec, 0)); d > DefaultTolerance || d < -DefaultTolerance {
			t.Fatalf("accepted a timestamp %s away: %q", d, header)
		}
		h := hmac.New(sha256.New, testSecret)
		h.Write([]byte(ts + "."))
		h.Write(body)
		want := hex.EncodeToString(h.Sum(nil))
		for _, s := range sigs {
			if strings.EqualFold(s, want) {
				return
			}
		}
		t.Fatalf("accepted %q for a body it does not sign", header)
	})
}

// A config printed, formatted or logged holds no secret, and Validate
// names every field it refuses without the secret's value.
func TestSecretNeverPrintedAndValidateNamesFields(t *testing.T) {
	c := DefaultConfig()
	c.URL = "https://hooks.example/settle?token=query-secret-value"
	c.Secret = Secret("whsec-super-secret-value-0123456789")
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("cfg", "config", c, "secret", c.Secret)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("cfg", "secret", c.Secret)
	out := buf.String() + fmt.Sprintf("%v %+v %#v %s", c, c, c, c.Secret)
	if strings.Contains(out, "super-secret") {
		t.Fatalf("the secret was printed: %s", out)
	}
	if got := c.endpoint(); got != "https://hooks.example/settle" {
		t.Fatalf("endpoint = %q: the query must not be logged", got)
	}

	bad := Config{URL: "ftp://user:pw@host/x", Secret: Secret("short-secret"), Stream: "a.b", Durable: "x y",
		From: "yesterday", Routes: []string{"Bad Route"}, Types: []events.Type{events.WriteStarted},
		MaxPending: 0, RetryDelay: time.Second, MaxRetryDelay: time.Millisecond, Progress: -1}
	err := bad.Validate()
	if err == nil {
		t.Fatal("a bad config validated")
	}
	for _, field := range []string{"URL", "Secret", "Stream", "Durable", "From", "Routes[0]", "Types[0]", "Timeout",
		"MaxInFlight", "MaxPending", "RetryDelay", "Progress", "Now", "Logger"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("Validate does not name %s:\n%v", field, err)
		}
	}
	if strings.Contains(err.Error(), "short-secret") || strings.Contains(err.Error(), "pw@") {
		t.Fatalf("Validate printed a secret: %v", err)
	}
	for _, u := range []string{"http://user@host/", "https:///nohost", "mailto:a@b", "https://h/#frag", "%zz", ""} {
		c := DefaultConfig()
		c.URL, c.Secret = u, Secret("0123456789abcdef")
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "URL") {
			t.Errorf("URL %q: %v", u, err)
		}
	}
	ok := DefaultConfig()
	ok.URL, ok.Secret = "http://127.0.0.1:9000/hook", Secret("0123456789abcdef")
	if err := ok.Validate(); err != nil {
		t.Fatalf("a good config: %v", err)
	}
}
