package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The protocol's edges, on both transports: what is not one JSON-RPC
// message is answered with a JSON-RPC error — -32700 for text that is not
// JSON, -32600 for JSON that is not a request or notification, -32601 for
// a method the server does not have — and never ends a stdio session or
// gets a plain-text answer over HTTP. Bad parameters of a known method
// are the SDK's -32602.

// rpcError is a JSON-RPC error response; id is the request's (nil: null,
// when it cannot be told).
func rpcError(id any, code int64, msg string) []byte {
	var e struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	e.JSONRPC, e.ID = "2.0", id
	e.Error.Code, e.Error.Message = code, msg
	b, _ := json.Marshal(e)
	return b
}

// checkMessage returns the error answer to data when it is not one
// JSON-RPC message (nil when it is): a parse error for text that is not
// JSON, an invalid request for JSON that is not a message, and for a
// batch (MCP has none since 2025-06-18; settle serves none on either
// transport).
func checkMessage(data []byte) []byte {
	data = bytes.TrimSpace(data)
	if !json.Valid(data) {
		return rpcError(nil, jsonrpc.CodeParseError, "parse error: the message is not JSON")
	}
	if data[0] == '[' {
		return rpcError(nil, jsonrpc.CodeInvalidRequest, "invalid request: JSON-RPC batches are not supported; send one message at a time")
	}
	if _, err := jsonrpc.DecodeMessage(data); err != nil {
		return rpcError(idOf(data), jsonrpc.CodeInvalidRequest, "invalid request: not a JSON-RPC 2.0 request, notification or response")
	}
	return nil
}

// idOf is the id of a JSON-RPC message, or nil.
func idOf(data []byte) any {
	var m struct {
		ID any `json:"id"`
	}
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	switch m.ID.(type) {
	case string, float64:
		return m.ID
	}
	return nil
}

// --- stdio ---

// lockedWriter serialises whole-line writes to the session's output.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }

// filterLines copies the newline-delimited messages of in to sdk, and
// answers every line that is not one JSON-RPC message (or longer than
// MaxRequestBytes) on out itself, so that the SDK's session, which ends
// on the first line it cannot decode, never sees one. It closes sdk when
// in ends or ctx is done.
func filterLines(ctx context.Context, in io.Reader, sdk *io.PipeWriter, out io.Writer) {
	defer sdk.Close()
	r := bufio.NewReaderSize(in, 64<<10)
	for ctx.Err() == nil {
		line, tooLong, err := readLine(r, MaxRequestBytes)
		switch {
		case tooLong:
			_, _ = out.Write(append(rpcError(nil, jsonrpc.CodeParseError,
				fmt.Sprintf("parse error: the message exceeds %d bytes", MaxRequestBytes)), '\n'))
		case len(bytes.TrimSpace(line)) == 0:
		default:
			if reply := checkMessage(line); reply != nil {
				_, _ = out.Write(append(reply, '\n'))
			} else if _, werr := sdk.Write(append(liftIdempotencyKey(bytes.TrimSpace(line)), '\n')); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// readLine reads one line (without its newline) of at most max bytes; a
// longer one is read to its end and reported tooLong.
func readLine(r *bufio.Reader, max int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > max+1 {
			tooLong, line = true, nil
		} else if !tooLong {
			line = append(line, chunk...)
		}
		if err != bufio.ErrBufferFull {
			return bytes.TrimSuffix(line, []byte("\n")), tooLong, err
		}
	}
}

// --- HTTP ---

// rpcWriter holds back a plain-text refusal the SDK writes (a method it
// does not have, a request it finds invalid) so that it can be answered
// as a JSON-RPC error instead; anything else passes through.
type rpcWriter struct {
	http.ResponseWriter
	held bool
	code int
	text bytes.Buffer
}

func (w *rpcWriter) WriteHeader(code int) {
	if code >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.held, w.code = true, code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *rpcWriter) Write(b []byte) (int, error) {
	if w.held {
		return w.text.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *rpcWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && !w.held {
		f.Flush()
	}
}

func (w *rpcWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish answers a held refusal as a JSON-RPC error: a method the server
// does not have is -32601 (with the request's id, HTTP 200, as any other
// error answer to a request; 400 for a notification), any other refusal
// -32600 (400).
func (w *rpcWriter) finish(body []byte) {
	if !w.held {
		return
	}
	id := idOf(body)
	msg := strings.TrimSpace(w.text.String())
	code, status := int64(jsonrpc.CodeInvalidRequest), http.StatusBadRequest
	if strings.HasPrefix(msg, "JSON RPC not handled") {
		code, msg = jsonrpc.CodeMethodNotFound, "method not found"+strings.TrimSuffix(strings.TrimPrefix(msg, "JSON RPC not handled"), " unsupported")
		if id != nil {
			status = http.StatusOK
		}
	}
	w.ResponseWriter.Header().Set("Content-Type", "application/json")
	w.ResponseWriter.WriteHeader(status)
	_, _ = w.ResponseWriter.Write(rpcError(id, code, msg))
}
