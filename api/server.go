package api

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/cockroachdb/redact"

	"github.com/settle-dev/settle/internal/telemetry"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/service"
)

// Server is settle's HTTP API. It implements http.Handler.
type Server struct {
	cfg     Config
	log     *slog.Logger
	keys    *keyring
	metrics *Metrics
	mux     *http.ServeMux
	routes  []route
	busy    *inflight // limits.go
}

// route is one served endpoint. scope "" is public (no token).
type route struct {
	method  string
	pattern string
	scope   string
	// params are the query parameters the endpoint accepts, each at most
	// once; any other is refused (400).
	params []string
	handle func(w http.ResponseWriter, r *http.Request, c *service.Caller) error
}

// New validates cfg and returns the server. Tokens are kept as digests of
// their secrets.
func New(cfg Config) (*Server, error) {
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Tokens = slices.Clone(cfg.Tokens)
	s := &Server{cfg: cfg, log: cfg.Logger, keys: newKeyring(cfg.Tokens), metrics: cfg.Metrics,
		mux: http.NewServeMux()}
	s.busy = newInflight(cfg.MaxInFlight, s.metrics)
	for i := range s.cfg.Tokens {
		s.cfg.Tokens[i].Secret = "" // only the digests are needed from here on
	}
	s.routes = []route{
		{method: "GET", pattern: "/healthz", handle: s.handleHealth},
		{method: "GET", pattern: "/readyz", handle: s.handleReady},
		{method: "GET", pattern: "/openapi.json", handle: s.handleOpenAPI},
		{method: "GET", pattern: "/console", handle: s.handleConsole},
		{method: "GET", pattern: "/metrics", scope: ScopeRead, handle: s.handleMetrics},
		{method: "POST", pattern: "/v1/intents", scope: ScopeSubmit, params: []string{"wait"}, handle: s.handleSubmit},
		{method: "GET", pattern: "/v1/intents", scope: ScopeRead, params: listParams, handle: s.handleList},
		{method: "GET", pattern: "/v1/intents/{id}", scope: ScopeRead, handle: s.handleGet},
		{method: "GET", pattern: "/v1/stats", scope: ScopeRead, params: statsParams, handle: s.handleStats},
		{method: "POST", pattern: "/v1/intents/{id}/approve", scope: ScopeOperate, handle: s.action(service.ActionApprove)},
		{method: "POST", pattern: "/v1/intents/{id}/resolve", scope: ScopeOperate, handle: s.action("")},
		{method: "POST", pattern: "/v1/intents/{id}/abandon", scope: ScopeOperate, handle: s.action(service.ActionAbandon)},
	}
	allowed := map[string][]string{}
	for _, rt := range s.routes {
		s.mux.Handle(rt.method+" "+rt.pattern, s.endpoint(rt))
		allowed[rt.pattern] = append(allowed[rt.pattern], rt.method)
	}
	for p, methods := range allowed {
		if slices.Contains(methods, "GET") {
			methods = append(methods, "HEAD")
		}
		allow := strings.Join(methods, ", ")
		s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeProblem(w, newProblem(http.StatusMethodNotAllowed, ProbMethodNotAllowed, r.Method+" is not served here; allowed: "+allow))
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, newProblem(http.StatusNotFound, ProbNotFound, "no such endpoint; see /openapi.json"))
	})
	return s, nil
}

// Metrics returns the server's metrics (feed CountCall, ObserveWrite and
// ObserveSettle from the producer's and reconcilers' wiring).
func (s *Server) Metrics() *Metrics { return s.metrics }

// Routes lists the served endpoints as "METHOD /pattern".
func (s *Server) Routes() []string {
	out := make([]string, len(s.routes))
	for i, rt := range s.routes {
		out[i] = rt.method + " " + rt.pattern
	}
	return out
}

// ServeHTTP serves one request: routing, the dev-mode guard, auth,
// the handler, then the request's metrics and (Config.AccessLog) one
// access-log line.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.serve(w, r, "", func(sw *service.StatusWriter) {
		if s.cfg.Dev && !devRequestOK(r) {
			writeProblem(sw, newProblem(http.StatusForbidden, ProbForbidden, "dev mode serves loopback clients with a loopback Host only"))
			return
		}
		s.mux.ServeHTTP(sw, r)
	})
}

