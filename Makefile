# settle — see README.md. Every target needs only Go and the module proxy.
GO       ?= go
PKGS     := ./...
SEED     ?= 1
INTENTS  ?= 100000
BENCHTIME ?= 2s
SIM      := ^TestSimulationSeeded$$

.PHONY: build test short demo bench bench-cluster bench-smoke bench-peers lint soak fuzz faults clean

build:
	$(GO) build -buildvcs=auto -o bin/ ./cmd/settle ./examples/socialapi

# The test command of README and .ci/run: vet, then every test with the race
# detector against real embedded nats-servers and real HTTP fakes, then the
# seeded simulation (two worlds of 2,000 intents, seeds SEED and SEED+1,
# run at once; without -race, which would only slow the embedded server
# down) printing a line per world and the summary line.
test: lint
	$(GO) test -race -count=1 -timeout 9m -skip '$(SIM)' $(PKGS)
	$(GO) test -count=1 -timeout 9m -run '$(SIM)' -v ./consumers/reconcile/ -args -sim.seed=$(SEED) -sim.intents=4000 -sim.batch=2000 -sim.parallel=2
	@$(MAKE) --no-print-directory bench-smoke

# Every benchmark of make bench once, on small logs and the cluster's at 2
# callers (42 s on a busy machine, about half of it the cluster's, which
# starts four nats-server processes): the figures mean nothing, but each
# benchmark's own checks run (every intent made exactly one effect, the
# audit found no violation, the projection caught up), so that make bench
# cannot rot unseen.
bench-smoke:
	@figs=$$(mktemp); out=$$(SETTLE_BENCH_FIGURES=$$figs SETTLE_BENCH_INTENTS=2000 SETTLE_BENCH_EVENTS=3000 SETTLE_BENCH_CLUSTER_CONC=2 $(GO) test -count=1 -run '^$$' -bench . -benchtime 1x -timeout 5m ./bench/ ./projector/ ./consumers/... 2>&1) || { echo "$$out"; rm -f $$figs; exit 1; }; \
	  $(GO) run ./bench/targets --require-all $$figs || { rm -f $$figs; exit 1; }; rm -f $$figs; \
	  echo "bench-smoke: every benchmark of make bench ran once, its checks passed, and every target's figures were reported ($$(echo "$$out" | grep -c '^Benchmark') benchmarks)"

# The fast tier (seconds): every test that needs no nats-server and no
# built binary; the others skip under -short (testharness.SkipShort).
short:
	$(GO) test -short -count=1 $(PKGS)

demo:
	$(GO) run ./cmd/settle demo

# Every benchmark of BENCHMARKS.md in one run (about ten minutes): raw
# JetStream appends (one by one and in atomic batches), Execute at 1, 16, 64
# and 256 callers, reconciliation, audit and projection against a raw read,
# the heap with 1M finished intents, the audit's per-message work
# (BenchmarkPrepareMsg), the projector's SQLite side alone
# (BenchmarkApplyStore) and Execute on a 3-node cluster (bench-cluster).
# Every figure of ./bench/ is also written to $(FIGURES); the targets
# table (go run ./bench/targets) is printed at the end, each
# target a figure or a ratio of two figures of this run, PASS, MISS or
# "not measured".
# SETTLE_BENCH_SKIP_AUDIT=1 with -bench Replay -cpuprofile profiles the
# projection alone.
FIGURES ?= $(or $(TMPDIR),/tmp)/settle-bench-figures.jsonl
bench:
	rm -f $(FIGURES)
	SETTLE_BENCH_FIGURES=$(FIGURES) $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -timeout 60m ./bench/ ./projector/ ./consumers/...
	$(GO) run ./bench/targets $(FIGURES)

# Execute against nats-server processes of their own (testharness.
# StartNATSCluster, deploy/nats): one server, a 3-node cluster with an R3
# stream, and two settle nodes sharing that cluster, at 1, 64 and 256
# callers (bench/cluster_test.go; a part of make bench), then the ratios.
bench-cluster:
	rm -f $(FIGURES)
	SETTLE_BENCH_FIGURES=$(FIGURES) $(GO) test -run '^$$' -bench '^BenchmarkExecuteCluster$$' -benchtime $(BENCHTIME) -timeout 20m ./bench/
	$(GO) run ./bench/targets $(FIGURES)

# settle, DBOS Transact Go on PostgreSQL and the Temporal dev server on one
# workload, side by side (bench/peers, its own module; run as root: it may
# install PostgreSQL with apt and starts it as the postgres user).
bench-peers:
	bash bench/peers/run.sh

# gofmt, vet, and the import direction: every package's doc.go says what
# it must never import, and internal/layering fails on any such arrow,
# direct or not (the settle binary, for one, must never link testing).
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	cd bench/peers && $(GO) vet ./...
	$(GO) test -count=1 ./internal/layering/

# The process-level fault suite (faults/): real settle and nats-server
# processes killed, stopped, partitioned, filled and damaged, several seeds
# each and a 100,000-intent run sampling the heap; writes FAULTS.md. Needs
# root for the full-disk scenario (a tmpfs), as CI has.
faults:
	$(GO) test -count=1 -timeout 40m -v ./faults/ -args -faults.full -faults.report=$(CURDIR)/FAULTS.md

# The long seeded simulation (not part of make test): make soak SEED=n
# INTENTS=n runs INTENTS intents in worlds of 2,000 (seeds SEED, SEED+1, ...)
# and prints each world's line and the total.
soak:
	$(GO) test -count=1 -timeout 0 -run '$(SIM)' -v ./consumers/reconcile/ -args -sim.seed=$(SEED) -sim.intents=$(INTENTS)

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime 60s ./events/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeFastPathAgrees$$' -fuzztime 60s ./events/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeHold$$' -fuzztime 30s ./events/
	$(GO) test -run '^$$' -fuzz '^FuzzCanonicalize$$' -fuzztime 60s ./events/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeArgs$$' -fuzztime 60s ./mcp/
	$(GO) test -run '^$$' -fuzz '^FuzzHintMask$$' -fuzztime 30s ./consumers/audit/
	$(GO) test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime 30s ./consumers/webhook/
	$(GO) test -run '^$$' -fuzz '^FuzzVerifyAgrees$$' -fuzztime 30s ./examples/webhook-receiver/
	$(GO) test -run '^$$' -fuzz '^FuzzCheck$$' -fuzztime 60s ./adapter/httproute/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 30s ./adapter/httproute/
	$(GO) test -run '^$$' -fuzz '^FuzzTemplate$$' -fuzztime 30s ./adapter/httproute/
	$(GO) test -run '^$$' -fuzz '^FuzzNormalizeIsIdempotent$$' -fuzztime 30s ./adapter/httproute/
	$(GO) test -run '^$$' -fuzz '^FuzzRetryAfter$$' -fuzztime 30s ./adapter/
	$(GO) test -run '^$$' -fuzz '^FuzzScrub$$' -fuzztime 30s ./adapter/
	$(GO) test -run '^$$' -fuzz '^FuzzSubmitBody$$' -fuzztime 30s ./api/
	$(GO) test -run '^$$' -fuzz '^FuzzParseTokens$$' -fuzztime 30s ./node/

clean:
	rm -rf bin
