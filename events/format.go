package events

import (
	"fmt"
	"strconv"
)

// LogFormat is the version of the log this build writes and reads: which
// events a write appends, their bodies and the intent ids. A stream
// carries its format in its metadata (FormatMetadata), written when the
// stream is created; every reader refuses a stream of another format at
// start (CheckLogFormat). Format 1 is every stream written before formats
// were versioned (no FormatMetadata key).
const LogFormat = 2

// FormatMetadata is the stream metadata key that holds the log format.
const FormatMetadata = "settle.log_format"

// FormatMetadataValue is FormatMetadata's value on a stream of LogFormat.
var FormatMetadataValue = strconv.Itoa(LogFormat)

// UpgradesDoc is where the upgrade policy is written down.
const UpgradesDoc = "docs/deploy.md#upgrades"

// FormatError is a stream of another log format than this build's. It
// matches ErrLogFormat.
type FormatError struct {
	// Stream is the stream's name.
	Stream string
	// Have is the stream's FormatMetadata value ("" when it has none:
	// format 1).
	Have string
}

func (e *FormatError) Error() string {
	have := "log format " + e.Have
	if e.Have == "" {
		have = "log format 1 (no " + FormatMetadata + " in its metadata)"
	}
	return fmt.Sprintf("stream %s holds %s; this build reads log format %d only: "+
		"run the build that wrote it, or start this build on a new data directory (on an external NATS server: a new stream); see %s",
		e.Stream, have, LogFormat, UpgradesDoc)
}

// Is makes FormatError match ErrLogFormat.
func (e *FormatError) Is(target error) bool { return target == ErrLogFormat }

// CheckLogFormat refuses a stream whose metadata names another log format
// than LogFormat, or none, with a *FormatError. Every reader of the log
// (a node, the audit, the projector, downstream subscribers, webhooks)
// calls it with the stream's metadata before it reads anything.
func CheckLogFormat(stream string, metadata map[string]string) error {
	if have := metadata[FormatMetadata]; have != FormatMetadataValue {
		return &FormatError{Stream: stream, Have: have}
	}
	return nil
}
