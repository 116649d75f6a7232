package ledger

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/fsm"
	"github.com/settle-dev/settle/internal/errkind"
)

// Sentinel errors of the store.
var (
	// ErrConflict: another writer appended this version first (per-subject CAS).
	ErrConflict = errors.New("append conflict")
	// ErrNotFound: the intent has no history.
	ErrNotFound = errors.New("intent not found")
	// ErrAppendUnresolved: an append's ack was lost and the log could not be
	// read to tell whether it landed. The event may or may not be on the log.
	ErrAppendUnresolved = errors.New("append outcome unresolved")
	// ErrCorruptHistory: the log holds an event this version cannot decode or
	// a history the fsm refuses.
	ErrCorruptHistory = errors.New("corrupt history")
	// ErrHistoryLost: the intent lost events in a log loss an operator
	// accepted (History.Hold names it), and what the log still holds of it
	// cannot be folded. Nothing can be decided or written for it.
	ErrHistoryLost = errors.New("history lost in an accepted log loss")
)

// ConflictError says which version was lost and what the log has now.
type ConflictError struct {
	IntentID string
	Version  uint64
	// LastMsgID is the Nats-Msg-Id now last on the subject ("" if none).
	LastMsgID string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("append conflict: %s version %d: the log's last event is %q", e.IntentID, e.Version, e.LastMsgID)
}

func (e *ConflictError) Unwrap() error { return ErrConflict }

// StoreConfig configures the stream.
type StoreConfig struct {
	// Stream is the stream name (default SETTLE_INTENTS).
	Stream string
	// Replicas is 1 (single node) or 3 (cluster).
	Replicas int
	// DuplicateWindow is how long Nats-Msg-Id dedup is remembered; a lost-ack
	// retry must happen inside it (default 10m).
	DuplicateWindow time.Duration
	// AppendAttempts bounds publish attempts when an ack is lost (default 5).
	AppendAttempts int
	// AppendTimeout bounds one publish attempt (default 5s).
	AppendTimeout time.Duration
	// BatchMax bounds the messages of one group-commit batch (default 256;
	// at most 1000, the server's limit). Below 2 every Append is published
	// by itself.
	BatchMax int
	// BatchMin, when set, is the fewest messages a flush must hold to go as
	// an atomic batch; a smaller flush publishes each append alone. 0
	// (default): decided by measuring what batches and lone appends cost
	// (see batch.go).
	BatchMin int
	// BatchFlushers is how many batches may be in flight at once (0: the
	// default, two; see batch.go, pipelineMin).
	BatchFlushers int
	// BatchBytes bounds the encoded size of one batch (default 4 MiB; a
	// single larger append still goes, alone in its batch).
	BatchBytes int
	// Writer, when set, names this process on every message it appends:
	// the append id (header Settle-Append-Id) is Writer + "." + a random
	// id (WriterOf reads it back), so that a log written by two processes
	// at once where only one may write (an embedded store) names both.
	// [A-Za-z0-9_-], at most 64 bytes.
	Writer string
}

// DefaultStoreConfig returns the defaults.
func DefaultStoreConfig() StoreConfig {
	return StoreConfig{Stream: "SETTLE_INTENTS", Replicas: 1, DuplicateWindow: 10 * time.Minute, AppendAttempts: 5, AppendTimeout: 5 * time.Second,
		BatchMax: 256, BatchBytes: 4 << 20}
}

// ForServerSync returns c adapted to how the server syncs its store. One
// that fsyncs every write (sync_interval: always) makes an atomic batch pay
// (one sync for all its messages): c is returned unchanged, the group
// commit deciding by measurement. One that does not acknowledges a lone
// publish after tens of microseconds and spends milliseconds on every
// atomic batch, so every append is published by itself (BatchMax 1),
// concurrently. The choice changes speed only, never what an append means.
func (c StoreConfig) ForServerSync(syncsEveryWrite bool) StoreConfig {
	if !syncsEveryWrite {
		c.BatchMax = 1
	}
	return c
}

