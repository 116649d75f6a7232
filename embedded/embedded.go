package embedded

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/errors"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Durability selects when JetStream fsyncs.
type Durability string

const (
	// SyncAlways fsyncs every write before the publish is acknowledged: an
	// acknowledged event survives power loss. Costs one fsync per append
	// (batched appends share it).
	SyncAlways Durability = "always"
	// SyncDefault is the server default: writes reach the OS before the ack
	// and are fsynced every sync interval (2 minutes). Survives a process
	// crash, not a power loss or kernel crash: the Jepsen analysis of NATS
	// 2.12 lost acknowledged writes under power loss with it.
	SyncDefault Durability = "default"
)

// SyncsEveryWrite reports whether the server fsyncs each write before its
// ack (SyncAlways, and the zero value, which Start takes as SyncAlways).
func (d Durability) SyncsEveryWrite() bool { return d != SyncDefault }

// ParseDurability reads "always" or "default".
func ParseDurability(s string) (Durability, error) {
	switch Durability(s) {
	case SyncAlways, SyncDefault:
		return Durability(s), nil
	}
	return "", errors.Errorf("durability %q: want %q or %q", s, SyncAlways, SyncDefault)
}

// Config of one embedded server.
type Config struct {
	// Dir is the JetStream store directory (required).
	Dir string
	// Durability: SyncAlways (default) or SyncDefault.
	Durability Durability
	// Host and Port the client listener binds; Port 0 picks a free port,
	// Port -1 does not listen (in-process connections only).
	Host string
	Port int
	// Name is the server name (required in a cluster).
	Name string
	// ClusterName, ClusterPort and Routes make the server a cluster member.
	ClusterName string
	ClusterPort int
	Routes      []string
	// Logs turns the server's own logging on (stderr).
	Logs bool
	// Logger, when set, receives the server's errors and warnings (and its
	// notices at debug level) instead; Watch, when set, is called with
	// every error and warning line (to notice a full disk, say).
	Logger *slog.Logger
	Watch  func(level slog.Level, msg string)
	// Users, when set, are the only clients the server accepts (user and
	// password); NoAuthUser names the one a client without credentials is
	// taken for ("": such clients are refused).
	Users      []User
	NoAuthUser string
	// MaxMemory, when set, bounds JetStream's memory storage (the
	// server's own limit; settle's stream is on file, its consumers'
	// state is small). MaxStore, when set, bounds its file storage.
	MaxMemory, MaxStore int64
}

// User is a client of a server with Users. Publish and Subscribe, when
// not nil, are the only subjects the user may publish to or subscribe to
// (wildcards allowed); nil allows every subject. DenyPublish are subjects
// refused even where Publish allows them.
type User struct {
	Name        string
	Password    string
	Publish     []string
	DenyPublish []string
	Subscribe   []string
}

// String never shows the password.
func (u User) String() string { return "embedded.User(" + u.Name + ")" }

// GoString is String.
func (u User) GoString() string { return u.String() }

// DefaultConfig returns a single-node, fsync-always config storing in dir.
func DefaultConfig(dir string) Config {
	return Config{Dir: dir, Durability: SyncAlways, Host: "127.0.0.1", Port: 0}
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("embedded: config.Dir: is required")
	}
	if _, err := ParseDurability(string(c.Durability)); err != nil {
		return errors.Errorf("embedded: config.Durability: %w", err)
	}
	if c.Port < -1 || c.Port > 65535 {
		return errors.Errorf("embedded: config.Port: %d is not a port", c.Port)
	}
	if c.ClusterName != "" && c.Name == "" {
		return errors.New("embedded: config.Name: is required in a cluster")
	}
	names := map[string]bool{}
	for i, u := range c.Users {
		switch {
		case u.Name == "":
			return errors.Errorf("embedded: config.Users[%d].Name: is required", i)
		case names[u.Name]:
			return errors.Errorf("embedded: config.Users[%d].Name: %q is used twice", i, u.Name)
		case u.Password == "" && u.Name != c.NoAuthUser:
			return errors.Errorf("embedded: config.Users[%d].Password: is required", i)
		}
		names[u.Name] = true
	}
	if c.NoAuthUser != "" && !names[c.NoAuthUser] {
		return errors.Errorf("embedded: config.NoAuthUser: %q is not one of Users", c.NoAuthUser)
	}
	return nil
}

// Server is a running embedded nats-server.
type Server struct {
	*server.Server
	cfg Config
}

