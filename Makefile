# settle — see README.md. Every target needs only Go and the module proxy.
GO       ?= go
PKGS     := ./...
SEED     ?= 1
BENCHTIME ?= 2s

.PHONY: build test demo bench lint soak fuzz clean

build:
	$(GO) build -o bin/settle ./cmd/settle

# The test command of README and .ci/run: vet, then every test with the race
# detector against real embedded nats-servers and real HTTP fakes.
test: lint
	$(GO) test -race -count=1 -timeout 9m $(PKGS)

demo:
	$(GO) run ./cmd/settle demo

bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -timeout 30m ./bench/ ./projector/ ./consumers/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

# Long seeded simulation and fault runs (not part of make test).
soak:
	$(GO) test -race -count=1 -timeout 60m -run 'Simulation|Soak' ./consumers/ -args -sim.intents=2000 -sim.seed=$(SEED) -sim.bound=55m

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime 60s ./events/
	$(GO) test -run '^$$' -fuzz FuzzCanonicalize -fuzztime 60s ./events/
	$(GO) test -run '^$$' -fuzz FuzzDecodeArgs -fuzztime 60s ./mcp/

clean:
	rm -rf bin