// flushers is BatchFlushers with its default applied.
func (c StoreConfig) flushers() int {
	if c.BatchFlushers > 0 {
		return c.BatchFlushers
	}
	return 2
}

// Validate checks the config.
func (c StoreConfig) Validate() error {
	var err error
	check := func(wrong bool, format string, args ...any) {
		if wrong && err == nil {
			err = errors.Errorf("store config: "+format, args...)
		}
	}
	check(c.Stream == "", "Stream: is required")
	check(c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5, "Replicas: %d (want 1, 3 or 5)", c.Replicas)
	check(c.DuplicateWindow < time.Minute, "DuplicateWindow: %s is shorter than 1m", c.DuplicateWindow)
	check(c.AppendAttempts < 1, "AppendAttempts: must be ≥ 1")
	check(c.AppendTimeout <= 0, "AppendTimeout: must be positive")
	check(len(c.Writer) > 64 || strings.Trim(c.Writer, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "",
		"Writer: %q (want [A-Za-z0-9_-], at most 64 bytes)", c.Writer)
	check(c.BatchMax < 0 || c.BatchMax > maxAtomicBatch, "BatchMax: %d (want 0 … %d, the server's atomic batch limit)", c.BatchMax, maxAtomicBatch)
	if c.BatchMax >= 2 {
		check(c.BatchMin < 0 || c.BatchMin > c.BatchMax, "BatchMin: %d (want 0 … BatchMax %d)", c.BatchMin, c.BatchMax)
		check(c.BatchFlushers < 0 || c.BatchFlushers > 16, "BatchFlushers: %d (want 0 for the default, or 1 … 16)", c.BatchFlushers)
		check(c.BatchBytes < 1, "BatchBytes: must be positive")
	}
	return err
}

// maxAtomicBatch is nats-server's default limit on the messages of one
// atomic batch.
const maxAtomicBatch = 1000

// History is an intent's events and the sequence of the last message on
// its subject (the CAS token of the next append).
type History struct {
	Route   string
	Events  []events.Event
	LastSeq uint64
	// Hold is the intent's hold marker (events.Hold), when its subject
	// carries one (a log loss an operator accepted). It is not an event.
	Hold *events.Hold
	// Broken, on a held history only, says why what the log holds of the
	// intent cannot be folded (its first events, or some in between, are
	// gone); Events are then the ones before the break. Fold fails with
	// ErrHistoryLost.
	Broken string
}

// Clone returns a copy of h that shares no slice with it (the events
// themselves are immutable).
func (h *History) Clone() *History {
	c := *h
	c.Events = append([]events.Event(nil), h.Events...)
	return &c
}

// Fold folds the history. A held history that cannot be folded (Broken,
// or a marker alone) fails with ErrHistoryLost.
func (h *History) Fold() (*fsm.Intent, error) {
	if h.Hold != nil && (h.Broken != "" || len(h.Events) == 0) {
		why := h.Broken
		if why == "" {
			why = "the log holds none of its events"
		}
		return nil, errors.Errorf("%s: %w: %s; lost: %s", h.Hold.IntentID, ErrHistoryLost, why, h.Hold.Named())
	}
	if len(h.Events) == 0 {
		return nil, ErrNotFound
	}
	i, err := fsm.Fold(h.Events)
	if err != nil {
		if h.Hold != nil {
			return nil, errors.Errorf("%s: %w: %v; lost: %s", h.Hold.IntentID, ErrHistoryLost, err, h.Hold.Named())
		}
		return nil, errkind.Wrap(ErrCorruptHistory, err)
	}
	return i, nil
}

// Store is the JetStream event store: one stream, one subject per intent.
// It is safe for concurrent use.
type Store struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	cfg    StoreConfig
	// dupInProcess counts 10158 answers (see Append).
	dupInProcess atomic.Int64
	// batch is the group commit (batch.go).
	batch *batcher
	// atomic: the stream allows atomic batches (the server knows them).
	atomic bool
	// loads counts history reads (Loads).
	loads atomic.Int64
	// health is the write gate and the appends' record (health.go).
	health writeHealth
}