// Start starts a server and waits until it accepts connections and
// JetStream is ready.
func Start(cfg Config) (*Server, error) {
	if cfg.Durability == "" {
		cfg.Durability = SyncAlways
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkStoreDir(cfg.Dir); err != nil {
		return nil, err
	}
	// The server's log goes to srvLog (and on to cfg.Logger and cfg.Watch)
	// unless cfg.Logs asks for the server's own; either way srvLog keeps
	// its errors, so that a failed start says why.
	srvLog := &serverLog{l: cfg.Logger, watch: cfg.Watch}
	opts, err := cfg.serverOptions()
	if err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, errors.Errorf("embedded: new server: %w", err)
	}
	if cfg.Logs && cfg.Logger == nil && cfg.Watch == nil {
		s.ConfigureLogger()
	} else {
		s.SetLoggerV2(srvLog, false, false, false)
	}
	s.Start()
	if err := waitReady(s, srvLog); err != nil {
		return nil, err
	}
	if !s.JetStreamEnabled() {
		last, _ := srvLog.errs()
		if last == "" {
			last = "no error was logged (start with Logs or a Logger to see the server's log)"
		}
		s.Shutdown()
		s.WaitForShutdown()
		return nil, errors.Errorf("embedded: JetStream did not start on %s: %s", cfg.Dir, last)
	}
	return &Server{Server: s, cfg: cfg}, nil
}

