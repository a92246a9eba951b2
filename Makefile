# sagebox: `make demo` runs the main job, `make test` runs every test.
.DEFAULT_GOAL := help
GO ?= go
BIN := bin/sagebox

# Debian packages sagebox and its tests use. Debian's torch is for
# /usr/bin/python3; libopenblas0-pthread keeps it from falling back to the
# (14x slower) reference BLAS. gcc and libc6-dev: the race detector needs cgo.
DEB_PACKAGES := gcc libc6-dev python3 python3-venv python3-pip python3-torch python3-torchvision python3-numpy libopenblas0-pthread \
	python3-sklearn python3-pytest python3-boto3 awscli openmpi-bin wrk python3-fastapi python3-uvicorn python3-uvloop python3-httptools libnss-wrapper \
	python3-pil chromium

.PHONY: help deps build demo test test-go test-python vet bench bench-modelserver clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

deps: ## install the Debian packages sagebox needs (skips apt when all are present)
	@scripts/deps.sh $(DEB_PACKAGES)

build: ## build bin/sagebox
	$(GO) build -o $(BIN) ./cmd/sagebox

demo: deps build ## train the bundled digits classifier on a local sagebox server
	scripts/demo.sh

vet: ## go vet and gofmt
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

# Every package but e2e runs under the race detector. Measured 12-03 on a
# 2-core machine shared with other jobs (load 4-10), one package at a time:
# all of them take 12.7 min with -race, 4 of which is compiling the
# dependencies with -race once (cmd/sagebox's aws-sdk-go-v2); the slowest
# are modelserver 165 s (128 s without), objectstore 117 s (9 s), training
# 92 s (50 s), s3api 73 s (29 s). e2e drives bin/sagebox, a separate
# process the test's -race would not instrument, so it runs without.
RACE_PKGS = $$($(GO) list ./... | grep -v '/e2e$$')

test-go: build
	SAGEBOX_STRICT_TOOLS=$${SAGEBOX_STRICT_TOOLS:-1} $(GO) test -race -count=1 -timeout 30m $(RACE_PKGS)
	SAGEBOX_STRICT_TOOLS=$${SAGEBOX_STRICT_TOOLS:-1} $(GO) test -count=1 -timeout 30m ./e2e/

test-python:
	/usr/bin/python3 -m pytest -q python/tests

test: deps vet test-go test-python ## install deps, then run vet, Go tests (unit and fuzz seeds under -race, end-to-end) and pytest

bench: deps build ## run the benchmarks and print ratio tables
	scripts/bench.sh

bench-modelserver: deps build ## sagebox vs FastAPI vs direct calls (bench/modelserver)
	scripts/bench.sh modelserver

clean:
	rm -rf bin