// OpenStore creates or updates the stream and returns the store. A
// stream it creates carries this build's log format
// (events.FormatMetadata); an existing stream of another format is
// refused (CheckFormat, events.ErrLogFormat) and left as it is.
func OpenStore(ctx context.Context, js jetstream.JetStream, cfg StoreConfig) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sc := jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "settle intents: one subject per intent, every lifecycle event",
		Subjects:    []string{events.AllSubjects},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		Replicas:    cfg.Replicas,
		Duplicates:  cfg.DuplicateWindow,
		DenyDelete:  true,
		DenyPurge:   true,
		MaxMsgSize:  events.MaxEventSize + 4096,
		// Group commit publishes atomic batches (batch.go).
		AllowAtomicPublish: true,
		// Reads (Load, the lost-ack resolution) as direct gets: the raw
		// message, no JSON API round. Only on a single replica: on a
		// replicated stream a follower may answer, and may lag.
		AllowDirect: cfg.Replicas == 1,
	}
	sc.Metadata = map[string]string{events.FormatMetadata: events.FormatMetadataValue}
	st, err := ensureStream(ctx, js, sc)
	if errors.Is(err, events.ErrLogFormat) {
		return nil, errors.Wrap(err, "open store")
	}
	if err != nil {
		return nil, errors.WithHint(errors.Wrapf(err, "open store: stream %s", cfg.Stream), openStoreHint(err, cfg.Replicas))
	}
	s := &Store{js: js, stream: st, cfg: cfg}
	s.batch = newBatcher(s)
	// A server that does not know atomic batches would store Nats-Batch-*
	// messages one by one: then every append goes alone.
	s.atomic = st.CachedInfo().Config.AllowAtomicPublish
	return s, nil
}

// JetStream API error codes nats.go has no name for, both answered by a
// cluster still forming.
const (
	// JSErrCodeClusterNoPeers: "no suitable peers for placement" — fewer
	// servers online (or heard from by the meta leader) than the stream's
	// replicas, or none with room for it.
	JSErrCodeClusterNoPeers jetstream.ErrorCode = 10005
	// JSErrCodeClusterNotAvail: "JetStream system temporarily
	// unavailable" (no meta leader).
	JSErrCodeClusterNotAvail jetstream.ErrorCode = 10008
)

// ClusterNotReady reports whether a JetStream API request (opening the
// store, creating a stream or consumer) failed for want of an answer in
// time — a cluster electing a leader may leave a request unanswered — or
// was refused by a cluster not ready to place a stream yet (10005, 10008):
// failures that waiting, and asking again, can end. A refusal waiting
// cannot change (JetStream off, no permission, no room) is not.
func ClusterNotReady(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == JSErrCodeClusterNoPeers || apiErr.ErrorCode == JSErrCodeClusterNotAvail)
}

// openStoreHint is the hint of a failed OpenStore: what the server
// answered decides what the operator should look at.
func openStoreHint(err error, replicas int) string {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == JSErrCodeClusterNoPeers {
		return fmt.Sprintf("the stream has %d replicas: the NATS cluster needs %d JetStream servers online, routed to each other and with room for it (the answer above says why servers were passed over); or lower --replicas", replicas, replicas)
	}
	return "the NATS server must run JetStream (nats-server -js, or jetstream {} in its config) and let this user manage streams"
}

// ensureStream creates the stream when it is missing and updates it only
// when its configuration differs (a needless update races with consumers
// being created by the many workers that open the store at once). A stream
// of another log format is refused before anything is changed.
func ensureStream(ctx context.Context, js jetstream.JetStream, sc jetstream.StreamConfig) (jetstream.Stream, error) {
	st, err := js.Stream(ctx, sc.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		st, err = js.CreateStream(ctx, sc)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			st, err = js.Stream(ctx, sc.Name) // created meanwhile by another process
		}
		if err != nil {
			return nil, err
		}
		if sameStreamConfig(st.CachedInfo().Config, sc) {
			return st, nil
		}
	}
	if err != nil {
		return nil, err
	}
	if err := CheckFormat(st); err != nil {
		return nil, err
	}
	have := st.CachedInfo().Config
	if sameStreamConfig(have, sc) {
		return st, nil
	}
	// The update keeps the stream's own metadata: the format is set when
	// a stream is created, never added to one made before.
	sc.Metadata = maps.Clone(have.Metadata)
	maps.DeleteFunc(sc.Metadata, func(k, _ string) bool { return strings.HasPrefix(k, "_nats.") })
	return js.UpdateStream(ctx, sc)
}

