# xidlelock: `make run` and `make test` do all the set-up on a fresh Debian machine.
SWIFT ?= swift
PREFIX ?= /usr/local
DESTDIR ?=
SYSCONFDIR ?= /etc
BINDIR ?= $(PREFIX)/bin
# The guard's daemon: root runs it (xidlelock-guard.service); users run `xidlelock`.
LIBEXECDIR ?= $(PREFIX)/libexec
MANDIR ?= $(PREFIX)/share/man/man1
AUTOSTARTDIR ?= $(SYSCONFDIR)/xdg/autostart
USERUNITDIR ?= $(PREFIX)/lib/systemd/user
SYSTEMUNITDIR ?= $(PREFIX)/lib/systemd/system
DBUSSERVICEDIR ?= $(PREFIX)/share/dbus-1/services
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
EXAMPLESDIR ?= $(PREFIX)/share/doc/xidlelock/examples
# The journal's explanations of the audit entries (`journalctl -x`); journald reads
# /usr/lib/systemd/catalog and /usr/local/lib/systemd/catalog.
CATALOGDIR ?= $(PREFIX)/lib/systemd/catalog
# The example Prometheus rules, their promtool test, and the JSON Schema of root's
# `doctor --policy --json`, beside the other examples.
EXAMPLEFILES = packaging/examples/config packaging/examples/policy packaging/examples/policy.stig \
	packaging/examples/xidlelock.rules.yml packaging/examples/xidlelock.rules.test.yml \
	packaging/examples/doctor-policy.schema.json
# README.md there, and the guides under docs/ beside it, so that its links work.
DOCDIR ?= $(PREFIX)/share/doc/xidlelock
DOCS = docs/admin.md docs/development.md docs/flags.md docs/install.md docs/security.md docs/usage.md

# The release binary runs where no Swift toolchain is installed: the Swift runtime
# is linked in statically and no rpath points back at the build tree.
# libstdc++ (which the static Swift runtime needs) and libgcc are linked in
# statically too: loading libstdc++.so and resolving its symbols took most of
# `xidlelock idle`'s start-up (measured 2.9 ms against xprintidle's 1.8 ms; 2.5 ms
# without it). The toolchain's own link line names -lstdc++ before any flag a
# build can add, so a one-line linker script called libstdc++.so, found first,
# points it at the archive. The X libraries stay shared (PIE, ASLR, Depends).
# Linked with lld (it comes with the toolchain) for `-z pack-relative-relocs`: the
# ~20,000 relative relocations of a PIE become a 3.6 KB DT_RELR table that the
# loader applies in a fraction of the instructions (glibc >= 2.36, which
# dpkg-shlibdeps then puts in Depends). --no-export-dynamic undoes the toolchain's
# -export-dynamic: nothing loads symbols from the executable, and ~1,400 exported
# Swift symbols only made every symbol lookup of the loader longer.
# Each function in a section of its own, and those `xidlelock idle` runs placed first
# (bench/startup.order, from `make startup-order`): its code then spans 16 pages, not
# 36, and each page it touches is a page fault at start-up.
# -z now: full RELRO, the imported functions' slots read-only once resolved at start
# (a locker's agent should not have a writable GOT). It costs `xidlelock idle` 0.15 M
# instructions of symbol lookups but no measurable time (page faults dominate: 189
# with it, 191 without; task-clock 1.13 ms against 1.14 ms).
LINKSHIM = $(CURDIR)/.build/linkshim
RELEASE_FLAGS = -c release --static-swift-stdlib --disable-local-rpath \
	-Xswiftc -L$(LINKSHIM) -Xswiftc -Xclang-linker -Xswiftc -static-libgcc \
	-Xswiftc -Xclang-linker -Xswiftc -fuse-ld=lld \
	-Xlinker -z -Xlinker pack-relative-relocs -Xlinker --no-export-dynamic \
	-Xswiftc -Xfrontend -Xswiftc -function-sections \
	-Xlinker --symbol-ordering-file=$(CURDIR)/bench/startup.order -Xlinker --no-warn-symbol-ordering \
	-Xlinker -z -Xlinker now
