package httproute_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/events"
)

// PrepareWrite renders exactly what Write sends, without the route's
// credentials; WritePrepared sends a rendering, adding the credentials and
// the key's header — a rendering made for the first attempt is sent by a
// retry byte for byte (adapter.Preparer).
func TestPrepareWriteSendsWhatWriteSends(t *testing.T) {
	rec := newRecorder(t, func(*http.Request) (int, string) {
		return 200, `{"ok":true,"title":"a b/c","data":{"items":[{"id":"x/1"}]}}`
	})
	a := genericAdapter(t, rec.srv.URL)
	pl, err := a.NormalizePayload(json.RawMessage(`{"title":"a b/c"}`))
	if err != nil {
		t.Fatal(err)
	}
	req := writeReq(1, "acct 1", "p/9", pl)
	if _, err := a.Write(bg, req); err != nil {
		t.Fatal(err)
	}
	byWrite := rec.last()
	sent, err := a.PrepareWrite(req)
	if err != nil {
		t.Fatal(err)
	}
	noSecret(t, "the rendering", sent)
	if sent.Method != http.MethodPatch || !strings.HasPrefix(sent.Path, "/things/") || sent.ContentType != "application/x-www-form-urlencoded" ||
		len(sent.Headers) != 2 || sent.Headers[0].Name != "X-Intent" {
		t.Fatalf("rendering %+v", sent)
	}
	// The first attempt's rendering, sent by a later attempt.
	retry := req
	retry.AttemptID = events.AttemptID(req.IntentID, 2)
	res, err := a.WritePrepared(bg, retry, sent)
	if err != nil || res.ExternalID != "x/1" {
		t.Fatalf("%+v %v", res, err)
	}
	got := rec.last()
	if got.method != byWrite.method || got.path != byWrite.path || got.query != byWrite.query || got.body != byWrite.body ||
		got.header.Get("Content-Type") != byWrite.header.Get("Content-Type") || got.header.Get("X-Intent") != req.IntentID {
		t.Fatalf("sent %+v, Write sent %+v", got, byWrite)
	}
	if got.header.Get("X-Api-Key") != secretToken || got.header.Get("Idem") != req.IdempotencyKey {
		t.Fatal("the credentials or the key's header were not added at send time")
	}
	// An invalid write fails to render as it fails to send.
	if _, err := a.PrepareWrite(writeReq(2, "a", "", json.RawMessage(`{"count":1}`))); callError(t, err).Class != adapter.NotSent {
		t.Fatalf("%v", err)
	}
}

// A rendering that would carry the base URL (which may hold a secret from
// the environment) is not recordable: it is sent with Write.
func TestPrepareWriteKeepsSecretsOffTheRecord(t *testing.T) {
	rec := newRecorder(t, func(*http.Request) (int, string) { return 200, `{"id":"1"}` })
	route := strings.NewReplacer("body: {title: \"{{payload.title}}\",", "body: {title: \"{{payload.title}}\", back: \"{{base}}\",").Replace(genericRoute)
	if route == genericRoute {
		t.Fatal("the route did not change")
	}
	a := buildYAML(t, []byte(route), map[string]string{"BASE": rec.srv.URL, "KEY": secretToken})
	pl, err := a.NormalizePayload(json.RawMessage(`{"title":"t"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.PrepareWrite(writeReq(3, "a", "", pl)); !errors.Is(err, adapter.ErrNotRecordable) {
		t.Fatalf("a body holding base_url: %v", err)
	}
}
