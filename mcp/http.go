package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/cockroachdb/errors"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/settle-dev/settle/internal/contentcoding"
	"github.com/settle-dev/settle/service"
)

// ErrUnauthenticated is matched by an Authenticator's error when the
// request carries no valid credential (401); any other error is 403. It
// is service.ErrUnauthenticated, which api.Server.Authenticate's errors
// match.
var ErrUnauthenticated = service.ErrUnauthenticated

// Authenticator returns the caller of an HTTP request: its name, tenant,
// scopes and limits (settle serve: the API's bearer tokens,
// api.Server.Authenticate, which is one). Its error text is shown to the
// client: it must not hold a secret.
type Authenticator func(r *http.Request) (*service.Caller, error)

type callerCtxKey struct{}

// MaxRequestBytes bounds one HTTP request to the endpoint.
const MaxRequestBytes = 4 << 20

// Handler is the streamable-HTTP endpoint (mount it at /mcp). It is
// stateless: every request is authenticated by authn, served by the MCP
// server of its caller (For) and answered as JSON, so a token is checked
// on every call and no session outlives it.
func (s *Server) Handler(authn Authenticator) http.Handler {
	h := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		c, _ := r.Context().Value(callerCtxKey{}).(*service.Caller)
		if c == nil {
			return nil
		}
		return s.For(*c)
	}, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: s.log, MaxRequestBodyBytes: MaxRequestBytes})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &service.StatusWriter{ResponseWriter: w}
		defer func() {
			s.log.Info("mcp request", "method", r.Method, "path", r.URL.Path, "status", sw.Code, "caller", sw.Caller,
				"duration", time.Since(start).Round(time.Microsecond))
		}()
		if enc := contentcoding.Refused(r.Header); enc != "" {
			// Bodies are read as sent: a body labelled with a coding is
			// refused, compressed or not, rather than read as if it were
			// not labelled.
			sw.Header().Set("Accept-Encoding", "identity")
			writeError(sw, http.StatusUnsupportedMediaType, "Content-Encoding: "+enc+" is not supported; send the body uncompressed, without Content-Encoding")
			return
		}
		c, err := authn(r)
		if err == nil && c != nil {
			err = c.Validate()
		}
		if err != nil || c == nil {
			code := http.StatusForbidden
			if errors.Is(err, ErrUnauthenticated) {
				code = http.StatusUnauthorized
				sw.Header().Set("WWW-Authenticate", `Bearer realm="settle"`)
			}
			msg := "forbidden"
			if err != nil {
				msg = s.scrub.Scrub(err.Error())
			}
			writeError(sw, code, msg)
			return
		}
		sw.Caller = c.Name
		r = r.WithContext(context.WithValue(r.Context(), callerCtxKey{}, c))
		if r.Method != http.MethodPost {
			h.ServeHTTP(sw, r)
			return
		}
		// A message that is not JSON-RPC is answered in JSON-RPC (-32700,
		// -32600), and so is the SDK's plain-text refusal of a method it
		// does not have (-32601): see jsonrpc.go.
		body, err := io.ReadAll(http.MaxBytesReader(sw, r.Body, MaxRequestBytes))
		if err != nil {
			code, msg := http.StatusBadRequest, "the body could not be read"
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				code, msg = http.StatusRequestEntityTooLarge, fmt.Sprintf("the body exceeds %d bytes", MaxRequestBytes)
			}
			writeError(sw, code, msg)
			return
		}
		if reply := checkMessage(body); reply != nil {
			sw.Header().Set("Content-Type", "application/json")
			sw.WriteHeader(http.StatusBadRequest)
			_, _ = sw.Write(reply)
			return
		}
		body = liftIdempotencyKey(body)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		rw := &rpcWriter{ResponseWriter: sw}
		h.ServeHTTP(rw, r)
		rw.finish(body)
	})
}

// writeError answers an HTTP request refused before any MCP message is
// read.
func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": code, "message": msg}})
}
