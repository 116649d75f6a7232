package adapter_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/settle-dev/settle/adapter"
)

// A server that answers the first request of each connection, then reads
// the second one and drops the connection without an answer. net/http
// resends a request that carries an Idempotency-Key on a fresh connection
// when a reused one breaks after the write (a duplicate delivery) if it
// can replay its body — always when it has none, as a DELETE or a bodyless
// POST (Stripe's cancel) has; adapter.Do must not: the outcome is unknown
// and only settle decides.
func TestDoNeverResendsAfterAWrittenRequestOnAReusedConnection(t *testing.T) {
	for _, tc := range []struct {
		name, method, header string
		body                 []byte
	}{
		{"post with a body", "POST", "Idempotency-Key", []byte(`{"body":"x"}`)},
		{"post without a body", "POST", "Idempotency-Key", nil},
		{"delete", "DELETE", "Idempotency-Key", nil},
		{"delete, X-Idempotency-Key", "DELETE", "X-Idempotency-Key", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, requests, keys := droppingServer(t)
			client := &http.Client{Timeout: 2 * time.Second}
			send := func() error {
				req, err := adapter.NewRequest(context.Background(), tc.method, "http://"+addr+"/v1/things/1", tc.body)
				if err != nil {
					return err
				}
				req.Header.Set(tc.header, "sk_same")
				_, err = adapter.Do(context.Background(), client, req)
				return err
			}
			if err := send(); err != nil {
				t.Fatal(err)
			}
			err := send() // reuses the pooled connection; the server reads it and drops it
			var ce *adapter.CallError
			if !errors.As(err, &ce) || ce.Class != adapter.Unknown {
				t.Fatalf("second send: %v, want an unknown outcome", err)
			}
			time.Sleep(100 * time.Millisecond)
			if n := requests.Load(); n != 2 {
				t.Fatalf("the server received %d requests: the written request was resent behind settle's back", n)
			}
			if got := keys.Load(); got == nil || *got != "sk_same" {
				t.Fatalf("the server read %s %v, want sk_same", tc.header, got)
			}
		})
	}
}

// droppingServer answers the first request of each connection (201) and
// drops the connection (RST) after reading the second. It counts the
// requests it read and keeps the last Idempotency-Key (or
// X-Idempotency-Key) it was sent.
func droppingServer(t *testing.T) (addr string, requests *atomic.Int32, key *atomic.Pointer[string]) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	requests, key = new(atomic.Int32), new(atomic.Pointer[string])
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				r := bufio.NewReader(c)
				for k := 0; ; k++ {
					req, err := http.ReadRequest(r)
					if err != nil {
						return
					}
					requests.Add(1)
					k1 := req.Header.Get("Idempotency-Key") + req.Header.Get("X-Idempotency-Key")
					key.Store(&k1)
					_, _ = io.Copy(io.Discard, req.Body)
					if k == 1 {
						if tc, ok := c.(*net.TCPConn); ok {
							_ = tc.SetLinger(0) // RST after the request was read
						}
						return
					}
					_, _ = c.Write([]byte("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"))
				}
			}(c)
		}
	}()
	return l.Addr().String(), requests, key
}

func TestStatusPolicyClassifies(t *testing.T) {
	p := adapter.DefaultStatusPolicy()
	cases := map[int]adapter.Class{400: adapter.Rejected, 404: adapter.Rejected, 422: adapter.Rejected, 429: adapter.Rejected,
		408: adapter.Unknown, 409: adapter.Unknown, 500: adapter.Unknown, 502: adapter.Unknown, 503: adapter.Unknown, 504: adapter.Unknown, 501: adapter.Rejected}
	for code, class := range cases {
		err := p.Classify(code)
		var ce *adapter.CallError
		if !errors.As(err, &ce) || ce.Class != class || ce.StatusCode != code {
			t.Errorf("HTTP %d: %v, want %s", code, err, class)
		}
	}
	if err := p.Classify(201); err != nil {
		t.Errorf("201: %v", err)
	}
	var ce *adapter.CallError
	if errors.As(p.Classify(429), &ce); !ce.Retryable {
		t.Error("429 must be retryable")
	}
}

func TestCallErrorHelpers(t *testing.T) {
	var ce *adapter.CallError
	err := adapter.InvalidRequest("invalid_payload", "payload.body: is required")
	if !errors.As(err, &ce) || ce.Class != adapter.NotSent || ce.Code != "invalid_payload" || ce.Retryable || ce.Message != "payload.body: is required" {
		t.Fatalf("InvalidRequest: %#v", err)
	}
	err = adapter.Unparseable(200, "a get")
	if !errors.As(err, &ce) || ce.Class != adapter.Unknown || ce.Code != "response_unparseable" || ce.StatusCode != 200 ||
		ce.Message != "the response to a get cannot be parsed" {
		t.Fatalf("Unparseable: %#v", err)
	}
}
