package app

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/internal/buildinfo"
	"github.com/settle-dev/settle/internal/telemetry"
)

// StartTracing turns OpenTelemetry tracing on when the OTEL_* environment
// asks for it (telemetry.Setup), every secret the process knows scrubbed
// from the spans. stop flushes the spans still buffered (5 s at most).
func StartTracing(ctx context.Context, logger *slog.Logger, secrets []string) (stop func(), err error) {
	scrub := adapter.NewScrubber(secrets...)
	shutdown, on, err := telemetry.Setup(ctx, telemetry.Config{Getenv: os.Getenv, Scrub: scrub.Scrub, Version: buildinfo.Read().Version})
	if err != nil {
		return nil, errors.Wrap(err, "tracing")
	}
	if on {
		logger.Info("tracing: spans are exported over OTLP (OTEL_* environment)")
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			logger.Warn("tracing: spans not flushed at exit", "err", err)
		}
	}, nil
}
