package contentcoding

import (
	"net/http"
	"strings"
)

// Refused returns the first content coding of h other than identity
// (clipped to 32 bytes), or "" when the body is sent as is. A refusal
// should answer 415 with "Accept-Encoding: identity" (RFC 7694).
func Refused(h http.Header) string {
	for _, v := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				if len(c) > 32 {
					c = c[:32] + "…"
				}
				return c
			}
		}
	}
	return ""
}
