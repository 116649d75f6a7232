package fakeapi

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
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

// fakeServer is what every fake API shares: a real HTTP server, the bearer
// token it requires, the signal that it is closing, the queue of faults
// its writes consume (F is the API's fault type) and the counters of what
// it received and did. The zero value is not usable: call start.
type fakeServer[F any] struct {
	srv   *httptest.Server
	token string

	closeOnce sync.Once
	closed    chan struct{}

	// mu guards the fault queues and counters here and the store of the
	// API that embeds fakeServer.
	mu         sync.Mutex
	faults     []F
	byIntent   map[string][]F // faults for the writes of one intent (NextFor)
	writes     int
	reads      int
	listCalls  int
	effects    int
	effectsKey map[string]int // Idempotency-Key -> effects
}

// start serves routes (pattern -> handler), wrapped by each of wrap, on a
// new loopback server that requires token (a random one when empty).
// Handlers may use the server once start returns.
func (f *fakeServer[F]) start(token string, routes map[string]http.HandlerFunc, wrap ...func(http.Handler) http.Handler) {
	mux := http.NewServeMux()
	for pattern, h := range routes {
		mux.HandleFunc(pattern, h)
	}
	var h http.Handler = mux
	for _, w := range wrap {
		h = w(h)
	}
	if token == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		token = "fake_" + hex.EncodeToString(b[:])
	}
	f.token = token
	f.closed = make(chan struct{})
	f.effectsKey = map[string]int{}
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

// Writes is the number of write requests received, whatever happened to
// them.
func (f *fakeServer[F]) Writes() int { return locked(&f.mu, &f.writes) }

// Reads is the number of API reads received.
func (f *fakeServer[F]) Reads() int { return locked(&f.mu, &f.reads) }

// ListCalls is the number of list requests (pages) served.
func (f *fakeServer[F]) ListCalls() int { return locked(&f.mu, &f.listCalls) }

// Effects is the number of effects made through the API (a duplicate
// counts twice; what a test planted, not at all).
func (f *fakeServer[F]) Effects() int { return locked(&f.mu, &f.effects) }

// EffectsForKey is the number of effects made by writes that carried
// Idempotency-Key key.
func (f *fakeServer[F]) EffectsForKey(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.effectsKey[key]
}

// effectLocked counts one effect of a write that carried key. Call with
// mu held.
func (f *fakeServer[F]) effectLocked(key string) {
	f.effects++
	if key != "" {
		f.effectsKey[key]++
	}
}

// queueFaultsFor queues faults that only the writes of intentID consume
// (recognised by their X-Settle-Attempt header, "<intent>.a<n>"), in order,
// before any global fault.
func (f *fakeServer[F]) queueFaultsFor(intentID string, faults ...F) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byIntent == nil {
		f.byIntent = map[string][]F{}
	}
	f.byIntent[intentID] = append(f.byIntent[intentID], faults...)
}

// queueFaults appends faults to the global queue.
func (f *fakeServer[F]) queueFaults(faults ...F) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, faults...)
}

// popFaultFor takes the next fault for the write r: its intent's own queue
// first, then the global queue; the zero F (no fault) when both are empty.
func (f *fakeServer[F]) popFaultFor(r *http.Request) F {
	f.mu.Lock()
	defer f.mu.Unlock()
	attempt := r.Header.Get("X-Settle-Attempt")
	if k := strings.LastIndex(attempt, ".a"); k > 0 && len(f.byIntent[attempt[:k]]) > 0 {
		return popFrom(&f.byIntent, attempt[:k])
	}
	return popQueue(&f.faults)
}

// popFault takes the next globally queued fault.
func (f *fakeServer[F]) popFault() F {
	f.mu.Lock()
	defer f.mu.Unlock()
	return popQueue(&f.faults)
}

// PendingFaults is how many queued faults (global and per intent) have not
// been consumed yet.
func (f *fakeServer[F]) PendingFaults() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pendingLocked()
}

func (f *fakeServer[F]) pendingLocked() int {
	n := len(f.faults)
	for _, q := range f.byIntent {
		n += len(q)
	}
	return n
}

// DropFaults forgets every queued fault not yet taken (global and per
// intent) and returns how many there were: a test that queued faults for
// a write that never came clears them before they reach another's.
func (f *fakeServer[F]) DropFaults() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.pendingLocked()
	f.faults, f.byIntent = nil, nil
	return n
}

// popQueue takes the head of *q; the zero T when it is empty.
func popQueue[T any](q *[]T) T {
	var next T
	if len(*q) > 0 {
		next, *q = (*q)[0], (*q)[1:]
	}
	return next
}

// popFrom takes the head of m[k], forgetting k once its queue is empty.
func popFrom[T any](m *map[string][]T, k string) T {
	q := (*m)[k]
	next := popQueue(&q)
	if len(q) == 0 {
		delete(*m, k)
	} else {
		(*m)[k] = q
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

// readBody reads a write's body, at most 1 MiB.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
}

// decodeStrict decodes raw, one JSON value of known fields only, into v;
// on failure it returns a fixed message naming what (nothing from raw).
func decodeStrict(raw []byte, v any, what string) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return "the body is not a valid " + what
	}
	if dec.More() {
		return "trailing data after the " + what
	}
	return ""
}

// refusedBeforeCommit acts on a fault that comes before any work: a TCP
// reset, or the injected status code answered by fail. False when f is
// neither.
func refusedBeforeCommit(w http.ResponseWriter, kind FaultKind, code int, fail func(code int)) bool {
	switch kind {
	case FaultResetBeforeCommit:
		resetConn(w)
	case FaultStatus:
		fail(code)
	default:
		return false
	}
	return true
}

// droppedAfterCommit closes the connection without an answer when the
// write's fault loses its response (CommitThenDrop, or Dropped).
func droppedAfterCommit(w http.ResponseWriter, f Fault) bool {
	if f.Kind == FaultCommitThenDrop || f.Drop {
		dropConn(w)
		return true
	}
	return false
}

// idemKey is one remembered Idempotency-Key: the fingerprint of the
// request that first carried it, when, and the saved answer once that
// request is done.
type idemKey struct {
	fingerprint string
	firstSeen   time.Time
	running     bool
	status      int
	body        []byte
	change      *bkChange // the booking API's: the change the key made
}

// keyStore remembers Idempotency-Keys for a retention from their first
// receipt, as Stripe and the IETF httpapi draft do. Use it under the
// fake's mu.
type keyStore map[string]*idemKey

// get is key's record; nil when key is unknown or its retention is over
// (the key is then forgotten: a re-send is a new request).
func (ks keyStore) get(key string, now time.Time, retention time.Duration) *idemKey {
	k := ks[key]
	if k != nil && now.Sub(k.firstSeen) >= retention {
		delete(ks, key)
		return nil
	}
	return k
}

// writeBody answers code with an already encoded JSON body; replayed
// marks it as a saved answer (Idempotent-Replayed: true).
func writeBody(w http.ResponseWriter, code int, body []byte, replayed bool) {
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
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
	writeBody(w, code, append(b, '\n'), false)
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
	writeBody(w, code, append(respell([]byte(" "), tree), " \n"...), false)
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
func withDate(now func() time.Time) func(http.Handler) http.Handler {
	return func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Date", now().UTC().Format(http.TimeFormat))
			h.ServeHTTP(w, r)
		})
	}
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

// cloneAll copies each of ps with cp. Call with the fake's mu held.
func cloneAll[T any](ps []*T, cp func(T) T) []T {
	out := make([]T, len(ps))
	for i, p := range ps {
		out[i] = cp(*p)
	}
	return out
}