RELEASE_BIN = .build/release/xidlelock
GUARD_BIN = .build/release/xidlelock-guard
# Files generated for `install` (paths filled in, completion scripts).
GEN = .build/packaging

.PHONY: all build release run test deps test-deps clean install uninstall deb packaging-check bench \
	fuzz fuzz-short check-sanitizers startup-order test-desktop bench-players bench-guard

all: release

deps:
	@sh .ci/install-packages build

test-deps:
	@sh .ci/install-packages build test package

build: deps
	$(SWIFT) build

release: deps $(LINKSHIM)/libstdc++.so
	$(SWIFT) build $(RELEASE_FLAGS)

$(LINKSHIM)/libstdc++.so:
	@mkdir -p $(LINKSHIM)
	@archive=$$(cc -print-file-name=libstdc++.a); \
	  [ -f "$$archive" ] || { echo "make: no static libstdc++.a (install libstdc++-12-dev)" >&2; exit 1; }; \
	  echo "INPUT($$archive)" > $@

# Runs the agent with its defaults (lock after 10m, the first installed locker).
run: release
	@if [ -z "$${DISPLAY:-}" ]; then \
	  echo "make run: DISPLAY is not set: start it inside your X session (xidlelock watches that session's input)." >&2; \
	  exit 1; \
	fi
	$(RELEASE_BIN) $(ARGS)

# One release build per run: `packaging-check` builds it (through `deb`) and
# everything after reuses it.
# The unit tests run all at once; the integration tests (each with its own Xvfb,
# agents, lockers, and for some two dbus-daemons and logind's mock) three at a
# time: all at once, on 2 cores, they starve the timing tests beside them.
TESTBIN = .build/debug/xidlelockPackageTests.xctest
test: test-deps
	@sh .ci/start-journald
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --filter 'IdleCoreTests|AgentTests'
	$(TESTBIN) --testing-library swift-testing --filter IntegrationTests --experimental-maximum-parallelization-width 3
	$(MAKE) fuzz-short
	$(MAKE) check-sanitizers
	$(MAKE) packaging-check

# Fuzzing (fuzz/run.sh): libFuzzer and lld come with the Swift toolchain, so no
# Debian package is needed; swiftc is the one next to $(SWIFT). `make fuzz` runs
# each target FUZZ_SECONDS and merges the inputs that add coverage into
# fuzz/corpus, to be committed. A crash fails the run and stays in fuzz/crashes/.
SWIFTC ?= $(SWIFT)c
FUZZ_SECONDS ?= 60
# `make test` (CI) fuzzes briefly from the committed corpus and changes no file in it.
FUZZ_SHORT_SECONDS ?= 15

fuzz: deps
	SWIFTC=$(SWIFTC) FUZZ_SECONDS=$(FUZZ_SECONDS) sh fuzz/run.sh --merge

fuzz-short: deps
	SWIFTC=$(SWIFTC) FUZZ_SECONDS=$(FUZZ_SHORT_SECONDS) sh fuzz/run.sh

# The unit-test targets (IdleCoreTests, AgentTests) under AddressSanitizer and
# UndefinedBehaviorSanitizer, in one build of their own (.build-asan).
check-sanitizers: deps
	SWIFT=$(SWIFT) sh .ci/check-sanitizers

