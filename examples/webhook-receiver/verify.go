package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
)

// Verify checks the Settle-Signature header of a webhook request, as
// docs/webhooks.md describes it:
//
//  1. split the header at commas into key=value pairs; t is the
//     timestamp (Unix seconds), each v1 a signature (64 hex digits); other
//     keys are ignored;
//  2. refuse a timestamp further than tolerance from now, either way (a
//     replayed request);
//  3. compute HMAC-SHA256, keyed with the secret, of the timestamp as
//     written, a full stop, and the raw body — the bytes as received,
//     before any JSON parsing;
//  4. accept when one v1 equals it (compared in constant time; several
//     appear while a secret is rotated).
func Verify(header string, body, secret []byte, tolerance time.Duration, now time.Time) error {
	var stamp string
	var stamps int
	var sigs []string
	for _, pair := range strings.Split(header, ",") {
		key, value, found := strings.Cut(strings.TrimSpace(pair), "=")
		if !found {
			continue
		}
		if key == "t" {
			stamp, stamps = value, stamps+1
		} else if key == "v1" {
			sigs = append(sigs, value)
		}
	}
	unix, err := strconv.ParseInt(stamp, 10, 64)
	switch {
	case len(secret) == 0:
		return errors.New("no secret configured")
	case stamps != 1 || err != nil || strconv.FormatInt(unix, 10) != stamp:
		return errors.New("the signature header needs exactly one t=<unix seconds>")
	}
	age := now.Sub(time.Unix(unix, 0))
	if age > tolerance || age < -tolerance {
		return errors.New("the signature's timestamp is outside the tolerance")
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(stamp + "."))
	mac.Write(body)
	expected := mac.Sum(nil)
	for _, s := range sigs {
		if got, err := hex.DecodeString(s); err == nil && hmac.Equal(got, expected) {
			return nil
		}
	}
	return errors.New("no v1 signature matches the body")
}
