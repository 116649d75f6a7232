package receipts

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"

	_ "modernc.org/sqlite" // the "sqlite" driver of OpenSQLite (pure Go)
)

// Downstream consumption: services that act on receipts (announce a post,
// ship an order, notify a user) subscribe to the log.
//
// Delivery is at least once. A handler can run more than once for the same
// event: after its error (Nak), after a crash between its effect and the
// ack, after an ack the server never confirmed, when two consumers (or a
// recreated one) deliver the same event. The exactly-once EFFECT pattern:
//
//  1. the handler keys its work by Delivery.EventID (the event's
//     Nats-Msg-Id, <intent_id>:<version>: stable across redeliveries,
//     consumers and replays of the stream);
//  2. it records that id in its own database, in a table where the id is
//     unique, IN THE SAME TRANSACTION as its effect;
//  3. if the id is already there, the transaction does nothing and the
//     handler returns nil, so the message is acked.
//
// Deduper implements steps 2 and 3 over database/sql. An effect outside
// that database (an HTTP call) needs its own idempotency key; use the
// EventID for it.

// DefaultReceiptTypes are the events that carry a receipt: the types
// Subscribe delivers unless SubscribeConfig.Types says otherwise.
var DefaultReceiptTypes = []events.Type{events.ReadbackPassed, events.WriteConfirmed, events.OperatorConfirmed}

// SubscribeConfig configures Subscribe. Zero fields take their defaults.
type SubscribeConfig struct {
	// Stream is the intents stream (default SETTLE_INTENTS).
	Stream string
	// Durable names the consumer on the server (required): subscribers
	// with the same Durable share its position and pending messages, so a
	// restarted service resumes where it left off.
	Durable string
	// Routes restricts delivery to these routes (FilterSubjects
	// settle.intents.<route>.*); empty means every route.
	Routes []string
	// Types are the event types handed to the handler (default
	// DefaultReceiptTypes). Other events of the routes are acked and
	// skipped: subjects are per intent, so types are filtered here.
	// IntentStarted is a new intent's IntentRecorded and first
	// WriteStarted in one message (events.Split gives the two): Types
	// naming either of them take it too, so that a handler written for
	// logs before it still sees every record and every start.
	Types []events.Type
	// AckWait is how long the server waits for an ack before redelivering
	// (default 30s). While the handler runs, the message is kept in
	// progress, so a slow handler is not redelivered to another subscriber.
	AckWait time.Duration
	// MaxDeliver bounds deliveries of one event (default -1: unlimited, so
	// no receipt is dropped because its handler kept failing).
	MaxDeliver int
	// RetryDelay is the delay of the first redelivery after a handler
	// error (default 1s); it doubles per delivery up to MaxRetryDelay
	// (default 1m).
	RetryDelay    time.Duration
	MaxRetryDelay time.Duration
	// Batch is how many messages are pulled ahead of the handler
	// (default 16). Pulled messages wait for their AckWait too.
	Batch int
	// Logger receives skipped and failed deliveries (default slog.Default()).
	Logger *slog.Logger
}