// Instrument wraps a handler served beside the API (/mcp) so that its
// requests are measured and logged as the API's are, under handler, and
// share the API's MaxInFlight bound (past it: 503 with Retry-After).
func (s *Server) Instrument(handler string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, handler, func(sw *service.StatusWriter) {
			if !s.busy.acquire() {
				writeProblem(sw, overloaded(sw))
				return
			}
			defer s.busy.release()
			h.ServeHTTP(sw, r)
		})
	})
}

// OtherHandler is the handler label of a request no endpoint matched.
const OtherHandler = "other"

// handlerOf is the handler label of a request the mux routed: the path
// of the pattern it matched ("/v1/intents/{id}"), OtherHandler for none
// (a label never holds a client's path).
func handlerOf(r *http.Request) string {
	p := r.Pattern
	if _, path, ok := strings.Cut(p, " "); ok {
		p = path
	}
	if p == "" || p == "/" {
		return OtherHandler
	}
	return p
}

// serve runs fn on a statusWriter, then counts the request under
// handler (or the pattern the mux matched) and logs it.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, handler string, fn func(sw *service.StatusWriter)) {
	sw := &service.StatusWriter{ResponseWriter: w}
	start := time.Now()
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("api: handler panic", "method", r.Method, "path", clip(r.URL.Path, 200), "panic", string(redact.Sprint(v).Redact()))
			if sw.Code == 0 {
				writeInternal(sw)
			}
		}
		if sw.Code == 0 {
			sw.Code = http.StatusOK
		}
		handler = cmp.Or(handler, handlerOf(r))
		d := time.Since(start)
		s.metrics.countHTTP(handler, sw.Code, d)
		if s.cfg.AccessLog {
			s.log.Info("http request", "method", r.Method, "path", clip(r.URL.Path, 200), "status", sw.Code,
				"caller", sw.Caller, "duration", d.Round(time.Microsecond))
		}
	}()
	fn(sw)
}

// writeInternal is the answer to a handler that panicked.
func writeInternal(w http.ResponseWriter) {
	writeProblem(w, newProblem(http.StatusInternalServerError, ProbInternal, "internal error"))
}

// endpoint wraps a route's handler with authentication, authorization and
// error mapping.
func (s *Server) endpoint(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tp := r.Header.Get(telemetry.Header); tp != "" || telemetry.Enabled() {
			// The caller's trace (W3C traceparent) is the parent of what
			// the request does, and the intent records it.
			ctx, span := telemetry.StartServer(telemetry.WithTraceparent(r.Context(), tp), r.Method+" "+handlerOf(r))
			r = r.WithContext(ctx)
			defer func() {
				if sw, ok := w.(*service.StatusWriter); ok {
					span.Int("http.response.status_code", sw.Code)
				}
				span.End(nil)
			}()
		}
		var c *service.Caller
		if rt.scope != "" {
			if !s.busy.acquire() {
				writeProblem(w, overloaded(w))
				return
			}
			defer s.busy.release()
			var aerr authError
			c, aerr = s.authenticate(r)
			if aerr != "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="settle"`)
				detail := "send Authorization: Bearer <token>"
				if aerr == authInvalid {
					w.Header().Set("WWW-Authenticate", `Bearer realm="settle", error="invalid_token"`)
					detail = "the bearer token is not valid"
				}
				writeProblem(w, newProblem(http.StatusUnauthorized, ProbUnauthorized, detail))
				return
			}
			if sw, ok := w.(*service.StatusWriter); ok {
				sw.Caller = c.Name
			}
			if !c.Has(rt.scope) {
				writeProblem(w, newProblem(http.StatusForbidden, ProbForbidden, "the token lacks the "+rt.scope+" scope"))
				return
			}
		}
		if prob := checkQuery(r.URL.RawQuery, rt.params); prob != nil {
			writeProblem(w, prob)
			return
		}
		if err := rt.handle(w, r, c); err != nil {
			s.fail(w, r, err)
		}
	})
}

