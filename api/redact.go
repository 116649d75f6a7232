package api

import (
	"context"
	"log/slog"

	"github.com/cockroachdb/redact"
)

// SafeError is err as cockroachdb/redact prints it with unsafe parts
// removed: only what the code marked safe (errors.Safe, the format strings
// of errors.Newf/Wrapf, sentinel messages) is kept; anything else — values
// from requests, responses or the environment — shows as ‹×›.
func SafeError(err error) string {
	if err == nil {
		return ""
	}
	return string(redact.Sprint(err).Redact())
}

// RedactingHandler wraps h so that every error attribute of every record
// (top-level or in a group, from any package) is logged as SafeError: a
// secret an external API echoed into an error can never reach a log line.
func RedactingHandler(h slog.Handler) slog.Handler { return redactingHandler{h} }

type redactingHandler struct{ slog.Handler }

func (h redactingHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = redactAttr(a)
	}
	return redactingHandler{h.Handler.WithAttrs(red)}
}

func (h redactingHandler) WithGroup(name string) slog.Handler {
	return redactingHandler{h.Handler.WithGroup(name)}
}

func redactAttr(a slog.Attr) slog.Attr {
	a.Value = a.Value.Resolve()
	switch a.Value.Kind() {
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			return slog.String(a.Key, SafeError(err))
		}
	case slog.KindGroup:
		g := a.Value.Group()
		red := make([]any, len(g))
		for i, x := range g {
			red[i] = redactAttr(x)
		}
		return slog.Group(a.Key, red...)
	}
	return a
}
