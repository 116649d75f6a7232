package fakeapi

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
)

// fakeServer is what the fake APIs (SocialAPI, BookingAPI, PaymentAPI)
// share: a real HTTP server, the bearer token it requires, the signal that
// it is closing and the queue of faults its writes consume. F is the
// API's fault type. The zero value is not usable: call start.
type fakeServer[F any] struct {
	srv   *httptest.Server
	token string

	closeOnce sync.Once
	closed    chan struct{}

	faultMu  sync.Mutex
	faults   []F
	byIntent map[string][]F // faults for the writes of one intent (NextFor)
}

// start serves h on a new loopback server that requires token (a random
// one when empty). Handlers may use the server once start returns.
func (f *fakeServer[F]) start(token string, h http.Handler) {
	if token == "" {
		token = randomFakeToken()
	}
	f.token = token
	f.closed = make(chan struct{})
	f.srv = httptest.NewServer(h)
}

// Cleaner is what a test gives a fake API's NewXAPI to have the server
// closed when the test ends: testing.TB is one. (The package links no
// testing code: the settle binary's demo serves a fake.)
type Cleaner interface{ Cleanup(func()) }

// startFor builds a config from opts, starts a server with newServer and
// closes it with t.Cleanup.
func startFor[C any, O ~func(*C), S interface{ Close() }](t Cleaner, opts []O, newServer func(C) S) S {
	var cfg C
	for _, o := range opts {
		o(&cfg)
	}
	s := newServer(cfg)
	t.Cleanup(s.Close)
	return s
}

// Close stops the server. Pending Delay faults (and the booking API's held
// requests) end at once. Safe to call more than once.
func (f *fakeServer[F]) Close() {
	f.closeOnce.Do(func() {
		close(f.closed)
		f.srv.Close()
	})
}

// URL is the server's base URL (no trailing slash).
func (f *fakeServer[F]) URL() string { return f.srv.URL }

// Token is the bearer token the server requires.
func (f *fakeServer[F]) Token() string { return f.token }

// PendingFaults is how many queued faults (global and per intent) have not
// been consumed yet.
func (f *fakeServer[F]) PendingFaults() int {
	f.faultMu.Lock()
	defer f.faultMu.Unlock()
	n := len(f.faults)
	for _, q := range f.byIntent {
		n += len(q)
	}
	return n
}

// queueFaultsFor queues faults that only the writes of intentID consume
// (recognised by their X-Settle-Attempt header, "<intent>.a<n>"), in order,
// before any global fault.
func (f *fakeServer[F]) queueFaultsFor(intentID string, faults ...F) {
	f.faultMu.Lock()
	defer f.faultMu.Unlock()
	if f.byIntent == nil {
		f.byIntent = map[string][]F{}
	}
	f.byIntent[intentID] = append(f.byIntent[intentID], faults...)
}

// popFaultFor takes the next fault for the write r: its intent's own queue
// first, then the global queue.
func (f *fakeServer[F]) popFaultFor(r *http.Request) F {
	attempt := r.Header.Get("X-Settle-Attempt")
	if k := strings.LastIndex(attempt, ".a"); k > 0 {
		intent := attempt[:k]
		f.faultMu.Lock()
		q := f.byIntent[intent]
		if len(q) > 0 {
			next := q[0]
			if len(q) == 1 {
				delete(f.byIntent, intent)
			} else {
				f.byIntent[intent] = q[1:]
			}
			f.faultMu.Unlock()
			return next
		}
		f.faultMu.Unlock()
	}
	return f.popFault()
}

// queueFaults appends faults to the queue.
func (f *fakeServer[F]) queueFaults(faults ...F) {
	f.faultMu.Lock()
	defer f.faultMu.Unlock()
	f.faults = append(f.faults, faults...)
}

// DropFaults forgets every queued fault not yet taken (global and per
// intent) and returns how many there were: a test that queued faults for
// a write that never came clears them before they reach another's.
func (f *fakeServer[F]) DropFaults() int {
	f.faultMu.Lock()
	defer f.faultMu.Unlock()
	n := len(f.faults)
	for _, q := range f.byIntent {
		n += len(q)
	}
	f.faults, f.byIntent = nil, nil
	return n
}

// popFault takes the next queued fault; the zero F (no fault) when none.
func (f *fakeServer[F]) popFault() F {
	f.faultMu.Lock()
	defer f.faultMu.Unlock()
	var next F
	if len(f.faults) > 0 {
		next = f.faults[0]
		f.faults = f.faults[1:]
	}
	return next
}

// authorized reports whether r carries the server's bearer token.
func (f *fakeServer[F]) authorized(r *http.Request) bool { return bearerOK(r, f.token) }

