package node

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/adapter"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
)

// ReaderUser is the NATS user downstream readers connect as.
const ReaderUser = "reader"

// Listener is serve --nats-listen: where the embedded server takes
// downstream readers, and their password (from the environment).
type Listener struct {
	host     string
	port     int
	password string // "" on loopback without --nats-password-env's variable: no credentials needed
}

// ParseListen reads --nats-listen: PORT or HOST:PORT; no host means
// 127.0.0.1. Off loopback a password is required, from the variable
// passwordEnv names (never a flag: flags show in ps).
func ParseListen(v, passwordEnv string, env func(string) (string, bool)) (*Listener, error) {
	host, portStr, err := net.SplitHostPort(v)
	if err != nil {
		host, portStr = "", v
	}
	host = cmp.Or(host, "127.0.0.1")
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, errors.Errorf("--nats-listen: %q is not PORT or HOST:PORT", v)
	}
	l := &Listener{host: host, port: port}
	if pw, ok := env(passwordEnv); ok && pw != "" {
		if len(pw) < 12 {
			return nil, errors.Errorf("--nats-password-env: the password in $%s is shorter than 12 bytes", passwordEnv)
		}
		l.password = pw
	}
	if l.password == "" && !loopback(host) {
		return nil, errors.WithHint(errors.Errorf("--nats-listen %s is not loopback: readers must authenticate, and $%s is not set", v, passwordEnv),
			"export "+passwordEnv+"=<a long random password>, or listen on 127.0.0.1")
	}
	return l, nil
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.Unmap().IsLoopback()
}

func (l *Listener) AuthNote() string {
	if l.password == "" {
		return "no password on loopback"
	}
	return "password from the environment"
}

// users are the server's accounts when it listens: settle's own (every
// subject; a random password made now, never printed) and the readers'
// (read-only: stream and consumer info, creating and using consumers of
// the intents stream, direct gets, and subscribing to its subjects — no
// publish to settle.intents.>, no stream change, and none of settle's own
// consumers: readerDeny), settle's first. On loopback without a password,
// clients without credentials are readers.
func (l *Listener) users(routes []adapter.Route) (users []embedded.User, noAuth string) {
	stream := ledger.DefaultStoreConfig().Stream
	reader := embedded.User{Name: ReaderUser, Password: l.password,
		Publish: readerPublish(stream), DenyPublish: readerDeny(stream, consumerNames(routes)),
		Subscribe: []string{events.AllSubjects, "_INBOX.>"}}
	if reader.Password == "" {
		reader.Password, noAuth = randomSecret(), ReaderUser
	}
	return []embedded.User{{Name: "settle", Password: randomSecret()}, reader}, noAuth
}

// readerPublish are the JetStream API subjects a reader may use on stream,
// and what the nats CLI asks of any server (its own user's info). A
// consumer is made by the API that names it in the subject (nats.go's and
// the CLI's), so that readerDeny can keep settle's own out of reach; the
// legacy create that takes the name from the request body is not allowed.
func readerPublish(stream string) []string {
	return []string{
		"$JS.API.INFO",
		"$SYS.REQ.USER.INFO",
		"$JS.API.STREAM.NAMES",
		"$JS.API.STREAM.LIST",
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.STREAM.MSG.GET." + stream,
		"$JS.API.DIRECT.GET." + stream,
		"$JS.API.DIRECT.GET." + stream + ".>",
		"$JS.API.CONSUMER.CREATE." + stream + ".>",
		"$JS.API.CONSUMER.DURABLE.CREATE." + stream + ".*",
		"$JS.API.CONSUMER.INFO." + stream + ".*",
		"$JS.API.CONSUMER.NAMES." + stream,
		"$JS.API.CONSUMER.LIST." + stream,
		"$JS.API.CONSUMER.DELETE." + stream + ".*",
		"$JS.API.CONSUMER.MSG.NEXT." + stream + ".*",
		"$JS.ACK." + stream + ".>",
		"$JS.FC." + stream + ".>",
		"_INBOX.>",
	}
}

// readerDeny are the subjects that would let a reader change, delete,
// pause, pull from or ack settle's own durable consumers (each route's
// reconciler consumer): a reader that deleted one stopped the route's
// settling. NATS subjects match whole tokens only, so each consumer is
// named; a consumer of a route this process does not configure is
// another process's to protect.
func readerDeny(stream string, consumers map[string]string) []string {
	var out []string
	for _, c := range slices.Sorted(maps.Values(consumers)) {
		out = append(out,
			"$JS.API.CONSUMER.CREATE."+stream+"."+c,
			"$JS.API.CONSUMER.CREATE."+stream+"."+c+".>",
			"$JS.API.CONSUMER.DURABLE.CREATE."+stream+"."+c,
			"$JS.API.CONSUMER.DELETE."+stream+"."+c,
			"$JS.API.CONSUMER.PAUSE."+stream+"."+c,
			"$JS.API.CONSUMER.UNPIN."+stream+"."+c,
			"$JS.API.CONSUMER.MSG.NEXT."+stream+"."+c,
			"$JS.ACK."+stream+"."+c+".>",
			"$JS.FC."+stream+"."+c+".>",
		)
	}
	return out
}

func randomSecret() string {
	b := make([]byte, 24)
	rand.Read(b) // never fails
	return hex.EncodeToString(b)
}
