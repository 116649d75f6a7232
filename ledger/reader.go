package ledger

import (
	"cmp"
	"context"
	"io"
	"strings"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/settle-dev/settle/events"
)

// Reading the stream to its end. An ordered consumer's "nothing pending"
// is only what its own server holds: on a replicated stream that server
// is any peer, and may be one still catching up, whose copy ends early.
// Reader is the one place that knows the end: it asks the stream's leader.

// ErrReadStalled: the stream's leader holds messages after the last one
// a Reader delivered, and consumers placed anew delivered none of them
// within ReaderConfig.StallAfter, ReaderConfig.Recreate times.
var ErrReadStalled = errors.New("stream read stalled")

// ReaderConfig says what a Reader reads. Zero fields take their defaults.
type ReaderConfig struct {
	// Stream is the stream's name (required).
	Stream string
	// Subject filters what is read (default every intent:
	// events.AllSubjects; a route's: events.RouteSubjects(route)).
	Subject string
	// From is the first sequence read (default 1).
	From uint64
	// Until, when set, ends a bounded read there (at most where the
	// stream ends): a reader that took the stream's length already reads
	// the same messages. 0: where the stream ends when the read opens.
	Until uint64
	// LastPerSubject reads the last message of each subject, then the
	// messages that follow up to the end: for every subject, the last
	// message a Read delivers is the subject's last up to End.
	LastPerSubject bool
	// HeadersOnly delivers headers without bodies.
	HeadersOnly bool
	// Follow reads on past the end, as new messages come, until ctx
	// ends (the projector); End is then 0.
	Follow bool
	// Batch is how many messages are pulled at once (default 256).
	Batch int
	// StallAfter: when nothing arrives this long while the stream's leader
	// holds a message after the last one delivered, the consumer sits on a
	// copy that lags (or is stuck) and is made again, after that message
	// (default 5s).
	StallAfter time.Duration
	// Recreate bounds the consumers a bounded read makes again before it
	// fails with ErrReadStalled (default 5). A Follow read never gives up.
	Recreate int
	// NamePrefix names the (ephemeral) consumers (default "settle_read").
	NamePrefix string
}

func (c ReaderConfig) withDefaults() ReaderConfig {
	c.Subject, c.From, c.Batch = cmp.Or(c.Subject, events.AllSubjects), cmp.Or(c.From, 1), cmp.Or(c.Batch, 256)
	c.StallAfter, c.Recreate = cmp.Or(c.StallAfter, 5*time.Second), cmp.Or(c.Recreate, 5)
	c.NamePrefix = cmp.Or(c.NamePrefix, "settle_read")
	return c
}

// Validate checks the config (after defaults), naming every field that
// is wrong.
func (c ReaderConfig) Validate() error {
	var errs []error
	check := func(wrong bool, format string, args ...any) {
		if wrong {
			errs = append(errs, errors.Errorf("reader config: "+format, args...))
		}
	}
	check(c.Stream == "" || strings.ContainsAny(c.Stream, ".*> \t\r\n"), "Stream: %q is not a stream name", c.Stream)
	check(strings.ContainsAny(c.Subject, " \t\r\n"), "Subject: %q is not a subject filter", c.Subject)
	check(c.Batch < 1 || c.Batch > 1<<16, "Batch: %d is outside 1..65536", c.Batch)
	check(c.StallAfter < 0, "StallAfter: %s is negative", c.StallAfter)
	check(c.Recreate < 0, "Recreate: %d is negative", c.Recreate)
	check(c.Follow && c.Until > 0, "Until: a Follow read has no end")
	check(c.LastPerSubject && c.From > 1, "From: a LastPerSubject read starts at the first message")
	return errors.Join(errs...)
}

// StreamMsg is one message a Reader delivers.
type StreamMsg struct {
	Seq     uint64
	Subject string
	Header  nats.Header
	Data    []byte
	// Pending is how many messages the consumer says follow this one (a
	// hint for batching; the end is the Reader's to tell).
	Pending uint64
}

