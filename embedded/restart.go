package embedded

import (
	"net"
	"sync"

	"github.com/nats-io/nats.go"
)

// Restartable is an embedded server that can be stopped and started again
// on the same store and port while its clients stay: a connection made by
// Connect reconnects to the new server by itself (in-process through
// Restartable, or over loopback to the same port). It is how settle
// recovers from a store the server stopped writing to (a full disk makes
// nats-server keep a sticky write error until the stream is loaded again).
type Restartable struct {
	mu  sync.Mutex
	cur *Server
	cfg Config
}

// StartRestartable starts a server (see Start).
func StartRestartable(cfg Config) (*Restartable, error) {
	s, err := Start(cfg)
	if err != nil {
		return nil, err
	}
	cfg = s.Config()
	if cfg.Port == 0 {
		cfg.Port = s.Port() // keep the port across restarts
	}
	return &Restartable{cur: s, cfg: cfg}, nil
}

// Server is the running server.
func (r *Restartable) Server() *Server {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// ClientURL is the server's client URL.
func (r *Restartable) ClientURL() string { return r.Server().ClientURL() }

// Restart stops the server and starts it again with the same config.
// Clients see a disconnect and reconnect.
func (r *Restartable) Restart() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cur.Stop()
	s, err := Start(r.cfg)
	if err != nil {
		return err
	}
	r.cur = s
	return nil
}

// InProcessConn connects to the current server in-process
// (nats.InProcessConnProvider): a reconnecting client reaches the server
// of the moment.
func (r *Restartable) InProcessConn() (net.Conn, error) {
	return r.Server().InProcessConn()
}

var _ nats.InProcessConnProvider = (*Restartable)(nil)

// Connect opens a client connection that survives Restart: in-process
// when the server does not listen, over loopback otherwise.
func (r *Restartable) Connect(opts ...nats.Option) (*nats.Conn, error) {
	return connect(r.cfg, r, r.ClientURL, opts)
}

// Stop stops the server.
func (r *Restartable) Stop() { r.Server().Stop() }
