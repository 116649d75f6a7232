package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
)

// The signature scheme is Stripe's (docs.stripe.com/webhooks, "verify
// manually"), with settle's header name:
//
//	Settle-Signature: t=1767225600,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd
//
// t is the Unix time of the delivery attempt (a new one for every
// attempt, so a retry an hour later still verifies within the
// tolerance); v1 is the lowercase hex HMAC-SHA256, keyed with the
// endpoint's secret, of the bytes `<t>.<body>` — the timestamp as written
// in the header, a full stop, and the request body exactly as received.
// A receiver recomputes it, compares in constant time, and refuses a
// timestamp further than its tolerance from its own clock (a replayed
// request). A header may carry several v1 entries (a secret being
// rotated); one that matches is enough. Other schemes (v0, …) are ignored.

// SignatureHeader is the request header that carries the signature.
const SignatureHeader = "Settle-Signature"

// EventIDHeader carries the event id (also the body's "id"): the key a
// receiver deduplicates by.
const EventIDHeader = "Settle-Event-Id"

// DefaultTolerance is how far a signature's timestamp may be from the
// receiver's clock (Stripe's default, five minutes).
const DefaultTolerance = 5 * time.Minute

// Errors of Verify, matchable with errors.Is.
var (
	ErrNoSignature     = errors.New("webhook signature: header missing or without a v1 signature")
	ErrBadHeader       = errors.New("webhook signature: malformed header")
	ErrTimestamp       = errors.New("webhook signature: timestamp outside the tolerance")
	ErrSignatureDiffer = errors.New("webhook signature: no v1 signature matches the body")
)

// Sign returns the Settle-Signature header value for body sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a Settle-Signature header against body and secret: the
// header names one timestamp and at least one v1 signature; the
// timestamp is within tolerance of now (either side; tolerance ≤ 0 skips
// the check, for tests only); one v1 signature equals the HMAC of
// `<t>.<body>` (compared in constant time). It never panics.
func Verify(header string, body []byte, secret []byte, tolerance time.Duration, now time.Time) error {
	if len(secret) == 0 {
		return errors.New("webhook signature: the secret is empty")
	}
	var ts string
	var sigs [][]byte
	seen := false
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			if seen {
				return errors.Wrap(ErrBadHeader, "two timestamps")
			}
			ts, seen = v, true
		case "v1":
			b, err := hex.DecodeString(v)
			if err != nil || len(b) != sha256.Size {
				continue // not a v1 signature; another may be
			}
			sigs = append(sigs, b)
		}
	}
	if len(sigs) == 0 {
		return ErrNoSignature
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || ts != strconv.FormatInt(sec, 10) {
		return errors.Wrap(ErrBadHeader, "no Unix timestamp t=")
	}
	if tolerance > 0 {
		if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
			return ErrTimestamp
		}
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return ErrSignatureDiffer
}
