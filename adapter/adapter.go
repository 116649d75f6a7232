package adapter

import (
	"context"
	"encoding/json"
	"time"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/events"
)

// ErrNotFound is returned by Get and Status when the external system has no
// such object.
var ErrNotFound = errors.New("adapter: not found")

// ErrListingIncomplete is returned (wrapped) by Search when it could not
// prove that it reached the listing's end (max_pages reached, a short page
// without an end proof, a repeated cursor), with the records it did read:
// they can prove a write present, never absent.
var ErrListingIncomplete = errors.New("adapter: listing incomplete: its end was not proven")

// ErrAccountMismatch is returned (wrapped) by IdentityChecker.CheckAccount
// when the route's credential does not act as the intent's account: a write
// would be authored by someone else and could never be matched as ours.
var ErrAccountMismatch = errors.New("adapter: account is not the credential's identity")

// Capabilities tell the reconciler what a route's API offers.
type Capabilities struct {
	// IdempotencyKey: the API deduplicates writes by key for KeyRetention
	// from the key's first receipt.
	IdempotencyKey bool
	KeyRetention   time.Duration
	// StatusQuery: Status can look a write up by request id / key.
	StatusQuery bool
	// ReflectionDelay: how long a completed write may stay invisible to Status.
	ReflectionDelay time.Duration
	// Search: Search lists recent objects by account in a time window.
	Search bool
	// SearchOmitsBody: Search results lack the body; Get each candidate.
	SearchOmitsBody bool
	// SearchAuthoritative: every record Search returns carries the object's
	// author and (on routes whose writes have a parent) its parent, so a
	// window that closes without an exact match proves that no write of
	// this account with this payload landed in it. Only such a search may
	// license a retry; any other search can only find, never clear.
	SearchAuthoritative bool
	// Correlation: every write carries a marker naming its intent, and
	// Record.CorrelationID reads it back. An exact match then requires the
	// marker to name the intent, and a record naming another intent is
	// never ours.
	Correlation bool
}

// Frozen returns the capabilities as they are frozen into an intent when it
// is recorded (events.Capabilities): the guards and the decision function
// judge the intent by them for its whole life.
func (c Capabilities) Frozen() events.Capabilities {
	return events.Capabilities{
		IdempotencyKey: c.IdempotencyKey, KeyRetention: events.Duration(c.KeyRetention),
		StatusQuery: c.StatusQuery, ReflectionDelay: events.Duration(c.ReflectionDelay),
		Search: c.Search, SearchAuthoritative: c.Search && c.SearchAuthoritative,
		Correlation: c.Correlation,
	}
}

// FrozenCaps is what is frozen into an intent of a route served by a: its
// capabilities and the readback checks it declares (CheckDeclarer).
func FrozenCaps(a Adapter) events.Capabilities {
	c := a.Capabilities().Frozen()
	if d, ok := a.(CheckDeclarer); ok {
		c.Checks = append([]string(nil), d.ReadbackChecks()...)
	}
	return c
}

// WriteRequest is one attempt of an intent's write. IdempotencyKey is the
// same on every attempt; AttemptID differs. Payload is the frozen canonical
// payload.
type WriteRequest struct {
	IntentID         string
	AttemptID        string
	RequestID        string
	IdempotencyKey   string
	Account          string
	ParentExternalID string
	Payload          json.RawMessage
}

// WriteResult is what a success response said.
type WriteResult struct {
	ExternalID string
	LiveURL    string
	StatusCode int
}

// Record is an external object as read back: a search candidate or a
// readback. Payload is rebuilt in the shape of the intent payload so that
// its canon/v1 hash can be compared with the intent's.
type Record struct {
	ExternalID string
	LiveURL    string
	AuthorID   string
	ParentID   string
	// ParentFrom names the fields of the object ParentID was read from
	// ("" when the adapter does not say).
	ParentFrom string
	Visibility string
	CreatedAt  time.Time
	Payload    json.RawMessage
	// Partial is true when the listing omitted fields (body, assets):
	// the reconciler must Get the full record before matching.
	Partial bool
	// CorrelationID is the intent id the object's correlation marker names
	// ("" when it carries none); read only on routes with Correlation.
	CorrelationID string
}

// SearchQuery asks for objects written as Account in [From, To].
type SearchQuery struct {
	Account string
	From    time.Time
	To      time.Time
}

// Status states.
const (
	StatusCompleted  = "completed"
	StatusProcessing = "processing"
	StatusFailed     = "failed"
)

// StatusResult is the external system's own record of a write.
type StatusResult struct {
	State      string // completed | processing | failed
	ExternalID string
	LiveURL    string
	// Version is the object's current version; AppliedVersion the version
	// this write produced. They differ when someone changed it later.
	Version        string
	AppliedVersion string
	// Payload is the change as the system applied it (canonical shape).
	Payload        json.RawMessage
	Code           string   // failure code
	PartialEffects []string // effects that exist despite a failure
	ReceivedAt     time.Time
	// CorrelationID is the intent id the object's correlation marker names
	// ("" when it carries none); read only on routes with Correlation.
	CorrelationID string
	// Account is the account (immutable id) the external system records
	// the write under, "" when the API does not say. The decision refuses
	// a result naming another account, so fill it when the API tells.
	Account string
}

// StatusQuery identifies a write for Status.
type StatusQuery struct {
	RequestID      string
	IdempotencyKey string
	Account        string
}

// Writer makes the external write. It must not retry: one call, one
// attempt. Errors are *CallError (or wrap one); anything else is treated as
// unknown.
type Writer interface {
	Write(ctx context.Context, req WriteRequest) (WriteResult, error)
}