// MaxQueryParams bounds the parameters of one query string: no endpoint
// takes more than a few, and Go's own parser gives up (dropping every
// filter) past 10,000.
const MaxQueryParams = 32

// checkQuery refuses a query with more parameters than MaxQueryParams, a
// malformed one, an unknown parameter or one given twice — rather than
// serve an answer computed without the caller's filters.
func checkQuery(raw string, params []string) *Problem {
	if raw == "" {
		return nil
	}
	if n := strings.Count(raw, "&") + strings.Count(raw, ";") + 1; n > MaxQueryParams {
		return invalid("query", fmt.Sprintf("query: has %d parameters; at most %d are accepted", n, MaxQueryParams))
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return invalid("query", "query: is not a valid query string")
	}
	for k, vs := range q {
		name := clip(k, 64)
		if !slices.Contains(params, k) {
			if len(params) == 0 {
				return invalid(name, name+": unknown query parameter; this endpoint takes none")
			}
			return invalid(name, name+": unknown query parameter; accepted: "+strings.Join(params, ", "))
		}
		if len(vs) > 1 {
			return invalid(name, name+": appears more than once")
		}
	}
	return nil
}

// HTTPServer returns an http.Server for s with the config's timeouts and
// header limit: a whole request (body included) must arrive within
// ReadTimeout, kept-alive connections close after IdleTimeout, and
// headers larger than MaxHeaderBytes are refused (431). There is no write
// timeout: a submit may wait for its write (?wait=, at most MaxWait).
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s,
		ReadTimeout:       s.cfg.ReadTimeout,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// fail writes the problem for err. A *Problem is written as is, and so
// are the service's refusals (problemOf); other errors are failures of
// the log or the database (503) or bugs (500): their text goes to the
// log, not to the client.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var p *Problem
	if errors.As(err, &p) {
		writeProblem(w, p)
		return
	}
	if p := problemOf(err); p != nil {
		writeProblem(w, p)
		return
	}
	status, kind, detail := http.StatusServiceUnavailable, ProbUnavailable, "the log or the projector could not be reached; retry"
	if errors.Is(err, ledger.ErrCorruptHistory) {
		status, kind, detail = http.StatusInternalServerError, ProbInternal, "the intent's history cannot be folded"
	}
	s.log.Error("api: request failed", "method", r.Method, "path", clip(r.URL.Path, 200), "status", status, "err", SafeError(err))
	w.Header().Set("Retry-After", "1")
	writeProblem(w, newProblem(status, kind, detail))
}

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

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request, _ *service.Caller) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// readiness is the body of /readyz.
type readiness struct {
	Problem
	Checks map[string]string `json:"checks"`
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request, _ *service.Caller) error {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	checks := map[string]string{"nats": "ok", "stream": "ok", "projector": "ok"}
	ok := true
	failed := func(name string, err error) {
		ok = false
		checks[name] = "failed"
		s.log.Warn("api: not ready", "check", name, "err", SafeError(err))
	}
	if !s.cfg.Log.Connected() {
		failed("nats", errors.New("not connected"))
	}
	if err := s.cfg.Log.CheckStream(ctx); err != nil {
		failed("stream", err)
	}
	if _, err := s.cfg.Service.Checkpoint(ctx); err != nil {
		failed("projector", err)
	}
	var reasons []string
	for _, rc := range s.cfg.ReadyChecks {
		if _, seen := checks[rc.Name]; !seen {
			checks[rc.Name] = "ok"
		}
		if err := rc.Check(ctx); err != nil {
			failed(rc.Name, err)
			reasons = append(reasons, rc.Name)
		}
	}
	if !ok {
		detail := "not ready"
		if len(reasons) > 0 {
			detail += ": " + strings.Join(reasons, ", ") + " failed (the server's log says why)"
		}
		p := newProblem(http.StatusServiceUnavailable, ProbUnavailable, detail)
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(readiness{Problem: *p, Checks: checks})
		return nil
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "checks": checks})
	return nil
}