func sameStreamConfig(have, want jetstream.StreamConfig) bool {
	return have.Description == want.Description && slices.Equal(have.Subjects, want.Subjects) &&
		have.Storage == want.Storage && have.Retention == want.Retention && have.Discard == want.Discard &&
		have.Replicas == want.Replicas && have.Duplicates == want.Duplicates &&
		have.DenyDelete == want.DenyDelete && have.DenyPurge == want.DenyPurge && have.MaxMsgSize == want.MaxMsgSize &&
		have.AllowAtomicPublish == want.AllowAtomicPublish && have.AllowDirect == want.AllowDirect
}

// Stream returns the underlying stream.
func (s *Store) Stream() jetstream.Stream { return s.stream }

// CheckFormat refuses a stream of another log format than this build's
// (events.CheckLogFormat on its metadata): a *events.FormatError matching
// events.ErrLogFormat, naming both formats and what to do.
func CheckFormat(st jetstream.Stream) error {
	cfg := st.CachedInfo().Config
	return events.CheckLogFormat(cfg.Name, cfg.Metadata)
}

// CheckedStream opens the existing stream name and refuses one of another
// log format (CheckFormat); errors are prefixed with op.
func CheckedStream(ctx context.Context, js jetstream.JetStream, name, op string) (jetstream.Stream, error) {
	st, err := existingStream(ctx, js, name, op)
	if err != nil {
		return nil, err
	}
	if err := CheckFormat(st); err != nil {
		return nil, errors.Wrap(err, op)
	}
	return st, nil
}

// existingStream opens the existing stream name, whatever its format.
func existingStream(ctx context.Context, js jetstream.JetStream, name, op string) (jetstream.Stream, error) {
	if js == nil {
		return nil, errors.Errorf("%s: JetStream is nil", op)
	}
	st, err := js.Stream(ctx, name)
	if err != nil {
		return nil, errors.Errorf("%s: stream %s: %w", op, name, err)
	}
	return st, nil
}

// Loads counts the history reads of this store (Load, LoadIfAny,
// LoadByID, Refresh): each is one walk of one intent's subject.
func (s *Store) Loads() int64 { return s.loads.Load() }

// Connected reports whether the NATS connection is up (readiness).
func (s *Store) Connected() bool {
	nc := s.js.Conn()
	return nc != nil && nc.IsConnected()
}

// CheckStream asks the server for the stream's info (readiness).
func (s *Store) CheckStream(ctx context.Context) error {
	_, err := s.stream.Info(ctx)
	return err
}

// JetStream returns the JetStream context.
func (s *Store) JetStream() jetstream.JetStream { return s.js }

// Config returns the store config.
func (s *Store) Config() StoreConfig { return s.cfg }

// Append writes e on its intent's subject if the subject's last sequence is
// still expectedLastSeq (0: the subject must be empty), with Nats-Msg-Id =
// e.EventID. It returns the new event's stream sequence.
//
// A lost ack (timeout, disconnect) is an unknown result: Append retries the
// same publish (same Msg-Id, same CAS), and when the server answers a
// duplicate or "wrong last sequence" it reads the subject's last message:
// if it is ours, the first publish had landed and Append reports success;
// otherwise it returns a *ConflictError matching ErrConflict.
//
// Every Append call stamps its messages with its own random append id
// (header Settle-Append-Id): two writers that build byte-identical events
// are still told apart, so only the one whose message the log holds is told
// it won. Appends of concurrent callers are group-committed (batch.go).
func (s *Store) Append(ctx context.Context, route string, e events.Event, expectedLastSeq uint64) (uint64, error) {
	return s.appendAs(ctx, route, e, expectedLastSeq, s.newAppendID())
}

