package httproute

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/errors"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/settle-dev/settle/adapter"
)

// upstream is one MCP server: a command settle starts and supervises
// (stdio), or a streamable HTTP endpoint. It connects on the first use (a
// check never starts anything). Once started it is supervised: when its
// session ends (the process exited, the connection broke) it is started
// again at once, then, while starting keeps failing, after a backoff that
// doubles up to maxBackoff; meanwhile Ready says why it is down. The
// routes of one file that declare the same upstream share it (see
// upstreamPool).
type upstream struct {
	route   string
	key     string // what makes two declarations the same upstream; "" never shared
	command string
	args    []string
	env     []string // resolved NAME=value, secret
	url     string
	headers []resolvedHeader
	// dial replaces command and url: an upstream in this process.
	dial func() sdk.Transport
	// rt carries the streamable-HTTP requests of every start.
	rt *http.Transport
	// connectTimeout bounds one start (the route's timeout);
	// frameLimit bounds one message from the upstream.
	connectTimeout time.Duration
	frameLimit     int

	mu       sync.Mutex
	session  *sdk.ClientSession
	conn     *connState // the session's
	failures int        // consecutive failed starts
	retryAt  time.Time  // no start before
	cause    string     // why there is no session, once one was tried
	timer    *time.Timer
	since    time.Time // the session's start
	quick    int       // consecutive sessions that ended within quickExit
	closed   bool
	refs     int
	starts   int // sessions opened (restarts + 1)
}

const (
	firstBackoff = 100 * time.Millisecond
	maxBackoff   = 30 * time.Second
	// frameSlack is what a message may hold besides its result.
	frameSlack = 64 << 10
	// quickExit: a session that ends sooner after its start, having
	// answered no call, counts as a failed start (a process that crashes
	// at once is not restarted in a tight loop).
	quickExit = time.Second
)

func backoff(failures int) time.Duration {
	return min(maxBackoff, firstBackoff<<min(max(failures, 1)-1, 20))
}

// String never shows the environment or the headers.
func (u *upstream) String() string { return "httproute.upstream(" + u.route + ")" }

// Format is String whatever the verb.
func (u *upstream) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(u.String())) }

// connState is what one session's transport observed: a message over
// the bound, a message that is not JSON-RPC, the process's exit.
type connState struct {
	tooLarge atomic.Bool
	garbage  atomic.Bool
	ended    atomic.Bool // reading from the upstream failed
	answered atomic.Bool // a call was answered with a tool result
	// version is the protocol version the session negotiated, sent as
	// MCP-Protocol-Version on each request over HTTP: the go-sdk's client
	// learns it through its own connection, which watchedConn hides.
	version atomic.Pointer[string]
	exited  chan struct{} // closed when the process exited (stdio)
	exitErr error         // set before exited is closed
}