// Preparer is optional: a Writer that can render a write without sending
// it, and send a rendering made before. The producer records the first
// attempt's rendering in its WriteStarted and sends every attempt from
// that record, so a retry sends the first attempt's bytes, never a request
// rendered again from a route edited since.
//
// PrepareWrite does no I/O, and its rendering holds no credential: the
// path is relative to the route's base URL, and WritePrepared adds the
// credential, idempotency key and attempt id headers. A write that cannot
// be rendered fails as Write would (NotSent); one that cannot be recorded
// without a credential is ErrNotRecordable (the producer then sends with
// Write). WritePrepared classifies its answer exactly as Write does.
type Preparer interface {
	PrepareWrite(req WriteRequest) (events.SentRequest, error)
	WritePrepared(ctx context.Context, req WriteRequest, p events.SentRequest) (WriteResult, error)
}

// ErrNotRecordable is returned (wrapped) by PrepareWrite when the
// rendering would carry a credential: it is not recorded, and the write
// is sent with Write.
var ErrNotRecordable = errors.New("adapter: the rendered write cannot be recorded without a credential")

// Searcher lists candidates read-only. A listing whose end is not proven
// returns the records read so far and an error wrapping
// ErrListingIncomplete; any other error means nothing was listed.
type Searcher interface {
	Search(ctx context.Context, q SearchQuery) ([]Record, error)
}

// Reader reads one object back (ErrNotFound when absent) and probes a live
// URL without credentials, returning its HTTP status.
type Reader interface {
	Get(ctx context.Context, externalID string) (Record, error)
	Probe(ctx context.Context, liveURL string) (int, error)
}

// StatusQuerier is optional: APIs that can look a write up by id.
type StatusQuerier interface {
	Status(ctx context.Context, q StatusQuery) (StatusResult, error)
}

// Adapter is the whole port. Implementations that also implement
// StatusQuerier must say so in Capabilities.
type Adapter interface {
	Capabilities() Capabilities
	Writer
	Searcher
	Reader
}

// IdentityChecker is optional: before an intent is recorded, it checks that
// the route's credential acts as account (for example by reading the
// credential's own user), so that a write is never sent under an identity
// that no search or readback could tie to the intent. A mismatch is an
// error wrapping ErrAccountMismatch; nothing is recorded or written.
type IdentityChecker interface {
	CheckAccount(ctx context.Context, account string) error
}

// ParentChecker is optional: it checks an intent's parent (its
// ParentExternalID) against the shape the route declares (an issue
// number, a ticket key), before the intent is recorded. A parent that
// does not fit is an error naming the shape; nothing is recorded or
// written. Without it any parent is accepted.
type ParentChecker interface {
	CheckParent(parent string) error
}

// PayloadNormalizer is optional: it validates a caller's payload and returns
// it in the route's canonical shape (the same shape Record.Payload has), so
// that a readback's hash can equal the intent's. Errors name the field.
type PayloadNormalizer interface {
	NormalizePayload(payload json.RawMessage) (json.RawMessage, error)
}

// Resembler is optional: it tells whether a record's payload, though not
// equal to the intent's, looks like a damaged copy of it (the same text
// with an asset missing, say). The reconciler hands such near matches to a
// human instead of retrying, because a retry could duplicate the post.
type Resembler interface {
	Resembles(intentPayload, recordPayload json.RawMessage) bool
}

// PayloadComparer is optional: it tells whether a record's payload, though
// not equal to the intent's, is equal once both are normalised by the
// rewritings the API documents (a route's payload.normalize), and names
// them (nil: not equal, or none declared).
type PayloadComparer interface {
	EquivalentPayload(intentPayload, recordPayload json.RawMessage) []string
}

// ReadScope is the intent a read is made for: the values a route's read
// templates may use beyond the account and the window (a parent in a
// search URL, an intent id in a lookup, a payload field).
type ReadScope struct {
	IntentID         string
	RequestID        string
	IdempotencyKey   string
	Account          string
	ParentExternalID string
	Payload          json.RawMessage
}

// IntentScoped is optional: an adapter whose reads depend on the intent
// returns, for one intent, the adapter to make that intent's reads
// (Search, Get, Status, Probe) with. A reconciler calls ForIntent before
// reading for an intent; an adapter that is not IntentScoped reads the
// same for every intent.
//
// SearchKey tells which intents may share one listing: two intents of one
// account may share a Search result only when their SearchKeys are equal
// ("" when the search depends on the account and window alone).
type IntentScoped interface {
	ForIntent(s ReadScope) Adapter
	SearchKey(s ReadScope) string
}

// ForIntent returns a.ForIntent(s) when a is IntentScoped, else a.
func ForIntent(a Adapter, s ReadScope) Adapter {
	if sc, ok := a.(IntentScoped); ok {
		return sc.ForIntent(s)
	}
	return a
}

// SearchKey returns a.SearchKey(s) when a is IntentScoped, else "".
func SearchKey(a Adapter, s ReadScope) string {
	if sc, ok := a.(IntentScoped); ok {
		return sc.SearchKey(s)
	}
	return ""
}

// Readback checks a route can declare (CheckDeclarer).
const (
	CheckURL        = "url"        // the live URL answers 200 without credentials
	CheckAuthor     = "author"     // the object's author is the intent's account
	CheckPayload    = "payload"    // the object's payload hashes like the intent's
	CheckParent     = "parent"     // the object is under the intent's parent
	CheckVisibility = "visibility" // the object is public
)

// CheckDeclarer is optional: the readback checks a route declares. A
// reconciler requires every declared check to pass, and does not require
// a check the route does not declare (an API whose objects have no public
// page declares no url or visibility check). Without it, every check
// above applies.
type CheckDeclarer interface {
	ReadbackChecks() []string
}