// AppendIDHeader carries the id of the Append call that published a message.
const AppendIDHeader = "Settle-Append-Id"

// newAppendID is a random id, after StoreConfig.Writer and a dot when set.
func (s *Store) newAppendID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	if s.cfg.Writer == "" {
		return hex.EncodeToString(b[:])
	}
	return s.cfg.Writer + "." + hex.EncodeToString(b[:])
}

// WriterOf is the StoreConfig.Writer of the process that appended a
// message with this append id ("" when it named none).
func WriterOf(appendID string) string {
	w, _, ok := strings.Cut(appendID, ".")
	if !ok {
		return ""
	}
	return w
}

func (s *Store) appendAs(ctx context.Context, route string, e events.Event, expectedLastSeq uint64, appendID string) (uint64, error) {
	u, err := s.newUnit(route, []events.Event{e}, expectedLastSeq, appendID)
	if err != nil {
		return 0, err
	}
	seqs, err := s.appendUnit(ctx, u)
	if err != nil {
		return 0, err
	}
	return seqs[0], nil
}

// publishOne publishes one encoded event alone, retrying a lost ack, and
// resolves a duplicate ack or CAS refusal by reading the log.
func (s *Store) publishOne(ctx context.Context, subject string, e events.Event, data []byte, expectedLastSeq uint64, appendID string) (uint64, error) {
	// The header as nats.Header.Set builds it, in one allocation.
	vals := make([]string, 4)
	vals[0], vals[1], vals[2], vals[3] = e.EventID, appendID, strconv.FormatUint(expectedLastSeq, 10), s.cfg.Stream
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{
		jetstream.MsgIDHeader:               vals[0:1:1],
		AppendIDHeader:                      vals[1:2:2],
		jetstream.ExpectedLastSubjSeqHeader: vals[2:3:3],
		jetstream.ExpectedStreamHeader:      vals[3:4:4],
	}}
	var lastErr error
	for attempt := 0; attempt < s.cfg.AppendAttempts; attempt++ {
		if attempt > 0 {
			if s.Blocked() != nil {
				break // the log cannot take it now (health.go): resolve by reading
			}
			select {
			case <-ctx.Done():
				return 0, errors.Wrapf(errkind.Wrap(ErrAppendUnresolved, lastErr), "append %s", e.EventID)
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			}
		}
		actx, cancel := context.WithTimeout(ctx, s.cfg.AppendTimeout)
		ack, err := s.publishAcked(actx, msg)
		cancel()
		if err == nil && !ack.Duplicate {
			return ack.Sequence, nil
		}
		if err == nil || isWrongLastSeq(err) {
			// A duplicate ack (R3) or a CAS refusal (R1) for our Msg-Id:
			// either our earlier publish landed, or a competitor's event
			// holds this version.
			return s.resolveCAS(ctx, subject, e, data, appendID)
		}
		if isDuplicateInProcess(err) {
			// A publish with our Msg-Id (ours retried, or a competitor's)
			// is proposed but not applied yet. Like a lost ack, it proves
			// nothing: publish the same message again after a pause.
			s.dupInProcess.Add(1)
			lastErr = err
			continue
		}
		if apiError(err) != nil {
			// A definite refusal by the server (not a lost ack).
			return 0, errors.Errorf("append %s: %w", e.EventID, err)
		}
		lastErr = err
	}
	// Every attempt lost its ack: read the log once more before giving up.
	if seq, err := s.resolveCAS(ctx, subject, e, data, appendID); err == nil {
		return seq, nil
	}
	return 0, errors.Wrapf(errkind.Wrap(ErrAppendUnresolved, lastErr), "append %s", e.EventID)
}