// serverOptions are the nats-server options of cfg.
func (cfg Config) serverOptions() (*server.Options, error) {
	opts := &server.Options{
		ServerName:             cfg.Name,
		Host:                   cfg.Host,
		Port:                   cfg.Port,
		JetStream:              true,
		StoreDir:               cfg.Dir,
		SyncAlways:             cfg.Durability == SyncAlways,
		NoLog:                  !cfg.Logs && cfg.Logger == nil && cfg.Watch == nil,
		NoSigs:                 true,
		DisableJetStreamBanner: true,
		MaxPayload:             8 << 20,
		JetStreamMaxMemory:     cfg.MaxMemory,
		JetStreamMaxStore:      cfg.MaxStore,
	}
	if cfg.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	for _, u := range cfg.Users {
		su := &server.User{Username: u.Name, Password: u.Password}
		if u.Publish != nil || u.Subscribe != nil {
			su.Permissions = &server.Permissions{}
			if u.Publish != nil {
				su.Permissions.Publish = &server.SubjectPermission{Allow: append([]string{}, u.Publish...), Deny: append([]string(nil), u.DenyPublish...)}
			}
			if u.Subscribe != nil {
				su.Permissions.Subscribe = &server.SubjectPermission{Allow: append([]string{}, u.Subscribe...)}
			}
		}
		opts.Users = append(opts.Users, su)
	}
	opts.NoAuthUser = cfg.NoAuthUser
	if cfg.Port == -1 {
		opts.DontListen = true
		opts.Port = 0
	}
	if cfg.ClusterName != "" {
		opts.Cluster = server.ClusterOpts{Name: cfg.ClusterName, Host: cfg.Host, Port: cfg.ClusterPort}
		for _, r := range cfg.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, errors.Errorf("embedded: route %q: %w", r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	return opts, nil
}

// waitReady waits until s accepts connections, or gives up: a listener
// that cannot be opened (its port taken meanwhile) is a fatal error in
// the server's log and no readiness ever, so it is seen at once rather
// than after the wait.
func waitReady(s *server.Server, srvLog *serverLog) error {
	deadline := time.Now().Add(30 * time.Second)
	for !s.ReadyForConnections(100 * time.Millisecond) {
		if _, f := srvLog.errs(); f != "" {
			s.Shutdown()
			s.WaitForShutdown()
			err := errors.Errorf("embedded: server did not start: %s", f)
			if strings.Contains(f, "Error listening on") {
				err = errors.Mark(err, ErrListen)
			}
			return err
		}
		if time.Now().After(deadline) {
			s.Shutdown()
			if last, _ := srvLog.errs(); last != "" {
				return errors.Errorf("embedded: server not ready for connections after 30s: %s", last)
			}
			return errors.New("embedded: server not ready for connections after 30s")
		}
	}
	return nil
}

// Connect opens a client connection: in-process when the server does not
// listen, over loopback otherwise.
func (s *Server) Connect(opts ...nats.Option) (*nats.Conn, error) {
	return connect(s.cfg, s.Server, s.ClientURL, opts)
}

func connect(cfg Config, inProcess nats.InProcessConnProvider, url func() string, opts []nats.Option) (*nats.Conn, error) {
	opts = append([]nats.Option{nats.Name("settle"), nats.MaxReconnects(-1)}, opts...)
	if cfg.Port == -1 {
		return nats.Connect("", append(opts, nats.InProcessServer(inProcess))...)
	}
	return nats.Connect(url(), opts...)
}

// Config returns the config the server runs with.
func (s *Server) Config() Config { return s.cfg }

// Port is the client port the server listens on (0 when it listens on
// none).
func (s *Server) Port() int { return portOf(s.ClientURL()) }

// Stop shuts the server down and waits for it.
func (s *Server) Stop() {
	s.Shutdown()
	s.WaitForShutdown()
}

// ErrListen marks a start that failed because a listener could not be
// opened (most often its port, chosen free a moment before, was taken
// meanwhile).
var ErrListen = errors.New("embedded: a listener could not be opened")

// freePort is FreePort; tests replace it.
var freePort = FreePort

// clusterStarts bounds StartCluster's attempts, each with fresh ports.
const clusterStarts = 3

// FreePort returns a free TCP port on loopback.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Cluster is a set of servers routed to each other on loopback.
type Cluster struct {
	Servers []*Server
	cfgs    []Config
}

// StartCluster starts n servers (3 for a real R3 cluster) storing under
// dirs[i], and waits until JetStream has a meta leader. The route ports
// are chosen free beforehand; if one is taken before its server binds it,
// the start is made again with fresh ports (up to 3 times).
func StartCluster(name string, dirs []string, durability Durability) (*Cluster, error) {
	var err error
	for attempt := 0; attempt < clusterStarts; attempt++ {
		var c *Cluster
		if c, err = startCluster(name, dirs, durability); !errors.Is(err, ErrListen) {
			return c, err
		}
	}
	return nil, err
}

// startCluster is one attempt of StartCluster.
func startCluster(name string, dirs []string, durability Durability) (*Cluster, error) {
	cports := make([]int, len(dirs))
	var routes []string
	for i := range cports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		cports[i] = p
		routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(p))
	}
	c := &Cluster{}
	for i, dir := range dirs {
		cfg := Config{Dir: dir, Durability: durability, Host: "127.0.0.1", Port: 0,
			Name: fmt.Sprintf("%s-%d", name, i+1), ClusterName: name, ClusterPort: cports[i], Routes: routes}
		c.cfgs = append(c.cfgs, cfg)
		s, err := Start(cfg)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Servers = append(c.Servers, s)
	}
	if err := c.WaitReady(60 * time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// WaitReady waits until one running server is the JetStream meta leader
// and every running server is current with it.
func (c *Cluster) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		leaders, current, running := 0, 0, 0
		for _, s := range c.Servers {
			if s == nil || !s.Running() {
				continue
			}
			running++
			if s.JetStreamIsLeader() {
				leaders++
			}
			if s.JetStreamIsCurrent() {
				current++
			}
		}
		if leaders == 1 && current == running {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("embedded: cluster has no JetStream meta leader in time")
}

// URLs is a comma-separated client URL list of the running servers.
func (c *Cluster) URLs() string {
	var urls []string
	for _, s := range c.Servers {
		if s != nil && s.Running() {
			urls = append(urls, s.ClientURL())
		}
	}
	return strings.Join(urls, ",")
}

// Restart stops server i and starts it again with the same store.
func (c *Cluster) Restart(i int) error {
	c.Servers[i].Stop()
	cfg := c.cfgs[i]
	cfg.Port = c.Servers[i].Port()
	s, err := Start(cfg)
	if err != nil {
		return err
	}
	c.Servers[i] = s
	return c.WaitReady(60 * time.Second)
}

func portOf(u string) int {
	p, err := url.Parse(u)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p.Port())
	return n
}

// Stop stops every server.
func (c *Cluster) Stop() {
	for _, s := range c.Servers {
		if s != nil {
			s.Stop()
		}
	}
}

// Restartable is an embedded server that can be stopped and started again
// on the same store and port while its clients stay: a connection made by
// Connect reconnects to the new server by itself. It is how settle
// recovers from a store the server stopped writing to after a full disk.
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

// InProcessConn connects to the current server in-process, so that a
// reconnecting client reaches the server of the moment.
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
