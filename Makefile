# xidlelock: `make run` and `make test` do all the set-up on a fresh Debian machine.
SWIFT ?= swift
PREFIX ?= /usr/local
DESTDIR ?=
RELEASE_BIN = .build/release/xidlelock

.PHONY: all build release run test deps test-deps bench clean

all: release

deps:
	@sh .ci/install-packages build

test-deps:
	@sh .ci/install-packages build test

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

# Runs the agent with its defaults (lock after 10m, the first installed locker).
run: release
	@if [ -z "$${DISPLAY:-}" ]; then \
	  echo "make run: DISPLAY is not set: start it inside your X session (xidlelock watches that session's input)." >&2; \
	  exit 1; \
	fi
	$(RELEASE_BIN) $(ARGS)

test: test-deps
	$(SWIFT) build
	$(SWIFT) test

# Benchmarks side by side with xautolock, xss-lock and xprintidle; rewrites BENCHMARKS.md.
# `make bench QUICK=1` takes about a minute, `make bench` about three.
bench:
	@sh .ci/install-packages build bench
	$(SWIFT) build -c release
	python3 bench/bench.py $(if $(QUICK),--quick)

clean:
	rm -rf .build
