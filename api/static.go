package api

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/settle-dev/settle/service"
)

//go:embed openapi.json
var openAPIDoc []byte

//go:embed console.html
var consoleHTML []byte

// consoleCSP allows exactly the console's own inline script and style
// (by hash) and requests to this origin: no CDN, no external font, no
// framing.
var consoleCSP = "default-src 'none'; script-src " + inlineHash("script") + "; style-src " + inlineHash("style") +
	"; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// inlineHash is the CSP source of the console's one inline <tag> element.
func inlineHash(tag string) string {
	s := string(consoleHTML)
	open := "<" + tag + ">"
	i := strings.Index(s, open)
	j := strings.Index(s, "</"+tag+">")
	if i < 0 || j < i {
		panic("console.html has no inline <" + tag + ">")
	}
	sum := sha256.Sum256([]byte(s[i+len(open) : j]))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request, _ *service.Caller) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(openAPIDoc)
	return nil
}

func (s *Server) handleConsole(w http.ResponseWriter, r *http.Request, _ *service.Caller) error {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", consoleCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(consoleHTML)
	return nil
}