// resolveCAS decides whether e (encoded as data, published by the Append
// call appendID) is on the log. Msg-Ids are <intent>:<version>, so a
// competitor's event at the same version has the same Msg-Id, and may even
// have the same bytes: only our bytes under our append id prove the event
// is ours.
func (s *Store) resolveCAS(ctx context.Context, subject string, e events.Event, data []byte, appendID string) (uint64, error) {
	last, err := s.getLastMsgForSubject(ctx, subject)
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, &ConflictError{IntentID: e.IntentID, Version: e.Version}
		}
		return 0, errors.Wrapf(errkind.Wrap(ErrAppendUnresolved, err), "append %s: read last", e.EventID)
	}
	lastID := last.Header.Get(jetstream.MsgIDHeader)
	m := last
	if lastID != e.EventID {
		_, v, perr := events.ParseMsgID(lastID)
		if perr != nil || v < e.Version {
			return 0, &ConflictError{IntentID: e.IntentID, Version: e.Version, LastMsgID: lastID}
		}
		m, err = s.findVersion(ctx, subject, e.Version)
		if err != nil {
			return 0, &ConflictError{IntentID: e.IntentID, Version: e.Version, LastMsgID: lastID}
		}
	}
	if bytes.Equal(m.Data, data) && m.Header.Get(AppendIDHeader) == appendID {
		return m.Sequence, nil
	}
	return 0, &ConflictError{IntentID: e.IntentID, Version: e.Version, LastMsgID: lastID}
}

func (s *Store) findVersion(ctx context.Context, subject string, version uint64) (*jetstream.RawStreamMsg, error) {
	var seq uint64 = 1
	for v := uint64(1); ; v++ {
		m, err := s.getMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if err != nil {
			return nil, err
		}
		if v == version {
			return m, nil
		}
		seq = m.Sequence + 1
	}
}

// apiError is the server's refusal err carries, nil when it carries none
// (a lost ack, a timeout).
func apiError(err error) *jetstream.APIError {
	var e jetstream.JetStreamError
	if errors.As(err, &e) {
		return e.APIError()
	}
	return nil
}

func isDuplicateInProcess(err error) bool {
	e := apiError(err)
	return e != nil && e.ErrorCode == errCodeDuplicateInProcess
}

// errCodeDuplicateInProcess is JetStream's "duplicate message id is in
// process" (10158), which nats.go does not name.
const errCodeDuplicateInProcess jetstream.ErrorCode = 10158

