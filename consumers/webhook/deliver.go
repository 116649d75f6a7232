package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/cockroachdb/redact"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/internal/telemetry"
)

// Deliverer sends the settlements on the log to one endpoint. Make one
// with New and run it with Run; Stats is safe to call at any time.
type Deliverer struct {
	cfg   Config
	js    jetstream.JetStream
	types map[events.Type]Outcome

	mu     sync.Mutex
	stream jetstream.Stream // set by consumer()

	delivered, failed, skipped, dropped atomic.Uint64
	inFlight                            atomic.Int64
	pending                             atomic.Uint64
	lastOK                              atomic.Int64 // unix nanoseconds of the last 2xx
}

// Stats are a deliverer's counters since it started.
type Stats struct {
	// Delivered: events the endpoint answered 2xx to (and that were acked).
	Delivered uint64
	// Failed: attempts that got no 2xx (an answer ≥ 300, a timeout, a
	// connection error) or whose event could not be prepared; each is
	// retried.
	Failed uint64
	// Skipped: events of other types, acked without a request.
	Skipped uint64
	// Dropped: events that can never be read (malformed), terminated and
	// logged. A well-formed log has none.
	Dropped uint64
	// InFlight: requests to the endpoint now.
	InFlight int64
	// Pending: events not yet delivered, as the consumer last reported
	// (not yet fetched, plus fetched and waiting for a 2xx).
	Pending uint64
	// LastDelivered is when the endpoint last answered 2xx (zero: never).
	LastDelivered time.Time
}

// Stats returns the counters.
func (d *Deliverer) Stats() Stats {
	s := Stats{Delivered: d.delivered.Load(), Failed: d.failed.Load(), Skipped: d.skipped.Load(),
		Dropped: d.dropped.Load(), InFlight: d.inFlight.Load(), Pending: d.pending.Load()}
	if ns := d.lastOK.Load(); ns != 0 {
		s.LastDelivered = time.Unix(0, ns)
	}
	return s
}