# The binary is installed 0711, executable but not readable by users: the kernel then
# starts every agent non-dumpable from its first instruction (would_dump in fs/exec.c),
# also after a reload's exec, so that under the admin's policy its user can neither
# ptrace it nor open /proc/PID/mem to patch it; the guard refuses an agent whose
# executable its user can read. Nothing is secret in it (the package is public).
install: release
	@mkdir -p $(GEN)
	sed 's|@bindir@|$(BINDIR)|g' packaging/xidlelock.desktop > $(GEN)/xidlelock.desktop
	sed 's|@bindir@|$(BINDIR)|g' packaging/xidlelock.service > $(GEN)/xidlelock.service
	sed -e 's|@bindir@|$(BINDIR)|g' -e 's|@libexecdir@|$(LIBEXECDIR)|g' packaging/xidlelock-guard.service > $(GEN)/xidlelock-guard.service
	$(RELEASE_BIN) completions bash > $(GEN)/xidlelock.bash
	$(RELEASE_BIN) completions zsh > $(GEN)/_xidlelock
	$(RELEASE_BIN) completions fish > $(GEN)/xidlelock.fish
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(MANDIR) $(DESTDIR)$(AUTOSTARTDIR) \
	  $(DESTDIR)$(USERUNITDIR) $(DESTDIR)$(SYSTEMUNITDIR) $(DESTDIR)$(DBUSSERVICEDIR) \
	  $(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR) $(DESTDIR)$(EXAMPLESDIR) \
	  $(DESTDIR)$(DOCDIR)/docs $(DESTDIR)$(CATALOGDIR)
	install -m 711 $(RELEASE_BIN) $(DESTDIR)$(BINDIR)/xidlelock
	install -m 755 $(GUARD_BIN) $(DESTDIR)$(LIBEXECDIR)/xidlelock-guard
	install -m 644 man/xidlelock.1 $(DESTDIR)$(MANDIR)/xidlelock.1
	install -m 644 $(GEN)/xidlelock.desktop $(DESTDIR)$(AUTOSTARTDIR)/xidlelock.desktop
	install -m 644 $(GEN)/xidlelock.service $(DESTDIR)$(USERUNITDIR)/xidlelock.service
	install -m 644 $(GEN)/xidlelock-guard.service $(DESTDIR)$(SYSTEMUNITDIR)/xidlelock-guard.service
	install -m 644 packaging/org.freedesktop.ScreenSaver.service $(DESTDIR)$(DBUSSERVICEDIR)/org.freedesktop.ScreenSaver.service
	install -m 644 $(GEN)/xidlelock.bash $(DESTDIR)$(BASHCOMPDIR)/xidlelock
	install -m 644 $(GEN)/_xidlelock $(DESTDIR)$(ZSHCOMPDIR)/_xidlelock
	install -m 644 $(GEN)/xidlelock.fish $(DESTDIR)$(FISHCOMPDIR)/xidlelock.fish
	install -m 755 packaging/examples/dim-screen.sh packaging/examples/logout.sh $(DESTDIR)$(EXAMPLESDIR)/
	install -m 644 $(EXAMPLEFILES) $(DESTDIR)$(EXAMPLESDIR)/
	install -m 644 packaging/xidlelock.catalog $(DESTDIR)$(CATALOGDIR)/xidlelock.catalog
	install -m 644 README.md $(DESTDIR)$(DOCDIR)/README.md
	install -m 644 $(DOCS) $(DESTDIR)$(DOCDIR)/docs/
	@if [ -z "$(DESTDIR)" ] && command -v journalctl >/dev/null; then journalctl --update-catalog || true; fi
	@[ -n "$(DESTDIR)" ] || echo "make install: to guard the sessions under /etc/xidlelock/policy:" \
	  "systemctl daemon-reload && systemctl enable --now xidlelock-guard.service"

# Removes exactly what `install` put there (and the examples' and docs' own folders if empty).
# Into the running system (no DESTDIR) it first stops and disables the guard: its unit
# restarts it every second, for ever, and without the binary each start fails.
uninstall:
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ] && [ -f $(SYSTEMUNITDIR)/xidlelock-guard.service ]; then \
	  systemctl disable --now xidlelock-guard.service || true; \
	fi
	rm -f $(DESTDIR)$(BINDIR)/xidlelock \
	  $(DESTDIR)$(LIBEXECDIR)/xidlelock-guard \
	  $(DESTDIR)$(MANDIR)/xidlelock.1 \
	  $(DESTDIR)$(AUTOSTARTDIR)/xidlelock.desktop \
	  $(DESTDIR)$(USERUNITDIR)/xidlelock.service \
	  $(DESTDIR)$(SYSTEMUNITDIR)/xidlelock-guard.service \
	  $(DESTDIR)$(DBUSSERVICEDIR)/org.freedesktop.ScreenSaver.service \
	  $(DESTDIR)$(BASHCOMPDIR)/xidlelock \
	  $(DESTDIR)$(ZSHCOMPDIR)/_xidlelock \
	  $(DESTDIR)$(FISHCOMPDIR)/xidlelock.fish \
	  $(DESTDIR)$(EXAMPLESDIR)/dim-screen.sh \
	  $(DESTDIR)$(EXAMPLESDIR)/logout.sh \
	  $(addprefix $(DESTDIR)$(EXAMPLESDIR)/,$(notdir $(EXAMPLEFILES))) \
	  $(DESTDIR)$(CATALOGDIR)/xidlelock.catalog \
	  $(DESTDIR)$(DOCDIR)/README.md \
	  $(addprefix $(DESTDIR)$(DOCDIR)/,$(DOCS))
	rmdir $(DESTDIR)$(EXAMPLESDIR) $(DESTDIR)$(dir $(EXAMPLESDIR)) $(DESTDIR)$(DOCDIR)/docs $(DESTDIR)$(DOCDIR) $(DESTDIR)$(CATALOGDIR) 2>/dev/null || true
	@if [ -z "$(DESTDIR)" ] && command -v journalctl >/dev/null; then journalctl --update-catalog || true; fi
	@if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then systemctl daemon-reload || true; fi