func isWrongLastSeq(err error) bool {
	e := apiError(err)
	return e != nil && (e.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || e.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Load reads an intent's whole history (ErrNotFound when it has none).
// Events this version cannot decode make it fail with ErrCorruptHistory:
// an intent is never folded from a partial history.
func (s *Store) Load(ctx context.Context, route, intentID string) (*History, error) {
	h, err := s.LoadIfAny(ctx, route, intentID)
	if err == nil && h == nil {
		return nil, errors.Errorf("load %s: %w", intentID, ErrNotFound)
	}
	return h, err
}

// LoadIfAny is Load with (nil, nil) for an intent without history: a new
// intent is Execute's common case, not an error to format. A subject that
// holds only a hold marker (every event of the intent lost) is a history:
// no events and Hold set.
func (s *Store) LoadIfAny(ctx context.Context, route, intentID string) (*History, error) {
	return s.load(ctx, &History{Route: route}, intentID, events.Subject(route, intentID))
}

// load reads h from subject; (nil, nil) when the log holds nothing there.
func (s *Store) load(ctx context.Context, h *History, intentID, subject string) (*History, error) {
	s.loads.Add(1)
	if err := s.refresh(ctx, h, intentID, subject); err != nil {
		return nil, err
	}
	if len(h.Events) == 0 && h.Hold == nil {
		return nil, nil
	}
	return h, nil
}

// Refresh appends to h the intent's events stored after h.LastSeq. The
// stream is append-only (no delete, no purge), so a cached history only
// ever grows: refreshing costs one read per new event plus one.
func (s *Store) Refresh(ctx context.Context, h *History, intentID string) error {
	s.loads.Add(1)
	return s.refresh(ctx, h, intentID, events.Subject(h.Route, intentID))
}

// refresh reads the messages on subject after h.LastSeq into h. A
// subject with a wildcard for the route (LoadByID) takes h.Route from the
// first message; every later one must be on the same subject.
//
// A hold marker (events.HoldHeader) is not an event: it sets h.Hold. An
// event that cannot be read, or that is not the next version, makes the
// history corrupt (ErrCorruptHistory) — unless the subject carries a hold
// marker: the break is then the accepted loss, recorded in h.Broken, and
// the history is returned (History.Fold fails with ErrHistoryLost).
func (s *Store) refresh(ctx context.Context, h *History, intentID, subject string) error {
	seq := h.LastSeq + 1
	var broken error
	for {
		m, err := s.getMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return errors.Errorf("load %s: %w", intentID, err)
		}
		if h.Route == "" {
			route, _, err := events.ParseSubject(m.Subject)
			if err != nil {
				return errors.Wrapf(errkind.Wrap(ErrCorruptHistory, err), "load %s seq %d", intentID, m.Sequence)
			}
			h.Route, subject = route, m.Subject
		}
		if m.Subject != subject {
			return errors.Errorf("load %s seq %d: %w: the intent has events under two routes", intentID, m.Sequence, ErrCorruptHistory)
		}
		h.LastSeq, seq = m.Sequence, m.Sequence+1
		if m.Header.Get(events.HoldHeader) != "" {
			hold, err := events.DecodeHold(m.Data)
			if err != nil || hold.IntentID != intentID {
				return errors.Wrapf(errkind.Wrap(ErrCorruptHistory, errors.CombineErrors(err, errors.New("a hold marker of another intent"))),
					"load %s seq %d", intentID, m.Sequence)
			}
			h.Hold = &hold
			continue
		}
		if broken != nil || h.Broken != "" {
			continue // past the break: only a hold marker matters now
		}
		e, err := events.Decode(m.Data)
		if err != nil {
			broken = errors.Wrapf(errkind.Wrap(ErrCorruptHistory, err), "load %s seq %d", intentID, m.Sequence)
			continue
		}
		if e.IntentID != intentID || e.Version != uint64(len(h.Events))+1 {
			broken = errors.Errorf("load %s seq %d: %w: event %s out of order", intentID, m.Sequence, ErrCorruptHistory, e.EventID)
			continue
		}
		h.Events = append(h.Events, e)
	}
	if broken != nil {
		if h.Hold == nil {
			return broken
		}
		h.Broken = breakText(broken)
	}
	return nil
}

// breakText says why a held history cannot be folded, without the load's
// own words.
func breakText(err error) string {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(msg, "load ") {
		return rest
	}
	return msg
}

// LoadByID reads an intent's whole history by its id alone, under
// whichever route it was recorded (ErrNotFound when it has none): one
// walk of the intent's subject, the route a wildcard, with no lookup of
// the route first.
func (s *Store) LoadByID(ctx context.Context, intentID string) (*History, error) {
	if err := events.ValidateIntentID(intentID); err != nil {
		return nil, err
	}
	h, err := s.load(ctx, &History{}, intentID, events.SubjectPrefix+".*."+intentID)
	if err == nil && h == nil {
		return nil, errors.Errorf("load %s: %w", intentID, ErrNotFound)
	}
	return h, err
}

// AppendNext appends the event that follows intent (folded from h): it is
// checked against the fsm first (an illegal event never reaches the log),
// appended with CAS on h.LastSeq, then folded into intent and h. On error
// intent and h are unchanged.
func (s *Store) AppendNext(ctx context.Context, h *History, intent *fsm.Intent, actor string, at time.Time, attemptID string, d events.Data) error {
	e := events.New(intent.ID, intent.Version+1, at, actor, attemptID, d)
	next := intent.Clone()
	if err := next.Apply(e); err != nil {
		return errors.Errorf("append %s: %w", e.Type, err)
	}
	seq, err := s.Append(ctx, h.Route, e, h.LastSeq)
	if err != nil {
		return err
	}
	h.Events = append(h.Events, e)
	h.LastSeq = seq
	*intent = *next
	return nil
}