// New checks cfg and returns a deliverer reading js.
func New(js jetstream.JetStream, cfg Config) (*Deliverer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if js == nil {
		return nil, errors.New("webhook: JetStream is nil")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	d := &Deliverer{cfg: cfg, js: js, types: maps.Clone(Settlements)}
	if len(cfg.Types) > 0 {
		d.types = map[events.Type]Outcome{}
		for _, t := range cfg.Types {
			d.types[t] = Settlements[t]
		}
	}
	return d, nil
}

// Run delivers until ctx is cancelled, then stops fetching, lets the
// attempts in flight finish (each bounded by Timeout) and returns nil.
// The consumer is created (or updated) first; while that fails (NATS
// down, a stream leader being elected, or a consumer the server will not
// change: logged as an error naming its reason) it is tried again with
// backoff, and a subscription that breaks is made again: Run gives up
// only when ctx ends.
func (d *Deliverer) Run(ctx context.Context) error {
	log := d.cfg.Logger.With("endpoint", d.cfg.endpoint(), "durable", d.cfg.Durable)
	log.Info("webhook: delivering settlements")
	stopProgress := d.progress(ctx)
	defer stopProgress()
	for n := uint64(1); ; n++ {
		cons, err := d.consumer(ctx)
		if err == nil {
			n = 1
			err = d.consume(ctx, cons)
		}
		if ctx.Err() != nil {
			return nil
		}
		delay := d.backoff(n, 0)
		if cons == nil {
			log.Error("webhook: cannot create the consumer; nothing is delivered until it can be", "err", err, "in", delay)
		} else {
			log.Warn("webhook: subscription broken; subscribing again", "err", err, "in", delay)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
}

// Prepare creates the consumer now, as Run does first: settle serve calls
// it before it takes requests, so that a new consumer (From "new")
// starts before the first settlement of any of them. An existing
// consumer keeps its position.
func (d *Deliverer) Prepare(ctx context.Context) error {
	_, err := d.consumer(ctx)
	return err
}

// consumer creates the durable consumer, or updates it keeping where it
// started (its deliver policy and start).
func (d *Deliverer) consumer(ctx context.Context) (jetstream.Consumer, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := d.js.Stream(ctx, d.cfg.Stream)
	if err != nil {
		return nil, errors.Wrap(safeNATS(err), "webhook: stream")
	}
	if info := st.CachedInfo(); info != nil {
		if err := events.CheckLogFormat(info.Config.Name, info.Config.Metadata); err != nil {
			return nil, errors.Wrap(err, "webhook")
		}
	}
	d.mu.Lock()
	d.stream = st
	d.mu.Unlock()
	cc := jetstream.ConsumerConfig{
		Durable:        d.cfg.Durable,
		Description:    "settle webhook deliverer",
		FilterSubjects: events.RouteFilters(d.cfg.Routes),
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		// An attempt holds its event at most Timeout, and an event waits
		// at most about as long for a free request slot (it is marked in
		// progress when its attempt starts).
		AckWait:       2*d.cfg.Timeout + 5*time.Second,
		MaxDeliver:    -1, // never dropped: an event waits for its 2xx
		MaxAckPending: d.cfg.MaxPending,
	}
	switch c, err := st.Consumer(ctx, d.cfg.Durable); {
	case err == nil: // an existing consumer keeps where it started
		old := c.CachedInfo().Config
		cc.DeliverPolicy, cc.OptStartSeq, cc.OptStartTime = old.DeliverPolicy, old.OptStartSeq, old.OptStartTime
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, errors.Wrap(safeNATS(err), "webhook: consumer")
	case d.cfg.From == FromNew:
		// After the last event the log holds now: exact, whatever the
		// clocks of this host and the servers say.
		cc.DeliverPolicy, cc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, st.CachedInfo().State.LastSeq+1
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, cc)
	if err != nil {
		return nil, errors.Wrap(safeNATS(err), "webhook: consumer")
	}
	return cons, nil
}

func (d *Deliverer) streamOf() jetstream.Stream {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stream
}

// consume runs the fetch loop until ctx ends or the subscription breaks.
func (d *Deliverer) consume(ctx context.Context, cons jetstream.Consumer) error {
	it, err := cons.Messages(jetstream.PullMaxMessages(d.cfg.MaxInFlight))
	if err != nil {
		return errors.Wrap(safeNATS(err), "webhook: subscribe")
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			it.Drain() // what was fetched is handed back below, not left to AckWait
		case <-done:
		}
	}()
	slots := make(chan struct{}, d.cfg.MaxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	// Attempts in flight when ctx ends run to their own Timeout.
	actx := context.WithoutCancel(ctx)
	for {
		m, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				it.Stop()
				if ctx.Err() != nil {
					return nil
				}
				return errors.Wrap(err, "webhook: subscription closed")
			}
			d.cfg.Logger.Warn("webhook: fetch error; continuing", "durable", d.cfg.Durable, "err", err)
			continue
		}
		if ctx.Err() != nil {
			_ = m.Nak() // fetched, not started: for the next deliverer at once
			continue
		}
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			d.handle(actx, m)
		}()
	}
}

