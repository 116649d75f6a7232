package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/settle-dev/settle/fakeapi"
)

func main() {
	drop := flag.Int("drop", 1, "the next N posts commit, then drop the response")
	honor := flag.Bool("honor-keys", false, "honour Idempotency-Key")
	flag.Parse()
	token := os.Getenv("SOCIAL_TOKEN")
	if len(token) < 16 {
		fmt.Fprintln(os.Stderr, "socialapi: set SOCIAL_TOKEN to a token of 16+ characters, e.g. export SOCIAL_TOKEN=$(head -c16 /dev/urandom | od -An -tx1 | tr -d ' \\n')")
		os.Exit(2)
	}
	api := fakeapi.NewSocialAPIServer(fakeapi.SocialConfig{Token: token, HonorIdempotencyKey: *honor})
	defer api.Close()
	for k := 0; k < *drop; k++ {
		api.Next(fakeapi.CommitThenDrop())
	}
	fmt.Printf("export SOCIAL_BASE_URL=%s\n", api.URL())
	fmt.Fprintf(os.Stderr, "fake social API on %s; the next %d post(s) will lose their response. Ctrl-C stops it.\n", api.URL(), *drop)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	fmt.Fprintf(os.Stderr, "posts: %d request(s), %d effect(s)\n", api.Writes(), api.Effects())
}