// lost reports whether the connection ended or the process exited.
func (c *connState) lost() bool {
	if c.ended.Load() {
		return true
	}
	if c.exited == nil {
		return false
	}
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// exitText describes how the process ended ("" when it has not, or is
// not a process).
func (c *connState) exitText() string {
	if c.exited == nil {
		return ""
	}
	select {
	case <-c.exited:
	case <-time.After(50 * time.Millisecond):
		return ""
	}
	if c.exitErr == nil {
		return "the upstream process exited (status 0)"
	}
	return "the upstream process exited (" + c.exitErr.Error() + ")"
}

// transport builds the transport of one start.
func (u *upstream) transport(cs *connState) sdk.Transport {
	switch {
	case u.dial != nil:
		return watchedTransport{base: u.dial(), cs: cs}
	case u.command != "":
		cmd := exec.Command(u.command, u.args...)
		cmd.Env = slices.Clone(u.env)
		for _, k := range passedEnv {
			if v, ok := os.LookupEnv(k); ok && !slices.ContainsFunc(u.env, func(e string) bool { return strings.HasPrefix(e, k+"=") }) {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
		}
		return watchedTransport{base: &procTransport{cmd: cmd, limit: u.frameLimit, cs: cs}, cs: cs}
	}
	if u.rt == nil {
		u.rt = adapter.NewTransport()
	}
	hc := &http.Client{Transport: headerRT{headers: u.headers, base: u.rt, limit: int64(u.frameLimit), cs: cs}}
	return watchedTransport{base: &sdk.StreamableClientTransport{Endpoint: u.url, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, cs: cs}
}

// protocolVersionHeader names the session's protocol version on each
// request of the streamable HTTP transport.
const protocolVersionHeader = "Mcp-Protocol-Version"

// headerRT adds the upstream's headers and the negotiated protocol
// version to every request and bounds every response body.
type headerRT struct {
	headers []resolvedHeader
	base    http.RoundTripper
	limit   int64
	cs      *connState
}

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for _, x := range h.headers {
		r.Header.Set(x.name, string(x.value))
	}
	if v := h.cs.version.Load(); v != nil && r.Header.Get(protocolVersionHeader) == "" {
		r.Header.Set(protocolVersionHeader, *v)
	}
	resp, err := h.base.RoundTrip(r)
	if err == nil && resp.Body != nil && h.limit > 0 {
		resp.Body = &boundedBody{rc: resp.Body, left: h.limit, cs: h.cs}
	}
	return resp, err
}

// boundedBody fails a response body longer than its bound.
type boundedBody struct {
	rc   io.ReadCloser
	left int64
	cs   *connState
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		b.cs.tooLarge.Store(true)
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

var errTooLarge = errors.New("a message from the MCP upstream is over its bound")

// lineLimiter fails a stdio line longer than limit: the SDK's decoder
// never buffers more.
type lineLimiter struct {
	r     io.Reader
	limit int
	line  int
	cs    *connState
}

func (l *lineLimiter) Read(p []byte) (int, error) {
	if l.line >= l.limit {
		l.cs.tooLarge.Store(true)
		return 0, errTooLarge
	}
	if len(p) > l.limit-l.line {
		p = p[:l.limit-l.line]
	}
	n, err := l.r.Read(p)
	for _, c := range p[:n] {
		if c == '\n' {
			l.line = 0
		} else {
			l.line++
		}
	}
	return n, err
}

// procTransport starts a command and talks to it over its stdin and
// stdout, bounding each line it reads; its exit is recorded in cs.
type procTransport struct {
	cmd   *exec.Cmd
	limit int
	cs    *connState
}

func (t *procTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		_, _ = outR.Close(), outW.Close()
		return nil, err
	}
	t.cmd.Stdout, t.cmd.Stdin = outW, inR
	if err := t.cmd.Start(); err != nil {
		_, _, _, _ = outR.Close(), outW.Close(), inR.Close(), inW.Close()
		return nil, err
	}
	_, _ = outW.Close(), inR.Close() // the child's ends
	t.cs.exited = make(chan struct{})
	go func() { t.cs.exitErr = t.cmd.Wait(); close(t.cs.exited) }()
	w := &procStdin{f: inW, proc: t.cmd.Process, cs: t.cs}
	return (&sdk.IOTransport{Reader: readCloser{&lineLimiter{r: outR, limit: t.limit, cs: t.cs}, outR}, Writer: w, MaxLineLength: -1}).Connect(ctx)
}

type readCloser struct {
	io.Reader
	io.Closer
}

// procStdin is the command's stdin; closing it ends the process: stdin
// closed, then SIGTERM after 2 s, then SIGKILL.
type procStdin struct {
	f    *os.File
	proc *os.Process
	cs   *connState
}

func (p *procStdin) Write(b []byte) (int, error) { return p.f.Write(b) }

func (p *procStdin) Close() error {
	_ = p.f.Close()
	for _, sig := range []os.Signal{nil, syscall.SIGTERM, os.Kill} {
		if sig != nil {
			_ = p.proc.Signal(sig)
		}
		select {
		case <-p.cs.exited:
			return nil
		case <-time.After(2 * time.Second):
		}
	}
	return errors.New("the upstream process does not exit")
}

// watchedTransport records in cs that the upstream sent something that
// is not JSON-RPC.
type watchedTransport struct {
	base sdk.Transport
	cs   *connState
}

func (t watchedTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &watchedConn{Connection: c, cs: t.cs}, nil
}

type watchedConn struct {
	sdk.Connection
	cs *connState
}

func (c *watchedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err != nil && ctx.Err() == nil {
		c.cs.ended.Store(true)
	}
	if err != nil && ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, errTooLarge) && !errors.Is(err, sdk.ErrConnectionClosed) &&
		!errors.Is(err, os.ErrClosed) && !strings.Contains(err.Error(), "closed") {
		c.cs.garbage.Store(true)
	}
	return m, err
}

// connected returns the live session and its state, starting the
// upstream when there is none and no backoff is running.
func (u *upstream) connected() (*sdk.ClientSession, *connState, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, nil, &adapter.CallError{Class: adapter.NotSent, Code: CodeUpstreamDown, Retryable: true, Message: "the route's MCP upstream is closed"}
	}
	if u.session != nil {
		return u.session, u.conn, nil
	}
	if wait := time.Until(u.retryAt); wait > 0 {
		return nil, nil, &adapter.CallError{Class: adapter.NotSent, Code: CodeUpstreamDown, Retryable: true, RetryAfter: wait,
			Message: "the route's MCP upstream is restarting: " + u.cause}
	}
	if err := u.startLocked(); err != nil {
		return nil, nil, err
	}
	return u.session, u.conn, nil
}

