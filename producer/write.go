package producer

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/internal/errkind"
	"github.com/settle-dev/settle/internal/telemetry"
	"github.com/settle-dev/settle/ledger"
)

// WriterConfig configures a Writer.
type WriterConfig struct {
	// Actor names the writer on every event it appends (a reconciler's
	// worker name: the owner of the claims it writes under).
	Actor string
	// Now is the clock (times of the events appended).
	Now func() time.Time
	// OutcomeTimeout bounds recording an outcome after the call, even when
	// the caller's context is cancelled (default 30s).
	OutcomeTimeout time.Duration
	// OnCall, if set, is told of every external write attempt and its
	// classified outcome (for metrics). It must not block.
	OnCall CallObserver
	// Logger receives a WARN for every write whose outcome could not be
	// recorded, naming the intent (nil: slog.Default()).
	Logger *slog.Logger
}

// Validate checks the config, naming every field that is wrong.
func (c WriterConfig) Validate() error {
	var errs []error
	if c.Actor == "" {
		errs = append(errs, errors.New("writer config: Actor: is required"))
	}
	if c.Now == nil {
		errs = append(errs, errors.New("writer config: Now: is required"))
	}
	if c.OutcomeTimeout < 0 {
		errs = append(errs, errors.New("writer config: OutcomeTimeout: must not be negative"))
	}
	return errors.Join(errs...)
}

// CallObserver is told of every external write attempt, with its route and
// classified outcome (metrics). It must not block.
type CallObserver func(route string, outcome events.Type)

// Log is what a Writer appends to: a *ledger.Store, or a wrapper of one.
type Log interface {
	// AppendNext appends d as the next event of intent (history h) and
	// folds it in (ledger.Store.AppendNext).
	AppendNext(ctx context.Context, h *ledger.History, intent *fsm.Intent, actor string, at time.Time, attemptID string, d events.Data) error
}

var _ Log = (*ledger.Store)(nil)

// Writer makes the write step of an intent (a StepWrite of fsm.Decider):
// WriteStarted appended and acknowledged, then one call to the route's
// adapter, then the classified outcome. Execute makes its writes through
// one; a reconciler makes its own (NewWriter), with its worker's name and
// clock. It decides nothing: the step is the decider's.
type Writer struct {
	log Log
	cfg WriterConfig
}

// NewWriter returns a writer appending to log.
func NewWriter(log Log, cfg WriterConfig) (*Writer, error) {
	cfg.OutcomeTimeout = cmp.Or(cfg.OutcomeTimeout, 30*time.Second)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		return nil, errors.New("writer: log is nil")
	}
	return &Writer{log: log, cfg: cfg}, nil
}

// TakeWrite carries out a StepWrite of the decider: it appends the step's
// WriteStarted (CAS) and, only once that is acknowledged, calls the route's
// adapter once and appends the classified outcome, even if ctx is cancelled
// meanwhile (the call happened). realStart is the wall-clock time taken
// just before the decision: the call's own deadline is counted from it, so
// that a slow append never lets the call outlive the deadline recorded in
// WriteStarted (the injected clock may be a test's, the call's timeout is
// real time).
func (w *Writer) TakeWrite(ctx context.Context, route adapter.Route, h *ledger.History, intent *fsm.Intent, step fsm.Step, realStart time.Time) error {
	started, ok := step.Event.(*events.WriteStartedData)
	if step.Kind != fsm.StepWrite || !ok {
		return errors.Errorf("take write: step %s with %T is not a write", step.Kind, step.Event)
	}
	prepErr := render(route, intent, step)
	if err := w.appendTo(ctx, h, intent, step.AttemptID, started); err != nil {
		return err
	}
	return w.call(ctx, route, h, intent, step, prepErr, realStart)
}

// writeRequest is attempt's request of intent.
func writeRequest(intent *fsm.Intent, attemptID string) adapter.WriteRequest {
	return adapter.WriteRequest{
		IntentID: intent.ID, AttemptID: attemptID, RequestID: intent.Recorded.RequestID,
		IdempotencyKey: intent.Recorded.IdempotencyKey, Account: intent.Recorded.Account,
		ParentExternalID: intent.Recorded.ParentExternalID, Payload: intent.Recorded.Payload,
	}
}

