# CuMem: `make demo` and `make test` work on a fresh Debian machine with only Rust and
# make; they install Julia (Debian bullseye's 1.5.3) into .julia-local/ when missing.

JULIA      ?= $(CURDIR)/.julia-local/bin/julia
CARGO      ?= cargo
LIB        := target/release/libcumem.so
# Tests and the demo run on the host device unless the caller says otherwise.
export CUMEM_DEVICE ?= auto
# NVRTC from PyPI (scripts/install-nvrtc.sh) for the tests' PTX checks without a GPU.
# The engine takes it from CUMEM_NVRTC_LIBRARY unless the caller names another one; with
# none installed the variable is empty and the engine searches the system.
NVRTC_LOCAL = $(firstword $(wildcard $(CURDIR)/.nvrtc-local/nvidia/*/lib/libnvrtc.so.[0-9]*))
NVRTC_ENV   = CUMEM_NVRTC_LIBRARY="$${CUMEM_NVRTC_LIBRARY:-$(NVRTC_LOCAL)}"

.PHONY: all build lib julia nvrtc test rust-test julia-test sanitize fuzz fuzz-campaign demo bench bench-julia bench-compute docs-img header clean

all: build

# The engine library and the benchmark tool (a crate of the workspace: bench/cumem-bench).
build:
	$(CARGO) build --release --workspace

# The engine library alone (what Pkg.build builds and the Julia package loads; CI).
lib:
	$(CARGO) build --release

julia: $(JULIA)

# Re-run when the installer changed: it rewrites the wrapper when its format is outdated.
$(JULIA): scripts/install-julia.sh
	bash scripts/install-julia.sh

# NVRTC for compiling kernels to PTX in the tests (about 58 MB from PyPI; skipped with a
# message when pip is missing or offline).
nvrtc:
	@bash scripts/install-nvrtc.sh >/dev/null

# The README's test command: the engine's Rust tests and the Julia package's Pkg.test.
test: julia build nvrtc rust-test julia-test

rust-test: nvrtc
	$(NVRTC_ENV) $(CARGO) test --workspace

julia-test: julia build nvrtc
	$(NVRTC_ENV) $(JULIA) --project=$(CURDIR) -e 'using Pkg; Pkg.test()'

# AddressSanitizer and Miri over the engine's Rust tests, with the nightly toolchain where
# installed (SKIPPED otherwise). Not part of `test`: the instrumented build and run take
# well over ten minutes on a small machine; see docs/reliability.md.
sanitize:
	bash scripts/sanitize.sh

# A long campaign of the differential fuzzer (test/fuzz/fuzz.jl): N random functions from
# SEED (default: the clock, printed) on the device of CUMEM_DEVICE, or MODE=emu through the
# g++ emulation; reproducers of disagreements in fuzz-failures/.
SEED ?=
N    ?= 1000
MODE ?= host
fuzz: julia build nvrtc
	$(NVRTC_ENV) $(JULIA) --project=$(CURDIR) test/fuzz/fuzz.jl --mode $(MODE) --n $(N) $(if $(SEED),--seed $(SEED),) --out fuzz-failures

# PROCS fuzzer processes side by side for SECS seconds each (after loading), seeds SEED+1...
# (test/fuzz/campaign.sh; MODE=host, emu or cuda): totals in fuzz-campaign/campaign.md.
PROCS   ?= $(shell nproc)
SECS    ?= 300
fuzz-campaign: julia build nvrtc
	$(NVRTC_ENV) FUZZ_MODE=$(MODE) FUZZ_PROCS=$(PROCS) FUZZ_SECONDS=$(SECS) $(if $(SEED),FUZZ_SEED=$(SEED),) \
	    JULIA="$(JULIA) --startup-file=no" bash test/fuzz/campaign.sh

# The main job: train an MLP on the digits data set with CuArrays and report.
demo: julia build
	$(JULIA) --project=$(CURDIR) demo/demo.jl

# The allocator benchmarks on this machine's device (host memory without a GPU), then the
# GPT-2 training trace replayed through CuArrays.
bench: julia build
	target/release/cumem-bench replay --pool all
	target/release/cumem-bench pair --pool all
	target/release/cumem-bench threads --pool binned,split
	$(JULIA) --project=$(CURDIR) bench/julia/replay_demo.jl

# The compute benchmarks (broadcast, copy, sum, matmul, launch latency, MLP step) on this
# machine's device; on a GPU, `bench/gpu/run.sh compute-bench` runs them beside PyTorch.
bench-compute: julia build
	$(JULIA) --project=$(CURDIR) bench/julia/compute_bench.jl

# The Julia-level benchmark (CuArray pair, GC-freed pair, trace replay) under each pool.
bench-julia: julia build
	JULIA=$(JULIA) bench/julia/julia_bench.sh

# The memory timelines of docs/julia.md, at a size that belongs in the repository (200
# bands for GPT-2, 2 epochs of the demo; the demo's HTML page is written but not kept).
# docs/perf.svg is the chart of an H100 replay run (bench/results/h100-2026-11-21-allocators;
# `bench/gpu/run.sh replay` draws it as replay/perf.svg).
docs-img: julia build
	target/release/cumem-bench replay data/gpt2_train.trace --pool binned,split --passes 2 \
		--timeline-bands 200 --timeline 'docs/img/gpt2_{pool}.svg'
	CUMEM_DEVICE=host $(JULIA) -g2 --project=$(CURDIR) demo/demo.jl --epochs 2 \
		--timeline docs/img/demo_timeline.svg --timeline docs/img/demo_timeline.html

# Regenerates include/cumem.h from the C ABI (src/ffi/) with cbindgen.
header:
	CUMEM_BLESS=1 $(CARGO) test --test header

clean:
	$(CARGO) clean
	rm -rf .julia-local .nvrtc-local