func (c SubscribeConfig) withDefaults() SubscribeConfig {
	c.Stream = cmp.Or(c.Stream, "SETTLE_INTENTS")
	if len(c.Types) == 0 {
		c.Types = DefaultReceiptTypes
	}
	c.AckWait = cmp.Or(c.AckWait, 30*time.Second)
	c.MaxDeliver = cmp.Or(c.MaxDeliver, -1)
	c.RetryDelay = cmp.Or(c.RetryDelay, time.Second)
	c.MaxRetryDelay = cmp.Or(c.MaxRetryDelay, time.Minute)
	c.Batch = cmp.Or(c.Batch, 16)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate checks the config (after defaults); errors name the field.
func (c SubscribeConfig) Validate() error {
	if c.Stream == "" || strings.ContainsAny(c.Stream, ".*> \t\r\n") {
		return errors.Errorf("subscribe config: Stream: %q is not a stream name", c.Stream)
	}
	if c.Durable == "" {
		return errors.New("subscribe config: Durable: is required")
	}
	if len(c.Durable) > 64 || strings.ContainsAny(c.Durable, ".*>/\\ \t\r\n") {
		return errors.Errorf("subscribe config: Durable: %q is not a consumer name (≤64 bytes, no . * > / \\ or white space)", c.Durable)
	}
	for k, r := range c.Routes {
		if err := events.ValidateToken(fmt.Sprintf("Routes[%d]", k), r); err != nil {
			return errors.Errorf("subscribe config: %w", err)
		}
	}
	for k, t := range c.Types {
		if !t.Known() {
			return errors.Errorf("subscribe config: Types[%d]: %q is not an event type", k, t)
		}
	}
	if c.AckWait < 0 || c.RetryDelay < 0 || c.MaxRetryDelay < c.RetryDelay {
		return errors.New("subscribe config: AckWait, RetryDelay must be positive and MaxRetryDelay ≥ RetryDelay")
	}
	if c.MaxDeliver < -1 {
		return errors.Errorf("subscribe config: MaxDeliver: %d (want -1 or ≥ 1)", c.MaxDeliver)
	}
	if c.Batch < 1 || c.Batch > 1000 {
		return errors.Errorf("subscribe config: Batch: %d is outside 1..1000", c.Batch)
	}
	return nil
}

// Delivery is one event handed to a handler.
type Delivery struct {
	Event events.Event
	Route string
	// EventID is the message's Nats-Msg-Id (<intent_id>:<version>, equal
	// to Event.EventID): the key of the exactly-once effect.
	EventID string
	// Seq is the event's stream sequence.
	Seq uint64
	// Redelivered: the server delivered this event to this consumer before
	// (NumDelivered > 1).
	Redelivered  bool
	NumDelivered uint64
}

// Receipt returns the receipt an event of a receipt type carries, or nil.
func (d Delivery) Receipt() *events.Receipt {
	var r events.Receipt
	switch b := d.Event.Data.(type) {
	case *events.ReadbackPassedData:
		r = b.Receipt
	case *events.WriteConfirmedData:
		r = b.Receipt
	case *events.OperatorConfirmedData:
		r = b.Receipt
	default:
		return nil
	}
	return &r
}

// Subscribe delivers the events of cfg.Types on cfg.Routes to handler,
// through the durable pull consumer cfg.Durable (created or updated,
// explicit acks, from the start of the stream when new). Each event is
// handed over at least once, one at a time per subscriber:
//
//   - handler returns nil: the message is acked and Subscribe waits for
//     the server to confirm the ack (DoubleAck); an unconfirmed ack means a
//     redelivery, which the handler must treat as a no-op (see Deduper);
//   - handler returns an error or panics: the message is Nak'ed with a
//     delay (RetryDelay doubling per delivery, up to MaxRetryDelay);
//   - events of other types, and hold markers (events.HoldHeader: an
//     intent held after an accepted log loss), are acked and skipped; an
//     event of an unknown schema (a newer writer) is Nak'ed with
//     MaxRetryDelay so that an upgraded subscriber gets it; a malformed
//     event is terminated (it can never decode) and logged.
//
// The handler's context is ctx. stop stops fetching, waits for the
// handler in progress and its ack, and returns; cancelling ctx does the
// same without waiting. Unacked messages are redelivered after AckWait to
// any subscriber of the same Durable.
func Subscribe(ctx context.Context, js jetstream.JetStream, cfg SubscribeConfig, handler func(ctx context.Context, d Delivery) error) (stop func(), err error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if js == nil {
		return nil, errors.New("subscribe: JetStream is nil")
	}
	if handler == nil {
		return nil, errors.New("subscribe: handler is nil")
	}
	st, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		return nil, errors.Errorf("subscribe %s: %w", cfg.Stream, err)
	}
	if err := events.CheckLogFormat(cfg.Stream, st.CachedInfo().Config.Metadata); err != nil {
		return nil, errors.Wrap(err, "subscribe")
	}
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:        cfg.Durable,
		Description:    "settle downstream subscriber",
		FilterSubjects: events.RouteFilters(cfg.Routes),
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        cfg.AckWait,
		MaxDeliver:     cfg.MaxDeliver,
	})
	if err != nil {
		return nil, errors.Errorf("subscribe %s: consumer %s: %w", cfg.Stream, cfg.Durable, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(cfg.Batch))
	if err != nil {
		return nil, errors.Errorf("subscribe %s: consumer %s: %w", cfg.Stream, cfg.Durable, err)
	}
	s := &subscriber{cfg: cfg, handler: handler, types: map[events.Type]bool{}}
	for _, t := range cfg.Types {
		s.types[t] = true
		if t == events.IntentRecorded || t == events.WriteStarted {
			s.types[events.IntentStarted] = true
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.loop(ctx, it)
	}()
	go func() {
		select {
		case <-ctx.Done():
			it.Stop()
		case <-done:
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			it.Stop()
			<-done
		})
	}, nil
}