// startLocked starts the upstream (u.mu held); after a failure it
// schedules the next start after the backoff.
func (u *upstream) startLocked() error {
	if u.timer != nil {
		u.timer.Stop()
		u.timer = nil
	}
	cctx, cancel := context.WithTimeout(context.Background(), u.connectTimeout)
	defer cancel()
	st := &connState{}
	c := sdk.NewClient(&sdk.Implementation{Name: "settle", Version: "1"}, nil)
	cs, err := c.Connect(cctx, u.transport(st), nil)
	if err != nil {
		u.failures++
		wait := backoff(u.failures + u.quick)
		u.retryAt = time.Now().Add(wait)
		u.cause = "it could not be started"
		if t := st.exitText(); t != "" {
			u.cause += ": " + t
		}
		u.timer = time.AfterFunc(wait, u.restart)
		return &adapter.CallError{Class: adapter.NotSent, Code: CodeUpstreamDown, Retryable: true, RetryAfter: wait,
			Message: "the route's MCP upstream cannot be reached: " + u.cause}
	}
	if r := cs.InitializeResult(); r != nil {
		st.version.Store(&r.ProtocolVersion)
	}
	u.session, u.conn, u.failures, u.retryAt, u.cause, u.since = cs, st, 0, time.Time{}, "", time.Now()
	u.starts++
	go u.watch(cs, st)
	return nil
}

// watch waits for the session to end; unless settle ended it, the
// upstream is started again: at once, or after a backoff when sessions
// keep ending within quickExit of their start without answering a call.
func (u *upstream) watch(cs *sdk.ClientSession, st *connState) {
	_ = cs.Wait()
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.session != cs || u.closed {
		return
	}
	u.session, u.conn = nil, nil
	u.cause = "its session ended"
	if t := st.exitText(); t != "" {
		u.cause = t
	}
	var wait time.Duration
	if time.Since(u.since) < quickExit && !st.answered.Load() {
		u.quick++
		if u.quick > 1 {
			wait = backoff(u.quick - 1)
		}
	} else {
		u.quick = 0
	}
	u.retryAt = time.Now().Add(wait)
	u.timer = time.AfterFunc(wait, u.restart)
}

// restart starts the upstream again unless it is running or closed.
func (u *upstream) restart() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed || u.session != nil {
		return
	}
	_ = u.startLocked()
}

// drop forgets a session that failed (and stops its process), and
// starts the upstream again.
func (u *upstream) drop(cs *sdk.ClientSession) {
	u.mu.Lock()
	if u.session == cs && !u.closed {
		u.session, u.conn = nil, nil
		u.cause = "its session was lost"
		if u.timer != nil {
			u.timer.Stop()
		}
		u.timer = time.AfterFunc(0, u.restart)
	}
	u.mu.Unlock()
	go func() { _ = cs.Close() }()
}

// release ends one route's use; the last one stops the upstream.
func (u *upstream) release() error {
	u.mu.Lock()
	u.refs--
	if u.refs > 0 {
		u.mu.Unlock()
		return nil
	}
	cs, rt := u.session, u.rt
	u.session, u.closed = nil, true
	if u.timer != nil {
		u.timer.Stop()
	}
	u.mu.Unlock()
	var err error
	if cs != nil {
		err = cs.Close()
	}
	if rt != nil {
		rt.CloseIdleConnections()
	}
	return err
}

// up reports whether the upstream is running, or not started yet.
func (u *upstream) up() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return !u.closed && (u.session != nil || u.cause == "")
}

// ready is nil when the upstream is running (it is started when it has
// not been), or says why it is not.
func (u *upstream) ready() error {
	_, _, err := u.connected()
	if err == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return errors.New("the MCP upstream of route " + u.route + " is closed")
	}
	wait := time.Until(u.retryAt).Round(time.Millisecond)
	return errors.Newf("the MCP upstream of route %s is down: %s; next start in %s (%d failed starts)", u.route, u.cause, max(wait, 0), u.failures)
}

// upstreamPool holds the upstreams of one route file: routes that
// declare the same one share its process and session.
type upstreamPool struct {
	mu sync.Mutex
	by map[string]*upstream
}

// share returns the pool's upstream equal to up (its bound raised to
// up's) or adds up; either way one more route uses it.
func (p *upstreamPool) share(up *upstream) *upstream {
	if p == nil || up.key == "" {
		up.refs++
		return up
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if have, ok := p.by[up.key]; ok {
		have.mu.Lock()
		have.refs++
		have.frameLimit = max(have.frameLimit, up.frameLimit)
		have.connectTimeout = max(have.connectTimeout, up.connectTimeout)
		have.mu.Unlock()
		return have
	}
	if p.by == nil {
		p.by = map[string]*upstream{}
	}
	up.refs++
	p.by[up.key] = up
	return up
}