// Reader reads a stream in sequence order to its end, coping with a copy
// that lags. Contract:
//
//   - OpenReader asks the stream (its leader, on a replicated stream)
//     where the read ends (End): the last sequence of Subject when it is
//     called (or Until, if that is before). Next delivers, in stream order and each once, the messages
//     of Subject from From (with LastPerSubject: each subject's last
//     message, then what follows) up to End, then io.EOF.
//   - When the consumer has nothing more before End, the leader is asked
//     whether a message of Subject follows the last one delivered. If one
//     does, the read goes on (the consumer's copy was catching up; one
//     that delivers nothing within StallAfter is made again after the
//     last message delivered, Recreate times at most, then
//     ErrReadStalled). If none does, the read ends there, before End:
//     the stream's state counts messages it does not hold (a cut block
//     file); Last tells where the messages ended.
//   - A Follow read has no end: it delivers what comes until ctx ends,
//     and makes its consumer again whenever it delivers nothing within
//     StallAfter while the leader holds more.
//
// A Reader is used by one goroutine; Close releases its consumer.
type Reader struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	cfg    ReaderConfig
	end    uint64

	cons jetstream.Consumer
	it   jetstream.MessagesContext
	// last is the last sequence delivered (From-1 before the first);
	// started: a message was delivered by this reader.
	last    uint64
	started bool
	// settled: the end is known to be reached (io.EOF from now on).
	settled   bool
	recreated uint64 // see Recreated
	// wait bounds the consumer's waits for a message (next).
	wait stallWait
}

// OpenReader opens a read of cfg.Stream (see Reader).
func OpenReader(ctx context.Context, js jetstream.JetStream, cfg ReaderConfig) (*Reader, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st, err := existingStream(ctx, js, cfg.Stream, "open reader")
	if err != nil {
		return nil, err
	}
	r := &Reader{js: js, stream: st, cfg: cfg, last: cfg.From - 1}
	if !cfg.Follow {
		if r.end, err = r.lastOf(ctx); err != nil {
			return nil, err
		}
		if cfg.Until > 0 {
			r.end = min(r.end, cfg.Until)
		}
		if r.end < cfg.From {
			r.settled = true // nothing to read
		}
	}
	return r, nil
}

// lastOf asks the stream's leader for the last sequence of the subject.
func (r *Reader) lastOf(ctx context.Context) (uint64, error) {
	if r.cfg.Subject == events.AllSubjects || r.cfg.Subject == ">" {
		info, err := r.stream.Info(ctx)
		if err != nil {
			return 0, errors.Errorf("read %s: stream info: %w", r.cfg.Stream, err)
		}
		return info.State.LastSeq, nil
	}
	m, err := r.stream.GetLastMsgForSubject(ctx, r.cfg.Subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	case err != nil:
		return 0, errors.Errorf("read %s: last message of %s: %w", r.cfg.Stream, r.cfg.Subject, err)
	}
	return m.Sequence, nil
}

// End is where a bounded read ends (0 for a Follow read).
func (r *Reader) End() uint64 { return r.end }

// Recreated counts the consumers made again because their copy lagged
// (or stalled).
func (r *Reader) Recreated() uint64 { return r.recreated }

// Close stops the read and deletes its consumer (Next makes one again).
func (r *Reader) Close() {
	r.wait.stop()
	if r.it != nil {
		r.it.Stop()
		r.it = nil
	}
	if r.cons != nil {
		if ci := r.cons.CachedInfo(); ci != nil {
			dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = r.js.DeleteConsumer(dctx, r.cfg.Stream, ci.Name)
			cancel()
		}
		r.cons = nil
	}
}

