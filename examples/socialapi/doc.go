// Command socialapi runs the fake social posting API of settle's test
// harness (package fakeapi) as a standalone server, for trying `settle
// serve --dev` by hand. It takes its bearer token from $SOCIAL_TOKEN (never
// printed) and prints the SOCIAL_BASE_URL that examples/routes/social.yaml
// reads. Flags: --drop N makes the next N posts commit and then drop their
// response (the case settle exists for); --honor-keys honours
// Idempotency-Key.
//
// It must never import: testing, testharness, fsm, adapter/..., ledger,
// producer, consumers/..., projector, api, mcp, cmd/....
package main