// handle takes one message to its ack, its retry or its termination.
func (d *Deliverer) handle(ctx context.Context, m jetstream.Msg) {
	log := d.cfg.Logger.With("subject", m.Subject())
	meta, err := m.Metadata()
	if err != nil {
		log.Error("webhook: message without metadata; terminated", "err", err)
		d.dropped.Add(1)
		_ = m.TermWithReason("no metadata")
		return
	}
	route, _, err := events.ParseSubject(m.Subject())
	if err != nil {
		log.Error("webhook: message on a foreign subject; terminated", "seq", meta.Sequence.Stream, "err", err)
		d.dropped.Add(1)
		_ = m.TermWithReason("foreign subject")
		return
	}
	e, err := events.Decode(m.Data())
	if err != nil {
		switch de := events.Unreadable(m.Data(), err); de.Code() {
		case events.CodeUnknownType:
			d.skipped.Add(1)
			_ = m.Ack() // no type this version knows can be a settlement
		case events.CodeUnknownSchema:
			log.Warn("webhook: event of an unknown schema; left for an upgraded deliverer", "seq", meta.Sequence.Stream, "field", de.Field)
			_ = m.NakWithDelay(d.cfg.MaxRetryDelay)
		default:
			log.Error("webhook: malformed event; terminated", "seq", meta.Sequence.Stream, "code", de.Code(), "field", de.Field)
			d.dropped.Add(1)
			_ = m.TermWithReason(de.Code())
		}
		return
	}
	outcome, ok := d.types[e.Type]
	if !ok {
		d.skipped.Add(1)
		_ = m.Ack()
		return
	}
	_ = m.InProgress() // the wait for a slot is over: AckWait counts from here
	n := meta.NumDelivered
	log = log.With("event_id", e.EventID, "type", e.Type, "attempt", n)
	body, err := d.body(ctx, route, e, m.Data(), outcome)
	if err != nil {
		d.failed.Add(1)
		delay := d.backoff(n, 0)
		log.Warn("webhook: cannot prepare the delivery; retrying", "err", err, "in", delay)
		_ = m.NakWithDelay(delay)
		return
	}
	d.inFlight.Add(1)
	status, retryAfter, err := d.tracedPost(ctx, route, e, body, n)
	d.inFlight.Add(-1)
	if err == nil && status >= 200 && status < 300 {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		d.delivered.Add(1)
		d.lastOK.Store(d.cfg.Now().UnixNano())
		if err := m.DoubleAck(actx); err != nil {
			// The endpoint has it; the log will send it again, with the
			// same id, and the receiver's dedup makes that a no-op.
			log.Warn("webhook: delivered, but the ack was not confirmed; the event will be sent again", "err", err)
			return
		}
		log.Debug("webhook: delivered", "status", status)
		return
	}
	d.failed.Add(1)
	delay := d.backoff(n, retryAfter)
	if err != nil {
		log.Warn("webhook: delivery failed; retrying", "err", err, "in", delay)
	} else {
		log.Warn("webhook: endpoint refused the delivery; retrying", "status", status, "in", delay)
	}
	_ = m.NakWithDelay(delay)
}

// tracedPost is post as the span settle.webhook.deliver (the intent, its
// route, the settlement's event type, the delivery's attempt) when
// tracing is on.
func (d *Deliverer) tracedPost(ctx context.Context, route string, e events.Event, body []byte, attempt uint64) (int, time.Duration, error) {
	ctx, span := telemetry.Start(ctx, "settle.webhook.deliver")
	if !span.On() {
		return d.post(ctx, e.EventID, body, attempt)
	}
	span.Intent(e.IntentID, route)
	span.Str(telemetry.AttrEvent, string(e.Type))
	span.Int("settle.delivery_attempt", int(attempt))
	status, retryAfter, err := d.post(telemetry.WithIntent(ctx, e.IntentID, ""), e.EventID, body, attempt)
	if err == nil && (status < 200 || status > 299) {
		span.Str("error.type", strconv.Itoa(status))
	}
	span.End(err)
	return status, retryAfter, err
}