// render records in a write step's WriteStarted the request it will send,
// when the route's adapter can render one apart from sending it
// (adapter.Preparer): a retry already carries its first attempt's (the
// decider's doing) and keeps it; an attempt without one is rendered now.
// A write that cannot be rendered gives the error its call would have
// given (the WriteStarted is still appended, and that error is its
// outcome, with no call); a rendering that cannot be recorded (it would
// hold a credential, or is too large) is left out, and the write is made
// with Write.
func render(route adapter.Route, intent *fsm.Intent, step fsm.Step) error {
	started := step.Event.(*events.WriteStartedData)
	pw, ok := route.Adapter.(adapter.Preparer)
	if !ok {
		// This adapter cannot send a recorded request: the attempt's
		// request is rendered by Write, and not recorded.
		started.Request = nil
		return nil
	}
	if started.Request != nil {
		return nil
	}
	sent, err := pw.PrepareWrite(writeRequest(intent, step.AttemptID))
	switch {
	case errors.Is(err, adapter.ErrNotRecordable):
		return nil
	case err != nil:
		return err
	case sent.Recordable():
		started.Request = &sent
	}
	return nil
}

// call makes the external call of a write step whose WriteStarted is on
// the log (and folded into intent), then appends the classified outcome.
// A step whose WriteStarted records its request sends that request
// (adapter.Preparer); prepErr, the error of rendering it, is the outcome
// without a call.
func (w *Writer) call(ctx context.Context, route adapter.Route, h *ledger.History, intent *fsm.Intent, step fsm.Step, prepErr error, realStart time.Time) (err error) {
	ctx, span := telemetry.Start(ctx, "settle.attempt")
	if span.On() {
		ctx = telemetry.WithIntent(ctx, intent.ID, step.AttemptID)
		span.Intent(intent.ID, route.Name)
		span.Str(telemetry.AttrAttemptID, step.AttemptID)
		defer func() { span.State(string(intent.State)); span.End(err) }()
	}
	// WriteStarted is acknowledged: only now may the request leave.
	callCtx, cancel := context.WithDeadline(adapter.Calling(ctx, route, adapter.KindWrite), realStart.Add(intent.Recorded.Policy.AttemptDeadline.D()))
	req := writeRequest(intent, step.AttemptID)
	var res adapter.WriteResult
	callErr := prepErr
	pw, canResend := route.Adapter.(adapter.Preparer)
	switch sent := step.Event.(*events.WriteStartedData).Request; {
	case prepErr != nil:
	case sent != nil && canResend:
		res, callErr = pw.WritePrepared(callCtx, req, *sent)
	default:
		res, callErr = route.Adapter.Write(callCtx, req)
	}
	cancel()
	outcome := Classify(intent, step.AttemptID, res, callErr)
	span.Str(telemetry.AttrOutcome, string(outcome.EventType()))
	if w.cfg.OnCall != nil {
		w.cfg.OnCall(route.Name, outcome.EventType())
	}
	// Record the outcome even if the caller gave up: the call happened.
	octx, ocancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.OutcomeTimeout)
	defer ocancel()
	if err := w.appendOutcome(octx, h, intent, step.AttemptID, outcome); err != nil {
		cmp.Or(w.cfg.Logger, slog.Default()).Warn("producer: the write was made but its outcome could not be recorded: reconciliation settles the intent (after the attempt's deadline, unless another worker recorded an outcome meanwhile)",
			"intent", intent.ID, "route", route.Name, "attempt", step.AttemptID, "outcome", string(outcome.EventType()), "err", err)
		return errkind.Wrap(ErrOutcomeNotRecorded, errors.Wrapf(err, "%s", step.AttemptID))
	}
	return nil
}

// appendTo appends the next event to h and folds it into intent.
func (w *Writer) appendTo(ctx context.Context, h *ledger.History, intent *fsm.Intent, attemptID string, d events.Data) error {
	return w.log.AppendNext(ctx, h, intent, w.cfg.Actor, w.cfg.Now(), attemptID, d)
}

// appendOutcome appends an attempt's outcome, as the span settle.record.
func (w *Writer) appendOutcome(ctx context.Context, h *ledger.History, intent *fsm.Intent, attemptID string, d events.Data) error {
	ctx, span := telemetry.Start(ctx, "settle.record")
	span.Intent(intent.ID, h.Route)
	span.Str(telemetry.AttrEvent, string(d.EventType()))
	err := w.appendTo(ctx, h, intent, attemptID, d)
	span.End(err)
	return err
}