type subscriber struct {
	cfg     SubscribeConfig
	handler func(context.Context, Delivery) error
	types   map[events.Type]bool
}

func (s *subscriber) loop(ctx context.Context, it jetstream.MessagesContext) {
	for {
		m, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				if ctx.Err() == nil && errors.Is(err, jetstream.ErrConnectionClosed) {
					s.cfg.Logger.Warn("subscribe: connection closed; subscriber stopped", "durable", s.cfg.Durable)
				}
				return
			}
			s.cfg.Logger.Warn("subscribe: fetch error; continuing", "durable", s.cfg.Durable, "err", err)
			continue
		}
		s.handle(ctx, m)
	}
}

func (s *subscriber) handle(ctx context.Context, m jetstream.Msg) {
	log := s.cfg.Logger.With("durable", s.cfg.Durable, "subject", m.Subject())
	meta, err := m.Metadata()
	if err != nil {
		log.Error("subscribe: message without metadata; terminated", "err", err)
		_ = m.TermWithReason("no metadata")
		return
	}
	log = log.With("seq", meta.Sequence.Stream)
	route, _, err := events.ParseSubject(m.Subject())
	if err != nil {
		log.Error("subscribe: message on a foreign subject; terminated", "err", err)
		_ = m.TermWithReason("foreign subject")
		return
	}
	if m.Headers().Get(events.HoldHeader) != "" {
		_ = m.Ack() // a held intent's hold marker: no event, no receipt
		return
	}
	e, err := events.Decode(m.Data())
	if err != nil {
		switch de := events.Unreadable(m.Data(), err); de.Code() {
		case events.CodeUnknownType:
			_ = m.Ack() // no type this version knows can be one of s.types
		case events.CodeUnknownSchema:
			log.Warn("subscribe: event of an unknown schema; left for an upgraded subscriber", "field", de.Field)
			_ = m.NakWithDelay(s.cfg.MaxRetryDelay)
		default:
			log.Error("subscribe: malformed event; terminated", "code", de.Code(), "field", de.Field)
			_ = m.TermWithReason(de.Code())
		}
		return
	}
	if !s.types[e.Type] {
		_ = m.Ack()
		return
	}
	id := cmp.Or(m.Headers().Get(jetstream.MsgIDHeader), e.EventID)
	d := Delivery{Event: e, Route: route, EventID: id, Seq: meta.Sequence.Stream,
		Redelivered: meta.NumDelivered > 1, NumDelivered: meta.NumDelivered}
	if err := s.call(ctx, m, d); err != nil {
		delay := s.cfg.RetryDelay
		for n := uint64(1); n < meta.NumDelivered && delay < s.cfg.MaxRetryDelay; n++ {
			delay *= 2
		}
		delay = min(delay, s.cfg.MaxRetryDelay)
		log.Warn("subscribe: handler failed; redelivery scheduled", "event_id", id, "delivery", meta.NumDelivered, "delay", delay, "err", err)
		_ = m.NakWithDelay(delay)
		return
	}
	actx, cancel := context.WithTimeout(context.Background(), min(s.cfg.AckWait, 10*time.Second))
	defer cancel()
	if err := m.DoubleAck(actx); err != nil {
		log.Warn("subscribe: ack not confirmed; the event will be redelivered", "event_id", id, "err", err)
	}
}

// call runs the handler, keeping the message in progress while it runs and
// turning a panic into an error.
func (s *subscriber) call(ctx context.Context, m jetstream.Msg, d Delivery) (err error) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(max(s.cfg.AckWait/2, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
		if r := recover(); r != nil {
			err = errors.Errorf("handler panicked: %v", r)
		}
	}()
	return s.handler(ctx, d)
}

// --- exactly-once effects ---

// DefaultDedupTable is the table Deduper records applied event ids in.
const DefaultDedupTable = "settle_applied_events"

var sqlIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// Deduper applies an effect at most once per event id: the id is recorded
// in a table with a unique key in the same transaction as the effect, so a
// redelivered or duplicated event finds it and does nothing. The SQL is
// SQLite's (INSERT … ON CONFLICT DO NOTHING with ? placeholders); open the
// database with OpenSQLite, or with a busy timeout and immediate
// transactions, so that concurrent subscribers wait instead of failing.
type Deduper struct {
	db    *sql.DB
	table string
	now   func() time.Time
}

// NewDeduper creates the dedup table in db if needed (table "" means
// DefaultDedupTable).
func NewDeduper(ctx context.Context, db *sql.DB, table string) (*Deduper, error) {
	if db == nil {
		return nil, errors.New("deduper: db is nil")
	}
	table = cmp.Or(table, DefaultDedupTable)
	if !sqlIdent.MatchString(table) {
		return nil, errors.Errorf("deduper: table %q is not an SQL identifier", table)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
		event_id   TEXT PRIMARY KEY,
		applied_at TEXT NOT NULL
	)`); err != nil {
		return nil, errors.Errorf("deduper: create %s: %w", table, err)
	}
	return &Deduper{db: db, table: table, now: time.Now}, nil
}

// ApplyOnce runs effect in a transaction that also records eventID, unless
// eventID is recorded already. applied is true when effect ran and the
// transaction committed; false with a nil error when the event had been
// applied before. When effect fails, nothing is recorded and its error is
// returned: a later delivery applies it. effect must do its writes through
// tx (never through the *sql.DB) to be part of the same commit.
func (d *Deduper) ApplyOnce(ctx context.Context, eventID string, effect func(tx *sql.Tx) error) (applied bool, err error) {
	if eventID == "" {
		return false, errors.New("deduper: event id is empty")
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return false, errors.Errorf("deduper: begin: %w", err)
	}
	defer func() {
		if !applied {
			_ = tx.Rollback()
		}
	}()
	res, err := tx.ExecContext(ctx, `INSERT INTO `+d.table+` (event_id, applied_at) VALUES (?, ?) ON CONFLICT (event_id) DO NOTHING`,
		eventID, d.now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return false, errors.Errorf("deduper: record %s: %w", eventID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, errors.Errorf("deduper: record %s: %w", eventID, err)
	}
	if n == 0 {
		return false, nil
	}
	if effect != nil {
		if err := effect(tx); err != nil {
			return false, err
		}
	}
	if err := tx.Commit(); err != nil {
		return false, errors.Errorf("deduper: commit %s: %w", eventID, err)
	}
	return true, nil
}

// Applied reports whether eventID has been applied.
func (d *Deduper) Applied(ctx context.Context, eventID string) (bool, error) {
	var one int
	err := d.db.QueryRowContext(ctx, `SELECT 1 FROM `+d.table+` WHERE event_id = ?`, eventID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, errors.Errorf("deduper: %w", err)
	}
	return true, nil
}

// DefaultDBPath is where a program that was not told where to keep its
// database (the examples' --db) keeps it: name under settle-examples/ in
// the user's cache directory (os.UserCacheDir: $XDG_CACHE_HOME or
// ~/.cache on Linux), created 0700 — never the working directory. A
// cache may be cleared: a service whose dedup records must last names
// its own path.
func DefaultDBPath(name string) (string, error) {
	if name == "" || strings.ContainsAny(name, `/\`) {
		return "", errors.Errorf("default db path: name %q: must be a file name", name)
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", errors.Wrap(err, "default db path: no user cache directory; give the path")
	}
	dir = filepath.Join(dir, "settle-examples")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", errors.Wrap(err, "default db path")
	}
	return filepath.Join(dir, name), nil
}

// OpenSQLite opens (or creates) a SQLite database (modernc.org/sqlite, no
// cgo) set up for Deduper: WAL, synchronous FULL, a 10 s busy timeout and
// immediate transactions, so concurrent writers queue instead of failing.
func OpenSQLite(path string) (*sql.DB, error) {
	if path == "" || strings.ContainsRune(path, '?') {
		return nil, errors.Errorf("open sqlite: path %q: must be non-empty without '?'", path)
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		return nil, errors.Errorf("open sqlite %s: %w", path, err)
	}
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, errors.Errorf("open sqlite %s: %w", path, err)
	}
	return db, nil
}