// sleep waits d, ending early when done is closed (a nil done never is) or
// the server is closed.
func (f *fakeServer[F]) sleep(d time.Duration, done <-chan struct{}) {
	timer := time.NewTimer(d)
	select {
	case <-timer.C:
	case <-done:
	case <-f.closed:
	}
	timer.Stop()
}

// bearerOK reports whether r carries "Authorization: Bearer <token>".
func bearerOK(r *http.Request, token string) bool {
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(h[len(prefix):]), []byte(token)) == 1
}

func randomFakeToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "fake_" + hex.EncodeToString(b[:])
}

// writeJSON answers code with v as JSON and a trailing newline. Each API
// builds its own error body on it; error messages are fixed strings:
// nothing from the request (and never the token) is echoed.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, `{"error":{"code":"internal"}}`, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// writeRespelled writes v as writeJSON would, in another spelling of the
// same JSON (see Respelled).
func writeRespelled(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	var tree any
	if err == nil {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		err = d.Decode(&tree)
	}
	if err != nil {
		http.Error(w, `{"error":{"code":"internal"}}`, http.StatusInternalServerError)
		return
	}
	if m, ok := tree.(map[string]any); ok {
		m["x_server"] = map[string]any{"version": []any{json.Number("1"), "2/3"}}
	}
	out := respell([]byte(" "), tree)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(out, " \n"...))
}

// respell appends v (a tree decoded with UseNumber) respelled.
func respell(b []byte, v any) []byte {
	switch v := v.(type) {
	case map[string]any:
		b = append(b, '{')
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(keys)))
		for i, k := range keys {
			if i > 0 {
				b = append(b, " ,"...)
			}
			b = append(b, "\n  "...)
			b = respellString(b, k)
			b = append(b, " : "...)
			b = respell(b, v[k])
		}
		return append(b, "\n}"...)
	case []any:
		b = append(b, "[ "...)
		for i, e := range v {
			if i > 0 {
				b = append(b, " , "...)
			}
			b = respell(b, e)
		}
		return append(b, " ]"...)
	case string:
		// A timestamp in UTC with its offset written out, as .NET's
		// DateTimeOffset is (its '+' then escaped by respellString).
		if _, err := time.Parse(time.RFC3339Nano, v); err == nil && strings.HasSuffix(v, "Z") {
			v = strings.TrimSuffix(v, "Z") + "+00:00"
		}
		return respellString(b, v)
	case json.Number:
		return append(b, v...)
	case bool:
		return strconv.AppendBool(b, v)
	case nil:
		return append(b, "null"...)
	}
	panic(fmt.Sprintf("respell: %T", v))
}

// respellString writes s as PHP's json_encode escapes it ('/' as "\/",
// every character past ASCII as \u escapes, in UTF-16) and as .NET's
// System.Text.Json does by default ('+', '<', '>', '&' and '\” as \u
// escapes).
func respellString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '/':
			b = append(b, `\/`...)
		case r == '+' || r == '<' || r == '>' || r == '&' || r == '\'':
			b = fmt.Appendf(b, `\u%04X`, r) // System.Text.Json's default escapes
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			b = fmt.Appendf(b, `\u%04x`, r)
		case r >= 0x80:
			for _, u := range utf16.Encode([]rune{r}) {
				b = fmt.Appendf(b, `\u%04x`, u)
			}
		default:
			b = append(b, byte(r))
		}
	}
	return append(b, '"')
}

// offsetClock is now (time.Now when nil) moved by offset: an API whose
// clock is off.
func offsetClock(now func() time.Time, offset time.Duration) func() time.Time {
	if now == nil {
		now = time.Now
	}
	if offset == 0 {
		return now
	}
	return func() time.Time { return now().Add(offset) }
}

// withDate sets every response's Date header from the fake's clock, as a
// server's own clock does (net/http would write the host's).
func withDate(now func() time.Time, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Date", now().UTC().Format(http.TimeFormat))
		h.ServeHTTP(w, r)
	})
}

// hijack takes the connection over from net/http; nil when it is already
// gone.
func hijack(w http.ResponseWriter) net.Conn {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("fakeapi: the response writer cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return nil
	}
	return conn
}

// dropConn closes the connection without writing a response.
func dropConn(w http.ResponseWriter) {
	if conn := hijack(w); conn != nil {
		_ = conn.Close()
	}
}

// resetConn closes the connection with SO_LINGER 0, which sends a TCP RST.
func resetConn(w http.ResponseWriter) {
	conn := hijack(w)
	if conn == nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// locked reads *v under mu: a fake's counters are kept under its mutex.
func locked[T any](mu *sync.Mutex, v *T) T {
	mu.Lock()
	defer mu.Unlock()
	return *v
}

// bump counts one more in *n under mu.
func bump(mu *sync.Mutex, n *int) {
	mu.Lock()
	*n++
	mu.Unlock()
}