// post makes one attempt; the error is the attempt's, never holding the
// URL's query, the body or the secret.
func (d *Deliverer) post(ctx context.Context, eventID string, body []byte, attempt uint64) (status int, retryAfter time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, 0, errors.New("webhook: cannot make the request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "settle-webhook/1")
	req.Header.Set(EventIDHeader, eventID)
	req.Header.Set("Settle-Attempt", strconv.FormatUint(attempt, 10))
	req.Header.Set(SignatureHeader, Sign(d.cfg.Secret, d.cfg.Now(), body))
	span := telemetry.StartHTTP(ctx, req, "", "webhook")
	defer func() {
		if status > 0 {
			span.HTTPStatus(status)
		}
		span.End(err)
	}()
	resp, err := d.cfg.Client.Do(req)
	if err != nil {
		return 0, 0, attemptError(err)
	}
	defer resp.Body.Close()
	// The answer's body is read (bounded) so the connection is reused,
	// and within the timeout: a 2xx whose body never ends is a failure.
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)); err != nil {
		return 0, 0, attemptError(err)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		retryAfter = time.Duration(min(s, 86400)) * time.Second
	}
	return resp.StatusCode, retryAfter, nil
}

// attemptError says why an attempt failed in words safe for a log line
// (cockroachdb/redact keeps them): never the URL, whose query may hold a
// receiver's token, nor anything the endpoint answered.
func attemptError(err error) error {
	var ne net.Error
	var dns *net.DNSError
	var cert *tls.CertificateVerificationError
	var rec tls.RecordHeaderError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return errors.New("webhook: timed out")
	case errors.Is(err, syscall.ECONNREFUSED):
		return errors.New("webhook: connection refused")
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("webhook: connection closed without an answer")
	case errors.As(err, &dns):
		return errors.New("webhook: host not found")
	case errors.As(err, &cert), errors.As(err, &rec):
		return errors.New("webhook: TLS handshake failed")
	}
	return errors.Newf("webhook: request failed (%s)", redact.Safe(fmt.Sprintf("%T", errors.UnwrapAll(err))))
}

// safeNATS keeps a JetStream API error's description (the server's own
// words, holding no secret) in a log line that redacts errors.
func safeNATS(err error) error {
	var ae *jetstream.APIError
	if errors.As(err, &ae) {
		return errors.Newf("%s (error %d)", redact.Safe(ae.Description), redact.Safe(int(ae.ErrorCode)))
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		return errors.New("no answer from NATS")
	}
	return err
}

// backoff is the delay before attempt n+1: RetryDelay doubled per attempt
// up to MaxRetryDelay, drawn in [d/2, d); at least the endpoint's
// Retry-After, up to MaxRetryDelay.
func (d *Deliverer) backoff(n uint64, retryAfter time.Duration) time.Duration {
	delay := d.cfg.RetryDelay
	for k := uint64(1); k < n && delay < d.cfg.MaxRetryDelay; k++ {
		delay *= 2
	}
	delay = min(delay, d.cfg.MaxRetryDelay)
	delay = delay/2 + time.Duration(d.cfg.Rand()*float64(delay/2))
	return min(max(delay, retryAfter), d.cfg.MaxRetryDelay)
}

// progress logs a line every Progress while anything moved or waits, and
// keeps Pending current from the consumer's info.
func (d *Deliverer) progress(ctx context.Context) (stop func()) {
	if d.cfg.Progress <= 0 {
		return func() {}
	}
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d.cfg.Progress)
		defer t.Stop()
		var last Stats
		for {
			select {
			case <-pctx.Done():
				return
			case <-t.C:
			}
			if st := d.streamOf(); st != nil {
				ictx, icancel := context.WithTimeout(pctx, 5*time.Second)
				if c, err := st.Consumer(ictx, d.cfg.Durable); err == nil {
					info := c.CachedInfo()
					d.pending.Store(info.NumPending + uint64(info.NumAckPending))
				}
				icancel()
			}
			s := d.Stats()
			if s.Delivered != last.Delivered || s.Failed != last.Failed || s.Pending > 0 {
				d.cfg.Logger.Info("webhook: progress", "endpoint", d.cfg.endpoint(), "delivered", s.Delivered,
					"failed_attempts", s.Failed, "in_flight", s.InFlight, "pending", s.Pending, "dropped", s.Dropped)
			}
			last = s
		}
	}()
	return func() { cancel(); <-done }
}
