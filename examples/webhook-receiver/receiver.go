package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/settle-dev/settle/consumers/receipts"
)

// maxBody bounds a request body: a settlement carries one event of the
// log, at most 1 MiB, plus the intent's names.
const maxBody = 2 << 20

// settlement is what this receiver reads of a body (settle.webhook/v1);
// the rest — the event as the log holds it — is kept as received.
type settlement struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Intent struct {
		ID        string `json:"id"`
		Route     string `json:"route"`
		Account   string `json:"account"`
		RequestID string `json:"request_id"`
	} `json:"intent"`
}

// receiver applies each verified settlement once: a row in its
// settlements table, committed with the event id by receipts.Deduper.
type receiver struct {
	secret    []byte
	tolerance time.Duration
	now       func() time.Time
	db        *sql.DB
	dedup     *receipts.Deduper
	mu        sync.Mutex // serialises printing
	out       io.Writer
}

const schema = `CREATE TABLE IF NOT EXISTS settlements (
	event_id   TEXT NOT NULL,
	type       TEXT NOT NULL,
	intent_id  TEXT NOT NULL,
	route      TEXT NOT NULL,
	account    TEXT NOT NULL,
	request_id TEXT NOT NULL,
	body       BLOB NOT NULL,
	received   TEXT NOT NULL
)`

// ServeHTTP answers 2xx only once the settlement is applied (now or
// before): anything else makes settle send it again later.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBody))
	if err != nil {
		http.Error(w, "body too large or cut", http.StatusRequestEntityTooLarge)
		return
	}
	// The raw bytes, before any parsing: a re-encoded body would not
	// verify.
	if err := Verify(req.Header.Get("Settle-Signature"), body, r.secret, r.tolerance, r.now()); err != nil {
		r.printf("refused a request: %v\n", err)
		http.Error(w, "signature: "+err.Error(), http.StatusBadRequest)
		return
	}
	var s settlement
	if err := json.Unmarshal(body, &s); err != nil || s.ID == "" || s.Intent.ID == "" {
		http.Error(w, "not a settlement", http.StatusBadRequest)
		return
	}
	applied, err := r.dedup.ApplyOnce(req.Context(), s.ID, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(req.Context(), `INSERT INTO settlements (event_id, type, intent_id, route, account, request_id, body, received)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, s.ID, s.Type, s.Intent.ID, s.Intent.Route, s.Intent.Account, s.Intent.RequestID,
			body, r.now().UTC().Format(time.RFC3339Nano))
		return err
	})
	if err != nil {
		r.printf("could not apply %s: %v\n", s.ID, err)
		http.Error(w, "not applied; send it again", http.StatusServiceUnavailable)
		return
	}
	if applied {
		r.printf("%s %s: intent %s (route %s, request %s)\n", s.Type, s.ID, s.Intent.ID, s.Intent.Route, s.Intent.RequestID)
	} else {
		r.printf("already applied %s (attempt %s): skipped\n", s.ID, req.Header.Get("Settle-Attempt"))
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"applied":%t}`+"\n", applied)
}

func (r *receiver) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, format, args...)
}
