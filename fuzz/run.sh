#!/bin/sh
# Builds the libFuzzer targets and runs each for FUZZ_SECONDS (default 60).
#
#   sh fuzz/run.sh [--merge] [TARGET...]     targets: control-protocol flags duration config-file
#
# libFuzzer and lld ship with the Swift toolchain: no Debian package is needed.
# One binary, .build/fuzz/bin/fuzz, holds every target: IdleCore's sources and
# fuzz/*.swift compiled as one module with -sanitize=fuzzer,address (no SwiftPM
# plumbing); FUZZ_TARGET names the target a run fuzzes. One compile on every core
# (-num-threads) took 56 s here, where four compiles, two at a time, took 147 s.
#
# The run reads the seed corpus in fuzz/corpus/TARGET and writes what it finds to
# .build/fuzz/corpus/TARGET, so the repository is left as it was. With --merge
# (`make fuzz`), the inputs that reach code the corpus did not are then merged into
# fuzz/corpus (libFuzzer's -merge=1 with -use_counters=0: new edges only, not new
# hit counts, which keeps ~150 files of ~8 KB instead of ~650 files after 10
# minutes). FUZZ_SECONDS=0 skips fuzzing and only merges what .build/fuzz holds.
#
# A crash or a broken invariant (fuzz/*.swift trap with "FUZZ FINDING") leaves the
# input in fuzz/crashes/ and fails the run, after every target has had its turn.
# Reproduce with: SWIFT_BACKTRACE=enable=no FUZZ_TARGET=TARGET .build/fuzz/bin/fuzz fuzz/crashes/FILE
set -eu
cd "$(dirname "$0")/.."

SWIFTC=${SWIFTC:-swiftc}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
merge=no
if [ "${1:-}" = "--merge" ]; then merge=yes; shift; fi
all_targets="control-protocol flags duration config-file"
targets=${*:-$all_targets}
for t in $targets; do
    case " $all_targets " in
        *" $t "*) ;;
        *) echo "fuzz/run.sh: unknown target '$t' ($all_targets)" >&2; exit 64 ;;
    esac
done

out=.build/fuzz
mkdir -p "$out/bin" "$out/corpus" fuzz/crashes

# A Swift trap would otherwise start the Swift backtracer, which catches the signal
# before libFuzzer does (and was seen to hang when libFuzzer exits under it):
# libFuzzer must see the signal to save the input.
SWIFT_BACKTRACE=enable=no
# The Swift runtime keeps its metadata caches for the life of the process; they are
# not leaks. Everything else ASan finds (overflows, use after free) stays fatal.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export SWIFT_BACKTRACE ASAN_OPTIONS

bin=$out/bin/fuzz
jobs=$(nproc 2>/dev/null || echo 2)

# Rebuilds the binary only when a source is newer.
build() {
    # shellcheck disable=SC2046 # the file list is meant to split (no spaces in it)
    if [ -x "$bin" ] && [ -z "$(find Sources/IdleCore/*.swift fuzz/*.swift -newer "$bin")" ]; then return 0; fi
    echo "fuzz: building $bin"
    # The module is called IdleCore because its sources name it (IdleCore.duration).
    # shellcheck disable=SC2046
    "$SWIFTC" -sanitize=fuzzer,address -parse-as-library -O -wmo -num-threads "$jobs" -gline-tables-only \
        -use-ld=lld -module-name IdleCore Sources/IdleCore/*.swift fuzz/*.swift -o "$bin"
}

count() { find "$1" -type f | wc -l | tr -d ' '; }

# One target's fuzzing (and merge): its lines on stdout, a finding on stderr, and a
# non-zero exit when it failed.
fuzz_one() {
    t=$1
    seeds=fuzz/corpus/$t
    work=$out/corpus/$t
    log=$out/$t.log
    mkdir -p "$work"
    before=$(count "$seeds")
    if [ "$FUZZ_SECONDS" != 0 ]; then
        echo "fuzz: $t for ${FUZZ_SECONDS}s (seed corpus: $before files)"
        # New inputs go to the first folder ($work); the seeds are only read.
        status=0
        FUZZ_TARGET=$t "$bin" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
            -max_len=4096 -dict="fuzz/dict/$t.dict" -print_final_stats=1 \
            -artifact_prefix="fuzz/crashes/$t-" "$work" "$seeds" >"$log" 2>&1 || status=$?
        if [ "$status" != 0 ]; then
            echo "fuzz: $t FAILED (exit $status); the end of $log:" >&2
            tail -n 30 "$log" >&2
            # The cause, which a long stack trace pushes out of the tail.
            echo "fuzz: $t: $(grep -a -m1 -e 'FUZZ FINDING' -e 'Fatal error' -e 'ERROR: ' "$log")" >&2
            return 1
        fi
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log")
        echo "fuzz: $t: ${runs:-?} runs in ${secs:-?}s, no crash"
    fi
    if [ "$merge" = yes ]; then
        FUZZ_TARGET=$t "$bin" -merge=1 -use_counters=0 -timeout=10 -max_len=4096 "$seeds" "$work" >"$out/$t.merge.log" 2>&1 || {
            echo "fuzz: merging into $seeds failed; see $out/$t.merge.log" >&2
            return 1
        }
        echo "fuzz: $t: corpus $before -> $(count "$seeds") files (merged into $seeds)"
    fi
}

# Runs `$1 TARGET` for every target, as many at once as there are cores: a fuzzing
# run keeps one core busy, so on CI's two cores this halves their time. Each job's
# lines are shown together, in the targets' order; the targets that failed are
# added to `failed`.
each_target() {
    job=$1
    batch=""
    for t in $targets; do
        ( "$job" "$t" >"$out/$t.$job.out" 2>&1 ) &
        batch="$batch $t:$!"
        # shellcheck disable=SC2086 # the batch is counted by its words
        set -- $batch
        if [ $# -ge "$jobs" ]; then finish_batch; batch=""; fi
    done
    finish_batch
}

finish_batch() {
    for entry in $batch; do
        t=${entry%%:*}
        if wait "${entry#*:}"; then cat "$out/$t.$job.out"; else cat "$out/$t.$job.out" >&2; failed="$failed $t"; fi
    done
}

build || { echo "fuzz: $bin did not build" >&2; exit 1; }
failed=""
each_target fuzz_one

if [ -n "$failed" ]; then
    echo "fuzz: FAILED:$failed; the inputs are in fuzz/crashes/ (see the top of fuzz/run.sh to reproduce)" >&2
    exit 1
fi
