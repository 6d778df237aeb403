#!/usr/bin/env bash
# `make sanitize`: the engine's Rust tests and its C ABI (tests/c/capi_stress.c) under
# AddressSanitizer (LeakSanitizer included), and Miri over the pure-Rust units, each
# with the nightly toolchain when it is installed; what cannot run is reported as
# SKIPPED, never as a pass. Every suite runs to its end; the exit status says whether
# all were clean.
#
#   rustup toolchain install nightly             # for AddressSanitizer
#   rustup +nightly component add miri rust-src  # for Miri
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
host=$(rustc -vV | sed -n 's/^host: //p')

if cargo +nightly --version >/dev/null 2>&1; then
    echo "== AddressSanitizer: cargo +nightly test -p cumem --lib --tests (target/asan)"
    # --target keeps build scripts and proc macros uninstrumented; the separate target
    # dir keeps these builds from invalidating the normal ones. --no-fail-fast: every
    # suite runs to its end, whatever an earlier one reported.
    RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address" \
        ASAN_OPTIONS="detect_leaks=1" \
        cargo +nightly test -p cumem --target "$host" --target-dir target/asan --lib --tests --no-fail-fast \
        || status=1
    # The C ABI under AddressSanitizer: an instrumented libcumem.so driven by a C
    # program built with -fsanitize=address (whose runtime the library then uses),
    # several threads of allocations, frees, checked copies, streams and pinned uploads.
    if command -v cc >/dev/null 2>&1; then
        echo "== AddressSanitizer: the C ABI (tests/c/capi_stress.c against an instrumented libcumem.so)"
        if RUSTFLAGS="-Zsanitizer=address" \
            cargo +nightly build -p cumem --lib --target "$host" --target-dir target/asan \
            && cc -fsanitize=address -fno-omit-frame-pointer -g -O1 -pthread -Iinclude \
                tests/c/capi_stress.c -o target/asan/capi_stress \
                -L"target/asan/$host/debug" -lcumem -Wl,-rpath,"$PWD/target/asan/$host/debug"; then
            for fault in "" "alloc:0.05,free:0.05,copy:0.02,stream:0.02,seed=3"; do
                echo "-- capi_stress 4 threads${fault:+, CUMEM_FAULT=$fault}"
                CUMEM_DEVICE=host CUMEM_FAULT="$fault" ASAN_OPTIONS="detect_leaks=1" \
                    target/asan/capi_stress 4 3000 || status=1
            done
        else
            status=1
        fi
    else
        echo "== AddressSanitizer, C ABI: SKIPPED (no C compiler)"
    fi
else
    echo "== AddressSanitizer: SKIPPED (no nightly toolchain; rustup toolchain install nightly)"
fi

if cargo +nightly miri --version >/dev/null 2>&1; then
    echo "== Miri: the pure-Rust units (configuration, fault specs, live table, size formatting)"
    MIRIFLAGS="-Zmiri-disable-isolation" \
        cargo +nightly miri test -p cumem --lib -- config:: live:: format:: \
        || status=1
else
    echo "== Miri: SKIPPED (not installed; rustup +nightly component add miri rust-src)"
fi
exit $status
