package projector

import (
	"cmp"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cockroachdb/errors"
)

// Config configures a Projector.
type Config struct {
	// Stream is the JetStream stream of intents (default SETTLE_INTENTS).
	Stream string
	// DBPath is the SQLite database file (required; created if absent).
	DBPath string
	// Durable names the projection on the server: the consumers of its
	// reads (ledger.Reader, ordered consumers) are named after it (default
	// "settle-projector"). The position is the SQL checkpoint, never a
	// server-side consumer.
	Durable string
	// Batch is the most events applied in one SQL transaction (default
	// 8192: catching up, a commit every 8192 events; every commit rewrites
	// the index pages its events touched, so fewer commits write less).
	// A batch ends early when nothing more is pending.
	Batch int
	// CacheSize bounds the LRU of folded non-terminal intents (default 4096).
	CacheSize int
	// UnsyncedBacklog: a catch-up of a backlog of at least this many
	// events, and at least the checkpoint it starts from (a rebuild, or a
	// database far behind), runs with the writer's syncs off until caught
	// up (default 100,000; -1: never). A crash of the process loses
	// nothing; after a restart of the machine in the middle of one, Open
	// removes the database and the views are rebuilt from the log
	// (unsynced.go).
	UnsyncedBacklog int
	// Logger receives quarantine warnings and consumer errors
	// (default slog.Default()).
	Logger *slog.Logger
}

// DefaultConfig returns the defaults; DBPath must still be set.
func DefaultConfig() Config {
	return Config{Stream: "SETTLE_INTENTS", Durable: "settle-projector", Batch: 8192, CacheSize: 4096, UnsyncedBacklog: DefaultUnsyncedBacklog}
}

// DefaultUnsyncedBacklog is Config.UnsyncedBacklog's default.
const DefaultUnsyncedBacklog = 100_000

// MaxBatch bounds Config.Batch.
const MaxBatch = 10000

// Validate checks the config; errors name the field.
func (c Config) Validate() error {
	for _, r := range []struct {
		wrong bool
		msg   string
	}{
		{c.Stream == "", "Stream: is required"},
		{strings.ContainsAny(c.Stream, ".*> \t\r\n"), fmt.Sprintf("Stream: %q is not a stream name", c.Stream)},
		{c.DBPath == "", "DBPath: is required"},
		{strings.ContainsRune(c.DBPath, '?'), fmt.Sprintf("DBPath: %q must not contain '?'", c.DBPath)},
		{c.Durable == "", "Durable: is required"},
		{len(c.Durable) > 64 || strings.ContainsAny(c.Durable, ".*>/\\ \t\r\n"),
			fmt.Sprintf("Durable: %q is not a consumer name (≤64 bytes, no . * > / \\ or white space)", c.Durable)},
		{c.Batch < 1 || c.Batch > MaxBatch, fmt.Sprintf("Batch: %d is outside 1..%d", c.Batch, MaxBatch)},
		{c.CacheSize < 1, fmt.Sprintf("CacheSize: %d must be ≥ 1", c.CacheSize)},
		{c.UnsyncedBacklog < -1, fmt.Sprintf("UnsyncedBacklog: %d must be ≥ 1, or -1 for never", c.UnsyncedBacklog)},
	} {
		if r.wrong {
			return errors.New("projector config: " + r.msg)
		}
	}
	return nil
}

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.Stream = cmp.Or(c.Stream, d.Stream)
	c.Durable = cmp.Or(c.Durable, d.Durable)
	c.Batch = cmp.Or(c.Batch, d.Batch)
	c.CacheSize = cmp.Or(c.CacheSize, d.CacheSize)
	c.UnsyncedBacklog = cmp.Or(c.UnsyncedBacklog, d.UnsyncedBacklog)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}
