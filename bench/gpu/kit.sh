#!/usr/bin/env bash
# Builds the kit that bench/gpu/run.sh needs on the GPU machine (no Rust or Julia there) into
# .kit/ (git-ignored), one folder per part, so that each call carries only what its suites use
# (the working tree plus carried paths must stay under 64 MiB):
#
#   .kit/engine/engine.tar.xz   libcumem.so (release, debug info stripped, symbols kept)
#   .kit/bench/bench.tar.xz     cumem-bench, examples launch_bench, hotloop, capi_hotloop
#   .kit/rust/rust.tar.xz       rust/<suite>: the release test binaries (`cargo test --release --no-run`)
#                               of the suites that run on a GPU (tests/*.rs using tests/common/)
#   .kit/julia/                 the Julia 1.5.3 bundle (without Julia's own tests), julia-env.sh
#   .kit/traces/                extra *.trace files for the replay suite (from TRACES=dir)
#   .kit/manifest.txt           the tree's commit (written by every call, `sizes` too: the GPU
#                               machine has no git repository, so run.sh's summary takes it from
#                               here), then the commit, date and size of each part
#
#   JULIA_BUNDLE=<dir> bash bench/gpu/kit.sh [PART...]     (from the repository root)
#
# PARTs: engine bench rust julia traces, or `all` (the default: engine bench rust julia);
# `sizes` builds nothing and prints the sizes and carry lists of what .kit/ holds.
# JULIA_BUNDLE names the folder holding julia-1.5.3-bundle.tar.xz and julia-env.sh (needed for
# the julia part; the repacked bundle is kept and reused while the source bundle is unchanged).
# Binaries are xz-compressed as one tar per part: the test binaries share most of their code,
# which one xz stream with a large dictionary stores once. Prints each part's size, the tree's
# size and, per suite group, the `carry` list and its total against the 64 MiB limit.
set -euo pipefail
cd "$(dirname "$0")/../.."
K=.kit
PARTS=${*:-all}
[ "$PARTS" = all ] && PARTS="engine bench rust julia"
mkdir -p "$K"
LIMIT=$((64 * 1024 * 1024))
WORK=$(mktemp -d /tmp/cumem-kit-build.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
XZ="xz -9e --threads=1 --lzma2=preset=9e,dict=192MiB"   # one block: repeats across files are found

COMMIT="$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench/cumem-bench examples tests Cargo.toml || echo '+changes')"
pack() { # pack PART DIR: DIR's files as $K/PART/PART.tar.xz, and the commit they were built from
    rm -rf "${K:?}/$1"; mkdir -p "$K/$1"
    tar -C "$2" --sort=name --owner=0 --group=0 -cf - . | $XZ > "$K/$1/$1.tar.xz"
    echo "built from $COMMIT on $(date -u +%FT%TZ)" > "$K/$1/built.txt"
}
stripped() { cp "$1" "$2" && strip --strip-debug "$2"; }

for part in $PARTS; do
    case $part in
    engine)
        echo "== engine: cargo build --release" >&2
        cargo build --release
        mkdir -p "$WORK/engine"
        stripped target/release/libcumem.so "$WORK/engine/libcumem.so"
        pack engine "$WORK/engine" ;;
    bench)
        echo "== bench: cumem-bench and the examples" >&2
        cargo build --release -p cumem-bench --bin cumem-bench --example launch_bench
        cargo build --release -p cumem --example hotloop --example capi_hotloop
        mkdir -p "$WORK/bench"
        stripped target/release/cumem-bench "$WORK/bench/cumem-bench"
        for ex in launch_bench hotloop capi_hotloop; do
            stripped "target/release/examples/$ex" "$WORK/bench/$ex"
        done
        pack bench "$WORK/bench" ;;
    rust)
        echo "== rust: cargo test --release --no-run" >&2
        mkdir -p "$WORK/rust/rust"
        cargo test --release --no-run 2>&1 | tee "$WORK/cargo-test.log" >&2
        # "Executable tests/compute.rs (target/release/deps/compute-<hash>)",
        # "Executable unittests src/lib.rs (target/release/deps/cumem-<hash>)"
        sed -n 's/.*Executable \([^ ]*\) (\(.*\))$/\1 \2/p' "$WORK/cargo-test.log" | while read -r src exe; do
            # Only the suites that run against a GPU with CUMEM_TEST_CUDA=1 (those built on
            # tests/common/); the others (header, layers, timeline, the unit tests) read the
            # source tree at its build-time path and test nothing of the device.
            case $src in tests/*.rs) ;; *) continue ;; esac
            grep -q -E 'mod common|CUMEM_TEST_CUDA' "$src" || continue
            stripped "$exe" "$WORK/rust/rust/$(basename "$src" .rs)"
        done
        [ -n "$(ls "$WORK/rust/rust")" ] || { echo "no test binaries found" >&2; exit 1; }
        pack rust "$WORK/rust" ;;
    julia)
        : "${JULIA_BUNDLE:?set JULIA_BUNDLE to the folder holding julia-1.5.3-bundle.tar.xz and julia-env.sh}"
        src=$(ls "$JULIA_BUNDLE"/julia-*-bundle.tar.xz | head -1)
        stamp="$(basename "$src") $(stat -c '%s %Y' "$src")"
        if [ -f "$K/julia/source.txt" ] && [ "$(cat "$K/julia/source.txt")" = "$stamp" ] && [ -f "$K/julia/$(basename "$src")" ]; then
            echo "== julia: $K/julia is up to date" >&2
        else
            echo "== julia: repacking $src without Julia's own tests (a few minutes)" >&2
            mkdir -p "$WORK/julia"
            tar -C "$WORK/julia" -xJf "$src"
            rm -rf "$WORK"/julia/usr/share/julia/test "$WORK"/julia/usr/share/julia/stdlib/*/*/test \
                   "$WORK/julia/usr/share/applications" "$WORK/julia/usr/share/metainfo"
            rm -rf "$K/julia"; mkdir -p "$K/julia"
            tar -C "$WORK/julia" --sort=name --owner=0 --group=0 -cf - . | $XZ > "$K/julia/$(basename "$src")"
            cp "$JULIA_BUNDLE/julia-env.sh" "$K/julia/"
            echo "$stamp" > "$K/julia/source.txt"
        fi ;;
    traces)
        : "${TRACES:?set TRACES to a folder of *.trace files}"
        rm -rf "$K/traces"; mkdir -p "$K/traces"
        cp "$TRACES"/*.trace "$K/traces/" ;;
    sizes) ;;   # build nothing: print the sizes and carry lists of what .kit/ holds
    *) echo "unknown part $part (engine bench rust julia traces sizes)" >&2; exit 2 ;;
    esac
done

# ---------------------------------------------------------------- sizes and carry lists
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
size() { [ -e "$1" ] && du -sb "$1" | cut -f1 || echo 0; }
# The tree that travels: tracked files plus untracked files git does not ignore.
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r stat -c %s 2>/dev/null | awk '{s+=$1} END {print s+0}')
{
    # (first line "tree COMMIT[+changes] on DATE": the working tree's commit, +changes where
    # tracked files differ from it; run.sh's summary header reads it)
    echo "tree $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo '+changes') on $(date -u +%FT%TZ)"
    for p in engine bench rust julia traces; do
        [ -e "$K/$p" ] && echo "$p $(mib "$(size "$K/$p")") $(cat "$K/$p/built.txt" 2>/dev/null)"
    done
} > "$K/manifest.txt"
echo
echo "tree (tracked + untracked, not ignored): $(mib "$tree")"
for p in engine bench rust julia traces; do
    [ -e "$K/$p" ] && echo "$K/$p: $(mib "$(size "$K/$p")")"
done
echo
echo "carry lists (each call: tree + carried < 64 MiB):"
group() { # group LABEL SUITES PART...
    local label=$1 suites=$2; shift 2
    local total=$tree list="" p missing=""
    for p in "$@"; do
        [ -e "$K/$p" ] || missing="$missing $p"
        total=$((total + $(size "$K/$p")))
        list="$list\"$K/$p\", "
    done
    [ -e "$K/traces" ] && [ "$label" = bench ] && { total=$((total + $(size "$K/traces"))); list="$list\"$K/traces\", "; }
    local ok=fits; [ "$total" -lt "$LIMIT" ] || ok="TOO BIG"
    printf '  %-6s (%s): carry [%s]  %s, %s%s\n' "$label" "$suites" "$(manifest_list "${list%, }")" "$(mib "$total")" "$ok" \
        "${missing:+ (not built:$missing)}"
}
manifest_list() { echo "\"$K/manifest.txt\", $1"; }
group tests "tests kernels first-result cudajl" engine julia
group rust "rust-cuda reliability" engine rust
group bench "replay compute-bench smallops bandwidth linalg sort hotpath" engine bench julia
group multi "multigpu" engine rust julia
all=$(( tree + $(size "$K") ))
ok=fits; [ "$all" -lt "$LIMIT" ] || ok="TOO BIG: use the lists above"
printf '  %-6s (every suite): carry [\"%s\"]  %s, %s\n' all "$K" "$(mib "$all")" "$ok"
