package telemetry

import (
	"context"
	"strings"

	"github.com/cockroachdb/errors"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Config is what Setup needs besides the environment.
type Config struct {
	// Getenv reads the environment (OTEL_*); nil: nothing is set.
	Getenv func(string) string
	// Scrub removes the process's secrets from every string attribute and
	// error message (nil: none).
	Scrub func(string) string
	// Version is the service.version resource attribute.
	Version string
}

// Protocols of OTEL_EXPORTER_OTLP_PROTOCOL that Setup exports with.
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Wanted reports which OTLP protocol the environment asks traces to be
// exported with, "" when tracing stays off:
//
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none: off;
//   - OTEL_TRACES_EXPORTER=otlp, or (unset) an OTLP endpoint set
//     (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT):
//     on; with neither, off;
//   - the protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
//     OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf.
//
// Any other exporter or protocol is an error naming the variable.
func Wanted(getenv func(string) string) (string, error) {
	if getenv == nil {
		return "", nil
	}
	env := func(k string) string { return strings.TrimSpace(getenv(k)) }
	if strings.EqualFold(env("OTEL_SDK_DISABLED"), "true") {
		return "", nil
	}
	switch exp := env("OTEL_TRACES_EXPORTER"); exp {
	case "none":
		return "", nil
	case "otlp":
	case "":
		if env("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return "", nil
		}
	default:
		return "", errors.Newf("OTEL_TRACES_EXPORTER: %q is not supported (otlp or none)", exp)
	}
	name, proto := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		name, proto = "OTEL_EXPORTER_OTLP_PROTOCOL", env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch proto {
	case "", ProtocolHTTP:
		return ProtocolHTTP, nil
	case ProtocolGRPC:
		return ProtocolGRPC, nil
	}
	return "", errors.Newf("%s: %q is not supported (http/protobuf or grpc)", name, proto)
}

// Setup turns tracing on when the environment asks for it (Wanted): an
// OTLP exporter (which reads its endpoint, headers, TLS and timeout from
// the standard OTEL_EXPORTER_OTLP_* variables itself) behind a batch span
// processor (OTEL_BSP_*), the sampler of OTEL_TRACES_SAMPLER (default:
// parent-based, always on) and the resource of OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES (service.name defaults to "settle").
// shutdown flushes what is buffered and turns tracing off again; when
// tracing stays off it does nothing. on says whether tracing is on.
func Setup(ctx context.Context, cfg Config) (shutdown func(context.Context) error, on bool, err error) {
	noop := func(context.Context) error { return nil }
	proto, err := Wanted(cfg.Getenv)
	if err != nil || proto == "" {
		return noop, false, err
	}
	var exp sdktrace.SpanExporter
	if proto == ProtocolGRPC {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return noop, false, errors.Wrapf(err, "tracing: OTLP exporter (%s)", proto)
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", "settle")}
	if cfg.Version != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.Version))
	}
	// The environment's service.name, when set, wins over the default.
	res, err := resource.Merge(resource.NewSchemaless(attrs...), envResource(ctx))
	if err != nil {
		return noop, false, errors.Wrap(err, "tracing: resource")
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	restore := Use(tp, cfg.Scrub)
	return func(ctx context.Context) error {
		restore()
		return errors.Wrap(tp.Shutdown(ctx), "tracing: shutdown")
	}, true, nil
}

// envResource is the resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// describe (empty when they are unset or malformed).
func envResource(ctx context.Context) *resource.Resource {
	r, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && r == nil {
		return resource.Empty()
	}
	return r
}