// consumer makes the reader's consumer: from the start (first), or after
// the last message delivered.
func (r *Reader) consumer(ctx context.Context) error {
	oc := jetstream.OrderedConsumerConfig{
		FilterSubjects:    []string{r.cfg.Subject},
		HeadersOnly:       r.cfg.HeadersOnly,
		InactiveThreshold: time.Minute,
		NamePrefix:        r.cfg.NamePrefix + "_" + nuid.Next(),
	}
	switch {
	case !r.started && r.cfg.LastPerSubject:
		oc.DeliverPolicy = jetstream.DeliverLastPerSubjectPolicy
	case r.last+1 <= 1:
		oc.DeliverPolicy = jetstream.DeliverAllPolicy
	default:
		oc.DeliverPolicy, oc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, r.last+1
	}
	cons, err := r.js.OrderedConsumer(ctx, r.cfg.Stream, oc)
	if err != nil {
		return errors.Errorf("read %s: ordered consumer: %w", r.cfg.Stream, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(r.cfg.Batch))
	if err != nil {
		return errors.Errorf("read %s: ordered consumer: %w", r.cfg.Stream, err)
	}
	r.cons, r.it = cons, it
	return nil
}

// Next returns the next message, or io.EOF after the last one (see
// Reader).
func (r *Reader) Next(ctx context.Context) (StreamMsg, error) {
	stalls := 0
	for {
		if r.settled {
			return StreamMsg{}, io.EOF
		}
		if r.it == nil {
			if err := r.consumer(ctx); err != nil {
				return StreamMsg{}, err
			}
		}
		m, err := r.next(ctx)
		if err == nil {
			return m, nil
		}
		if ctx.Err() != nil {
			return StreamMsg{}, errors.Errorf("read %s: %w", r.cfg.Stream, ctx.Err())
		}
		if !errors.Is(err, errNothingYet) {
			return StreamMsg{}, err
		}
		// Nothing within StallAfter. The end, or a copy that lags?
		more, err := MessageAfter(ctx, r.stream, r.last, r.cfg.Subject)
		if err != nil {
			return StreamMsg{}, err
		}
		if !more {
			if !r.cfg.Follow {
				r.settled = true
			}
			continue
		}
		stalls++
		if !r.cfg.Follow && stalls > r.cfg.Recreate {
			return StreamMsg{}, errors.Errorf("read %s: the stream's leader holds messages after %d, and %d consumer(s) delivered none of them: %w",
				r.cfg.Stream, r.last, stalls, ErrReadStalled)
		}
		r.Close() // made again, placed anew, after the last message delivered
		r.recreated++
	}
}

// errNothingYet: no message arrived within StallAfter.
var errNothingYet = errors.New("nothing yet")

// stallWait is a deadline context for the consumer's waits, made again
// only when it ends or its parent changes, not for every message. A wait
// that its deadline, set for an earlier message, ends too soon is resumed
// with a deadline of its own, so a wait still ends only once nothing came
// for StallAfter.
type stallWait struct {
	ctx    context.Context
	cancel context.CancelFunc
	parent context.Context
}

// get returns the wait context under parent, with a deadline at the
// latest at deadline.
func (w *stallWait) get(parent context.Context, deadline time.Time) context.Context {
	if w.ctx == nil || w.parent != parent {
		w.stop()
		w.parent = parent
		w.ctx, w.cancel = context.WithDeadline(parent, deadline)
	}
	return w.ctx
}

// stop releases the context, if any.
func (w *stallWait) stop() {
	if w.cancel != nil {
		w.cancel()
	}
	w.ctx, w.cancel, w.parent = nil, nil, nil
}

// next takes one message from the consumer, waiting at most StallAfter.
func (r *Reader) next(ctx context.Context) (StreamMsg, error) {
	deadline := time.Now().Add(r.cfg.StallAfter)
	for {
		wctx := r.wait.get(ctx, deadline)
		m, err := r.it.Next(jetstream.NextContext(wctx))
		if err != nil {
			if wctx.Err() != nil && ctx.Err() == nil {
				r.wait.stop()
				if time.Now().Before(deadline) {
					continue // the deadline of an earlier wait: wait on
				}
				return StreamMsg{}, errNothingYet
			}
			return StreamMsg{}, errors.Errorf("read %s after %d: %w", r.cfg.Stream, r.last, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return StreamMsg{}, errors.Errorf("read %s: message metadata: %w", r.cfg.Stream, err)
		}
		seq := md.Sequence.Stream
		if seq <= r.last && r.started {
			continue // delivered already (a consumer made again)
		}
		if !r.cfg.Follow && seq > r.end {
			r.settled = true // appended since the read began: past the end
			return StreamMsg{}, io.EOF
		}
		r.last, r.started = seq, true
		out := StreamMsg{Seq: seq, Subject: m.Subject(), Header: m.Headers(), Data: m.Data(), Pending: md.NumPending}
		if !r.cfg.Follow {
			switch {
			case seq >= r.end:
				r.settled = true
			case md.NumPending == 0:
				// The consumer's copy holds nothing more: the end, or a
				// copy that lags? The leader tells.
				more, err := MessageAfter(ctx, r.stream, seq, r.cfg.Subject)
				if err != nil {
					return StreamMsg{}, err
				}
				r.settled = !more
			}
		}
		return out, nil
	}
}

// MessageAfter reports whether st holds a message on subject (a filter;
// "" for any) after seq, asking the stream's leader (a message get; on a
// replicated stream settle allows no direct get, which any peer could
// answer).
func MessageAfter(ctx context.Context, st jetstream.Stream, seq uint64, subject string) (bool, error) {
	subject = cmp.Or(subject, ">")
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := st.GetMsg(gctx, seq+1, jetstream.WithGetMsgSubject(subject))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	}
	return false, errors.Errorf("is there a message after %d: %w", seq, err)
}
