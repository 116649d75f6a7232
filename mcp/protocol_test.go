package mcp_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/service"
)

// rpcAnswer is a JSON-RPC answer reduced to what the edges test checks.
type rpcAnswer struct {
	ID    any `json:"id"`
	Error *struct {
		Code int64 `json:"code"`
	} `json:"error"`
	Result json.RawMessage `json:"result"`
}

// TestProtocolEdges: over HTTP and over stdio, what is not a valid call
// is answered in JSON-RPC — -32700 for text that is not JSON (id null),
// -32600 for JSON that is not a message (and for a batch), -32601 for a
// method the server does not have, -32602 for bad parameters or an
// unknown tool — and the stdio session survives every one of them: the
// next call is served.
func TestProtocolEdges(t *testing.T) {
	e := newEnv(t, envOptions{})
	cases := []struct {
		name, line string
		code       int64
		id         any
	}{
		{"not JSON", `{not json`, -32700, nil},
		{"truncated", `{"jsonrpc":"2.0","id":9,"method":"tools/list"`, -32700, nil},
		{"JSON, not a message", `{"hello":"world"}`, -32600, nil},
		{"a number", `42`, -32600, nil},
		{"a batch", `[{"jsonrpc":"2.0","id":5,"method":"tools/list"}]`, -32600, nil},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"no/such"}`, -32601, float64(1)},
		{"bad params", `{"jsonrpc":"2.0","id":"p","method":"tools/call","params":7}`, -32602, "p"},
		{"unknown tool", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, -32602, float64(2)},
	}
	const next = `{"jsonrpc":"2.0","id":"after","method":"tools/list"}`
	check := func(t *testing.T, what string, a rpcAnswer, code int64, id any) {
		t.Helper()
		switch {
		case code == 0 && (a.Error != nil || len(a.Result) == 0):
			t.Errorf("%s: want a result, got %+v", what, a)
		case code != 0 && (a.Error == nil || a.Error.Code != code):
			t.Errorf("%s: want error %d, got %+v", what, code, a)
		case a.ID != id:
			t.Errorf("%s: id %v, want %v", what, a.ID, id)
		}
	}

	t.Run("http", func(t *testing.T) {
		post := func(body string) (int, string, rpcAnswer) {
			t.Helper()
			req, _ := http.NewRequest("POST", e.http.URL+"/mcp", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+secretAgent)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var a rpcAnswer
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatalf("%s: the answer is not JSON-RPC: %d %s", body, resp.StatusCode, b)
			}
			return resp.StatusCode, resp.Header.Get("Content-Type"), a
		}
		for _, c := range cases {
			status, ct, a := post(c.line)
			check(t, c.name, a, c.code, c.id)
			if ct != "application/json" {
				t.Errorf("%s: content type %q", c.name, ct)
			}
			// A request answered with an error is a normal answer; a body
			// that is no request at all is the client's HTTP error.
			if want := http.StatusOK; c.id == nil {
				want = http.StatusBadRequest
				if status != want {
					t.Errorf("%s: HTTP %d, want %d", c.name, status, want)
				}
			} else if status != want {
				t.Errorf("%s: HTTP %d, want %d", c.name, status, want)
			}
		}
		_, _, a := post(next)
		check(t, "a call after them", a, 0, "after")
	})

	t.Run("stdio", func(t *testing.T) {
		toServer, fromClient := io.Pipe()
		toClient, fromServer := io.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- e.mcp.RunStdio(e.Ctx, service.Caller{Name: "agent", Tenant: service.DefaultTenant,
				Scopes: []string{service.ScopeRead}}, toServer, fromServer)
			fromServer.Close()
		}()
		t.Cleanup(func() { fromClient.Close(); <-done })
		lines := make(chan string, 16)
		go func() {
			sc := bufio.NewScanner(toClient)
			sc.Buffer(make([]byte, 1<<20), 16<<20)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		send := func(line string) rpcAnswer {
			t.Helper()
			if _, err := fromClient.Write([]byte(line + "\n")); err != nil {
				t.Fatalf("%s: the session ended: %v", line, err)
			}
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("%s: the session ended: %v", line, <-done)
				}
				var a rpcAnswer
				if err := json.Unmarshal([]byte(l), &a); err != nil {
					t.Fatalf("%s: %q is not JSON-RPC", line, l)
				}
				return a
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: no answer", line)
			}
			return rpcAnswer{}
		}
		check(t, "initialize", send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`), 0, float64(0))
		if _, err := fromClient.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")); err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			check(t, c.name, send(c.line), c.code, c.id)
		}
		check(t, "a long line", send(`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"x":"`+strings.Repeat("a", 5<<20)+`"}}`), -32700, nil)
		check(t, "a call after them", send(next), 0, "after")
	})
}
