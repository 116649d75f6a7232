package testharness

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/ledger"
)

// Logs written by earlier versions of settle, kept in testdata so that
// every reader of the log (the fold, the audit, the projector, the
// downstream library) is shown to read them still.
//
// testdata/logv1 holds a log written before a new intent's record and its
// first write start became one message (IntentStarted): every write there
// is IntentRecorded, WriteStarted and an outcome. log.jsonl is one
// DumpedMsg a line, in stream order; views.json is what the projector made
// of it then (LogV1Views), keyed by intent id.

// DumpedMsg is one stream message as kept in a dumped log: its subject,
// its headers (the ones a publish sets: Nats-Msg-Id, Settle-Append-Id, a
// hold marker's) and its bytes.
type DumpedMsg struct {
	Seq     uint64              `json:"seq"`
	Subject string              `json:"subject"`
	Header  map[string][]string `json:"header,omitempty"`
	Data    string              `json:"data"`
}

// LogV1Dir is testdata/logv1 of this package, wherever the test runs.
func LogV1Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "logv1")
}

// republishedHeader reports whether a dumped header is published again:
// the server's own (stream, sequence, time) and a publish's conditions
// (expected sequences, batch headers) are not.
func republishedHeader(k string) bool {
	return !strings.HasPrefix(k, "Nats-Expected-") && !strings.HasPrefix(k, "Nats-Batch-") &&
		k != "Nats-Stream" && k != "Nats-Sequence" && k != "Nats-Time-Stamp" && k != "Nats-Subject"
}

// DumpStream writes every message of stream to path as JSON lines (DumpedMsg).
func DumpStream(t testing.TB, js jetstream.JetStream, stream, path string) int {
	t.Helper()
	ctx := context.Background()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	n := 0
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("dump seq %d: %v", seq, err)
		}
		d := DumpedMsg{Seq: m.Sequence, Subject: m.Subject, Data: string(m.Data)}
		for k, v := range m.Header {
			if republishedHeader(k) {
				if d.Header == nil {
					d.Header = map[string][]string{}
				}
				d.Header[k] = v
			}
		}
		line, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(line)
		buf.WriteByte('\n')
		n++
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

// ReadDump reads a log dumped by DumpStream.
func ReadDump(t testing.TB, path string) []DumpedMsg {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []DumpedMsg
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 4<<20)
	for sc.Scan() {
		var d DumpedMsg
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, d)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Republish publishes a dumped log into the settle stream on js (opened
// with the default configuration; it must be empty), message by message
// with its headers, so that every message lands at the sequence it had.
func Republish(t testing.TB, js jetstream.JetStream, path string) *ledger.Store {
	t.Helper()
	store := OpenStore(t, js)
	ctx := context.Background()
	for _, d := range ReadDump(t, path) {
		msg := &nats.Msg{Subject: d.Subject, Data: []byte(d.Data), Header: nats.Header{}}
		keys := make([]string, 0, len(d.Header))
		for k := range d.Header {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for _, v := range d.Header[k] {
				msg.Header.Add(k, v)
			}
		}
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatalf("republish seq %d: %v", d.Seq, err)
		}
		if ack.Sequence != d.Seq || ack.Duplicate {
			t.Fatalf("republish seq %d landed at %d (duplicate %v)", d.Seq, ack.Sequence, ack.Duplicate)
		}
	}
	return store
}

// RepublishLogV1 republishes testdata/logv1/log.jsonl into the settle
// stream on js.
func RepublishLogV1(t testing.TB, js jetstream.JetStream) *ledger.Store {
	t.Helper()
	return Republish(t, js, filepath.Join(LogV1Dir(), "log.jsonl"))
}

// LogV1Views is testdata/logv1/views.json: the projector's view of each
// intent of the v1 log as the version that wrote it projected it, as
// JSON, keyed by intent id.
func LogV1Views(t testing.TB) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(LogV1Dir(), "views.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
