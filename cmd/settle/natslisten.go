package main

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/cockroachdb/errors"

	"github.com/settle-dev/settle/api"
	"github.com/settle-dev/settle/embedded"
	"github.com/settle-dev/settle/events"
	"github.com/settle-dev/settle/ledger"
)

// natsReaderUser is the NATS user downstream readers connect as.
const natsReaderUser = "reader"

// natsListener is serve --nats-listen: where the embedded server takes
// downstream readers, and their password (from the environment).
type natsListener struct {
	host     string
	port     int
	password string // "" on loopback without --nats-password-env's variable: no credentials needed
}

// parseNATSListen reads --nats-listen: PORT or HOST:PORT; no host means
// 127.0.0.1. Off loopback a password is required, from the variable
// passwordEnv names (never a flag: flags show in ps).
func parseNATSListen(v, passwordEnv string, env func(string) (string, bool)) (*natsListener, error) {
	host, portStr, err := net.SplitHostPort(v)
	if err != nil {
		host, portStr = "", v
	}
	if host == "" {
		host = "127.0.0.1"
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, errors.Errorf("--nats-listen: %q is not PORT or HOST:PORT", v)
	}
	l := &natsListener{host: host, port: port}
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

func (l *natsListener) authNote() string {
	if l.password == "" {
		return "no password on loopback"
	}
	return "password from the environment"
}

// users are the server's accounts when it listens: settle's own (every
// subject; a random password made now, never printed) and the readers'
// (read-only: stream and consumer info, creating and using consumers of
// the intents stream, direct gets, and subscribing to its subjects — no
// publish to settle.intents.>, no stream change). On loopback without a
// password, clients without credentials are readers.
func (l *natsListener) users() (users []embedded.User, noAuth string, internal embedded.User, err error) {
	pw, err := randomSecret()
	if err != nil {
		return nil, "", embedded.User{}, err
	}
	internal = embedded.User{Name: "settle", Password: pw}
	reader := embedded.User{Name: natsReaderUser, Password: l.password,
		Publish: readerPublish(ledger.DefaultStoreConfig().Stream), Subscribe: []string{events.AllSubjects, "_INBOX.>"}}
	if reader.Password == "" {
		if reader.Password, err = randomSecret(); err != nil {
			return nil, "", embedded.User{}, err
		}
		noAuth = natsReaderUser
	}
	return []embedded.User{internal, reader}, noAuth, internal, nil
}

// readerPublish are the JetStream API subjects a reader may use on stream.
func readerPublish(stream string) []string {
	return []string{
		"$JS.API.INFO",
		"$JS.API.STREAM.NAMES",
		"$JS.API.STREAM.LIST",
		"$JS.API.STREAM.INFO." + stream,
		"$JS.API.STREAM.MSG.GET." + stream,
		"$JS.API.DIRECT.GET." + stream,
		"$JS.API.DIRECT.GET." + stream + ".>",
		"$JS.API.CONSUMER.CREATE." + stream,
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

func randomSecret() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", errors.Errorf("random password: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// newLogger is serve's logger: text lines on w, every error attribute
// redacted to its safe parts (api.RedactingHandler).
func newLogger(w io.Writer) *slog.Logger {
	return slog.New(api.RedactingHandler(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})))
}

// safeText is err's safe parts (api.SafeError).
func safeText(err error) string { return api.SafeError(err) }
