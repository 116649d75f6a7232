package node

import (
	"context"
	"io"
	"log/slog"
	"regexp"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
)

// The values of LogFormat.
const (
	LogText = "text"
	LogJSON = "json"
)

// CheckLogFormat refuses a log format other than text or json.
func CheckLogFormat(v string) error {
	switch v {
	case LogText, LogJSON:
		return nil
	}
	return errors.Errorf("%q: want %s or %s", v, LogText, LogJSON)
}

// NewLogger is a settle process's logger: one line per record on w, as
// text or JSON (format), at info level. An error is logged by its whole
// text — its operation, kind, code and cause, so that an operator can tell
// why a loop fails — and scrub decides what is secret: every string of a
// record (the message, each attribute, each error's text) goes through
// it once, and credentials in URLs (user:password@) are cut. scrub holds
// the values this process knows as secrets: the routes' credentials, the
// API tokens, NATS passwords (a nil scrub removes no value but the URL
// credentials).
func NewLogger(w io.Writer, format string, scrub *adapter.Scrubber) *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if format == LogJSON {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(ScrubbingHandler(h, scrub))
}

// ScrubbingHandler wraps h so that every string of every record, errors
// rendered by their text, passes through scrub (see NewLogger).
func ScrubbingHandler(h slog.Handler, scrub *adapter.Scrubber) slog.Handler {
	return scrubbingHandler{h: h, s: scrub}
}

type scrubbingHandler struct {
	h slog.Handler
	s *adapter.Scrubber
}

func (h scrubbingHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h scrubbingHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.text(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.h.Handle(ctx, out)
}

func (h scrubbingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	sc := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		sc[i] = h.attr(a)
	}
	return scrubbingHandler{h: h.h.WithAttrs(sc), s: h.s}
}

func (h scrubbingHandler) WithGroup(name string) slog.Handler {
	return scrubbingHandler{h: h.h.WithGroup(name), s: h.s}
}

// urlCredentials matches the user:password@ of a URL.
var urlCredentials = regexp.MustCompile(`(://)[^/@\s]+:[^/@\s]*@`)

// text scrubs one string.
func (h scrubbingHandler) text(s string) string {
	return h.s.Scrub(urlCredentials.ReplaceAllString(s, "${1}"+adapter.Redacted+"@"))
}

func (h scrubbingHandler) attr(a slog.Attr) slog.Attr {
	a.Value = a.Value.Resolve()
	switch a.Value.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.text(a.Value.String()))
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case error:
			return slog.String(a.Key, h.text(v.Error()))
		case interface{ String() string }:
			return slog.String(a.Key, h.text(v.String()))
		case []string:
			out := make([]string, len(v))
			for i, s := range v {
				out[i] = h.text(s)
			}
			return slog.Any(a.Key, out)
		}
	case slog.KindGroup:
		g := a.Value.Group()
		sc := make([]any, len(g))
		for i, x := range g {
			sc[i] = h.attr(x)
		}
		return slog.Group(a.Key, sc...)
	}
	return a
}