# dist/xidlelock_VERSION_ARCH.deb, from `make install DESTDIR=... PREFIX=/usr`.
deb: release
	@sh .ci/install-packages package
	sh packaging/build-deb.sh

# Lints the packaging files, installs and uninstalls into a scratch DESTDIR, and
# checks the .deb: its libraries, and that it runs without the Swift toolchain.
packaging-check: deb
	sh packaging/check.sh

# The agent on a real Debian 12 desktop (Tests/Desktop/run.sh): a VM with systemd-logind, Xorg,
# lightdm and i3, booted once for every scenario, the .deb installed in it. The image is
# built under /var/tmp/xidlelock-desktop (XDL_DIR) and rebuilt only when its recipe
# changes. Not part of `make test`: a boot costs a minute of CI's two cores.
# `make test-desktop ARGS='--only c,d --keep'` passes options.
test-desktop: deb
	@sh .ci/install-packages desktop
	bash Tests/Desktop/run.sh $(ARGS)

# Benchmarks side by side with xautolock, xss-lock and xprintidle; rewrites BENCHMARKS.md.
# `make bench QUICK=1` takes about a minute, `make bench` about three.
# Measures the binary `make release` builds, the one that ships.
bench: release
	@sh .ci/install-packages bench
	$(SWIFT) build $(RELEASE_FLAGS) --product IdleCoreBench
	python3 bench/bench.py $(if $(QUICK),--quick)

# Issue #31's table: real players and presenters from Debian on Xvfb with a private
# session bus, under xidlelock and xss-lock: held while playing, the time to the lock
# after kill -9, what status names, what each application calls on the bus. About
# 15 minutes. `make bench-players ARGS='--rows totem,vlc --lock 8'` passes options.
bench-players: release
	@sh .ci/install-packages players
	$(SWIFT) build --product TestWindow
	XIDLELOCK=$(RELEASE_BIN) bash bench/players.sh --out bench/results/players.md $(ARGS)

# Issue #36's table: the guard (root) with N = 1, 10, 100 and 300 sessions, each with its
# own throwaway user (xilbench001..., removed at the end), Xvfb and agent, beside the
# issue's figures: bench/results/guard-scale.md. Needs root; about 15 minutes, 300 Xvfb
# and agents at once (QUICK=1: N = 1 and 10, about a minute). Not part of `make bench`.
# `make bench-guard ARGS='--sessions 1,10,100 --window 30'` passes options.
bench-guard: release
	@sh .ci/install-packages bench
	python3 bench/guard-scale.py $(if $(QUICK),--quick) $(ARGS)

# Rewrites bench/startup.order from a callgrind run of `xidlelock idle` (needs valgrind).
startup-order: release
	@command -v valgrind >/dev/null || { echo "make startup-order needs valgrind (apt-get install valgrind)" >&2; exit 1; }
	python3 bench/startup-order.py
	rm -f $(RELEASE_BIN)  # relinked: the build does not track the order file
	$(SWIFT) build $(RELEASE_FLAGS)

clean:
	rm -rf .build .build-asan .build-ubsan dist
