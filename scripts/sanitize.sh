#!/usr/bin/env bash
# `make sanitize`: the engine's Rust tests under AddressSanitizer (LeakSanitizer
# included), and Miri over the pure-Rust units, each with the nightly toolchain when it
# is installed; what cannot run is reported as SKIPPED, never as a pass.
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
    # dir keeps these builds from invalidating the normal ones.
    RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address" \
        ASAN_OPTIONS="detect_leaks=1" \
        cargo +nightly test -p cumem --target "$host" --target-dir target/asan --lib --tests \
        || status=1
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
