package node

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/projector"
)

// Offline is the log of a stopped settle opened by an offline command
// (audit, views rebuild): its data directory locked, and its embedded
// store served by a server of its own, or an external NATS server.
type Offline struct {
	JS  jetstream.JetStream
	Dir *DataDir // nil when nothing was locked
	nc  *nats.Conn
	srv *embedded.Server
}

// OpenOffline locks lockDir (unless empty) for command and connects to
// natsURL, or, without one, serves storeDir with an embedded server of its
// own (its warnings and errors to logger).
func OpenOffline(lockDir, storeDir, natsURL, command string, logger *slog.Logger) (_ *Offline, err error) {
	o := &Offline{}
	defer func() {
		if err != nil {
			o.Close()
		}
	}()
	if lockDir != "" {
		if o.Dir, err = LockDataDir(lockDir, command, false); err != nil {
			return nil, err
		}
	}
	name := nats.Name(command)
	if natsURL != "" {
		if o.nc, err = nats.Connect(natsURL, name); err != nil {
			return nil, errors.Errorf("connect %s: %w", RedactURL(natsURL), err)
		}
	} else {
		if !IsDir(storeDir) {
			return nil, errors.WithHint(errors.Errorf("no JetStream store at %s", storeDir),
				"give the directory settle serve --data used, or --nats-url when serve used an external server")
		}
		if o.srv, err = embedded.Start(embedded.Config{Dir: storeDir, Durability: embedded.SyncAlways, Port: -1, Logger: logger}); err != nil {
			return nil, err
		}
		if o.nc, err = o.srv.Connect(name); err != nil {
			return nil, errors.Errorf("connect: %w", err)
		}
	}
	o.JS, err = jetstream.New(o.nc)
	return o, err
}

// Close closes the connection, stops the server and releases the lock.
func (o *Offline) Close() {
	if o.nc != nil {
		o.nc.Close()
	}
	if o.srv != nil {
		o.srv.Stop()
	}
	o.Dir.Unlock()
}

// Rebuilt is what RebuildViews made.
type Rebuilt struct {
	Checkpoint uint64 // the stream sequence the views reached
	Intents    int    // the intents they hold
	Aside      string // where the old views were moved
}

// RebuildViews moves the data directory's views aside and projects the
// whole stream into new ones (views are derived from the log).
func (o *Offline) RebuildViews(ctx context.Context, stream string) (Rebuilt, error) {
	var r Rebuilt
	st, err := o.JS.Stream(ctx, stream)
	if err != nil {
		return r, errors.Errorf("stream %s: %w", stream, err)
	}
	if err := ledger.CheckFormat(st); err != nil {
		return r, err
	}
	views := o.Dir.Views()

	if r.Aside, err = MoveViewsAside(views); err != nil {
		return r, err
	}
	if err := PrivateViews(views); err != nil {
		return r, err
	}
	cfg := projector.DefaultConfig()
	cfg.Stream, cfg.DBPath = stream, views
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := projector.Open(ctx, o.JS, cfg)
	if err != nil {
		return r, err
	}
	defer p.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	if err := p.CatchUp(cctx); err != nil {
		return r, err
	}
	if r.Checkpoint, err = p.Checkpoint(ctx); err != nil {
		return r, err
	}
	counts, err := p.CountByState(ctx)
	for _, c := range counts {
		r.Intents += c
	}
	return r, err
}
