package api

import (
	"strings"
	"testing"
	"time"

	"github.com/settle-dev/settle/ledger"
	"github.com/settle-dev/settle/producer"
	"github.com/settle-dev/settle/projector"
)

func TestCheckDevAddr(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8080": true, "127.0.0.2:1": true, "[::1]:8080": true, "localhost:0": true, "LOCALHOST:80": true,
		":8080": false, "0.0.0.0:8080": false, "[::]:8080": false, "10.0.0.1:80": false, "example.com:80": false,
		"127.0.0.1": false, "": false, "[::ffff:127.0.0.1]:80": true,
	} {
		if err := CheckDevAddr(addr); (err == nil) != ok {
			t.Errorf("CheckDevAddr(%q) = %v, want ok=%v", addr, err, ok)
		}
	}
}

func TestConfigValidateNamesTheFieldAndNeverTheSecret(t *testing.T) {
	prod, proj, store := &producer.Producer{}, &projector.Projector{}, &ledger.Store{}
	base := func() Config {
		c := DefaultConfig()
		c.Service, c.Log = newService(t, prod, proj, time.Now), store
		c.Tokens = []Token{{Name: "ci", Secret: "s3cr3t-value-abcdef123456", Scopes: []string{ScopeSubmit}}}
		return c
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	cases := []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"no service", func(c *Config) { c.Service = nil }, "Service"},
		{"no log", func(c *Config) { c.Log = nil }, "Log"},
		{"no clock", func(c *Config) { c.Now = nil }, "Now"},
		{"no logger", func(c *Config) { c.Logger = nil }, "Logger"},
		{"no max wait", func(c *Config) { c.MaxWait = 0 }, "MaxWait"},
		{"huge max wait", func(c *Config) { c.MaxWait = time.Hour }, "MaxWait"},
		{"no tokens without dev", func(c *Config) { c.Tokens = nil }, "Tokens"},
		{"dev without addr", func(c *Config) { c.Tokens = nil; c.Dev = true }, "Addr"},
		{"dev on every interface", func(c *Config) { c.Dev = true; c.Addr = ":8080" }, "Addr"},
		{"dev on a public address", func(c *Config) { c.Dev = true; c.Addr = "192.0.2.1:8080" }, "Addr"},
		{"short secret", func(c *Config) { c.Tokens[0].Secret = "s3cr3t-short" }, "Tokens[0].Secret"},
		{"secret with space", func(c *Config) { c.Tokens[0].Secret = "s3cr3t value abcdef123456" }, "Tokens[0].Secret"},
		{"no name", func(c *Config) { c.Tokens[0].Name = "" }, "Tokens[0].Name"},
		{"name holds the secret", func(c *Config) { c.Tokens[0].Name = "x" + c.Tokens[0].Secret }, "Tokens[0].Name"},
		{"no scopes", func(c *Config) { c.Tokens[0].Scopes = nil }, "Tokens[0].Scopes"},
		{"bad scope", func(c *Config) { c.Tokens[0].Scopes = []string{"admin"} }, "Tokens[0].Scopes[0]"},
		{"bad route", func(c *Config) { c.Tokens[0].Routes = []string{"Bad Route"} }, "Tokens[0].Routes[0]"},
		{"bad account", func(c *Config) { c.Tokens[0].Accounts = []string{" acct"} }, "Tokens[0].Accounts[0]"},
		{"duplicate name", func(c *Config) {
			c.Tokens = append(c.Tokens, Token{Name: "ci", Secret: "other-secret-value-0123456", Scopes: []string{ScopeRead}})
		}, "Tokens[1].Name"},
		{"duplicate secret", func(c *Config) {
			c.Tokens = append(c.Tokens, Token{Name: "ci2", Secret: "s3cr3t-value-abcdef123456", Scopes: []string{ScopeRead}})
		}, "Tokens[1].Secret"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := base()
			cfg.Tokens = append([]Token(nil), cfg.Tokens...)
			c.edit(&cfg)
			err := cfg.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.field+":") {
				t.Fatalf("error %q does not name %s", err, c.field)
			}
			for _, tok := range cfg.Tokens {
				if len(tok.Secret) >= 8 && strings.Contains(err.Error(), tok.Secret) {
					t.Fatalf("error %q shows a secret", err)
				}
			}
			if _, err := New(cfg); err == nil {
				t.Fatal("New accepted an invalid config")
			}
		})
	}
	dev := base()
	dev.Tokens, dev.Dev, dev.Addr = nil, true, "127.0.0.1:8080"
	if err := dev.Validate(); err != nil {
		t.Fatalf("dev on loopback refused: %v", err)
	}
}
