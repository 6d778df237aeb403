#!/usr/bin/env python3
"""Anchor figures: other GPU allocators measured the way cumem-bench measures CuMem.

    python3 bench/anchors/anchor_bench.py [TRACE_DIR] [--quick] [--configs default,expandable]

Needs a CUDA GPU, PyTorch with its C++ extension toolchain (a C++ compiler and the CUDA
runtime headers PyTorch ships) and, optionally, CuPy. It builds a small C++ extension
(`torch.utils.cpp_extension.load_inline`, about 25 s the first time, cached afterwards)
so that the allocators are called from C++, without Python in the timed loops, and
measures:

  pair      alloc+free pair latency of a cache hit (ns) at 512 B ... 256 MiB, for
            PyTorch's caching allocator (`c10::cuda::CUDACachingAllocator::raw_alloc` /
            `raw_delete`), the CUDA stream-ordered pool (`cudaMallocAsync` /
            `cudaFreeAsync` on the default pool with its release threshold at the maximum,
            so it caches) and `cudaMalloc` / `cudaFree`;
  python_pair  `torch.empty(n, dtype=uint8, device="cuda")` + `del` from Python, and
            `cupy.empty` + `del` when CuPy is installed: what users of those libraries pay;
  threads   1, 4 and 16 threads doing 4 KiB pairs at once (aggregate ns per pair);
  replay    every `*.trace` of TRACE_DIR (default: data/) through each allocator: ns per
            event of a warm pass (the pools keep the cache of a first pass) and its peak
            reserved bytes; for PyTorch also a cold pass (empty cache first).

PyTorch's allocator is measured in two configurations, each in a process of its own
because PyTorch reads `PYTORCH_CUDA_ALLOC_CONF` once, when CUDA initialises:

  default     the classic caching allocator (keys `torch_caching_*`);
  expandable  `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`, its virtual-memory mode
              that grows segments in place instead of allocating new ones (keys
              `torch_expandable_*`).

The stream-ordered pool and cudaMalloc are measured in the default process only.
Output: one JSON object per line on stdout (the expandable figures merged into the
default rows), which `bench/anchors/tables.py` turns into the tables of docs/performance.md and
`cumem-bench chart --anchor` draws beside CuMem's results. `bench/gpu/run.sh replay` runs it
and cumem-bench in one go. Trace format: data/README.md.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

CONFIGS = {"default": ("", "torch_caching"), "expandable": ("expandable_segments:True", "torch_expandable")}

CPP = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace CA = c10::cuda::CUDACachingAllocator;
using Clock = std::chrono::steady_clock;

// Mean ns per operation of n operations since t0.
static double per_op(Clock::time_point t0, int64_t n) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / (double)n;
}

// The device's default stream-ordered pool, made to cache: nothing is returned to the
// device at synchronisation (release threshold = max).
static cudaMemPool_t caching_pool() {
  cudaMemPool_t pool;
  cudaDeviceGetDefaultMemPool(&pool, 0);
  uint64_t keep = UINT64_MAX;
  cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
  return pool;
}

// kind: 0 PyTorch caching allocator, 1 stream-ordered pool, 2 cudaMalloc.
// Returns nullptr on failure.
static void* alloc(int64_t kind, int64_t bytes, cudaStream_t s) {
  void* p = nullptr;
  if (kind == 0) {
    try { p = CA::raw_alloc(bytes); } catch (...) { p = nullptr; }
  } else if (kind == 1) {
    if (cudaMallocAsync(&p, bytes, s) != cudaSuccess) p = nullptr;
  } else {
    if (cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;
  }
  return p;
}

static void release(int64_t kind, void* p, cudaStream_t s) {
  if (kind == 0) CA::raw_delete(p);
  else if (kind == 1) cudaFreeAsync(p, s);
  else cudaFree(p);
}

// Mean ns of one alloc+free pair of `bytes`, after one warm-up pair (-1 on failure).
double pair(int64_t kind, int64_t bytes, int64_t iters) {
  if (kind == 1) caching_pool();
  cudaStream_t s = at::cuda::getCurrentCUDAStream().stream();
  void* w = alloc(kind, bytes, s);
  if (!w) return -1;
  release(kind, w, s);
  auto t0 = Clock::now();
  for (int64_t i = 0; i < iters; i++) {
    void* p = alloc(kind, bytes, s);
    if (!p) return -1;
    release(kind, p, s);
  }
  double r = per_op(t0, iters);
  cudaStreamSynchronize(s);
  return r;
}

// Aggregate ns per pair of `nthreads` threads doing `iters` pairs each, started together.
// kind 0 or 1; each thread of kind 1 uses a stream of its own, as a multi-stream program would.
double threads(int64_t kind, int64_t bytes, int64_t iters, int64_t nthreads) {
  if (kind == 1) caching_pool();
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  for (int64_t t = 0; t < nthreads; t++) {
    ts.emplace_back([&] {
      cudaSetDevice(0);
      cudaStream_t s = nullptr;
      if (kind == 1) cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
      while (!go.load()) {}
      for (int64_t i = 0; i < iters; i++) {
        void* p = alloc(kind, bytes, s);
        if (p) release(kind, p, s);
      }
      if (kind == 1) { cudaStreamSynchronize(s); cudaStreamDestroy(s); }
    });
  }
  auto t0 = Clock::now();
  go = true;
  for (auto& t : ts) t.join();
  return per_op(t0, iters * nthreads);
}

// Replays events (int64 [n, 3]: 0 = alloc / 1 = free, block id, bytes) through `kind`.
// Returns {total ns, peak reserved of the stream-ordered pool (kind 1), failed allocations}.
// Blocks alive at the end are freed after the timing.
std::vector<double> replay(torch::Tensor events, int64_t nids, int64_t kind) {
  auto e = events.accessor<int64_t, 2>();
  const int64_t n = events.size(0);
  std::vector<void*> ptr(nids, nullptr);
  cudaStream_t s = at::cuda::getCurrentCUDAStream().stream();
  cudaMemPool_t pool = caching_pool();
  if (kind == 1) {
    uint64_t zero = 0;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero);  // reset the peak
  }
  int64_t fails = 0;
  auto t0 = Clock::now();
  for (int64_t i = 0; i < n; i++) {
    const int64_t op = e[i][0], id = e[i][1];
    if (op == 0) {
      void* p = alloc(kind, e[i][2], s);
      if (!p) fails++;
      ptr[id] = p;
    } else if (ptr[id]) {
      release(kind, ptr[id], s);
      ptr[id] = nullptr;
    }
  }
  double total = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  for (int64_t i = 0; i < nids; i++) if (ptr[i]) release(kind, ptr[i], s);
  cudaStreamSynchronize(s);
  uint64_t high = 0;
  if (kind == 1) cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &high);
  return {total, (double)high, (double)fails};
}

// Returns the stream-ordered pool's cache to the device.
void trim_pool() {
  cudaDeviceSynchronize();
  cudaMemPoolTrimTo(caching_pool(), 0);
}
"""

PAIR_SIZES = [512, 4096, 65536, 1 << 20, 16 << 20, 256 << 20]
THREADS = [1, 4, 16]


def emit(row):
    print(json.dumps(row), flush=True)


def read_trace(path):
    """Events as (op, id, bytes) with op 0 = alloc, 1 = free; the number of ids; peak live bytes."""
    events, nids, live, peak, size = [], 0, 0, 0, {}
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            p = line.split()
            i = int(p[1])
            if p[0] == "a":
                b = int(p[2])
                events.append((0, i, b))
                nids = max(nids, i + 1)
                size[i] = b
                live += b
                peak = max(peak, live)
            else:
                events.append((1, i, 0))
                live -= size.pop(i, 0)
    return events, nids, peak


def worker(config, trace_dir, quick):
    import torch
    from torch.utils.cpp_extension import load_inline

    conf, prefix = CONFIGS[config]
    t0 = time.time()
    ext = load_inline("cumem_anchor_ext", cpp_sources=CPP,
                      functions=["pair", "threads", "replay", "trim_pool"], with_cuda=True,
                      extra_ldflags=["-lcudart"], verbose=False)
    torch.cuda.init()
    emit({"bench": "info", "config": config, "torch_alloc_conf": conf, "torch": torch.__version__,
          "device": torch.cuda.get_device_name(), "built_ext_s": round(time.time() - t0, 1)})
    others = config == "default"      # the stream-ordered pool and cudaMalloc: once
    scale = 10 if quick else 1

    for b in PAIR_SIZES:
        iters = (200000 if b <= (1 << 20) else 20000) // scale
        row = {"bench": "pair", "bytes": b, prefix + "_ns": ext.pair(0, b, iters)}
        if others:
            row["cuda_async_pool_ns"] = ext.pair(1, b, iters)
            row["cudaMalloc_ns"] = ext.pair(2, b, max(20, (200 if b >= (16 << 20) else 2000) // scale))
        emit(row)

    n = 20000 // scale
    for b in [4096, 1 << 20]:
        def timed(make):
            for _ in range(100):
                x = make(); del x
            t = time.perf_counter()
            for _ in range(n):
                x = make(); del x
            return (time.perf_counter() - t) / n * 1e9
        row = {"bench": "python_pair", "bytes": b,
               ("torch_empty_ns" if others else prefix + "_torch_empty_ns"):
                   timed(lambda: torch.empty(b, dtype=torch.uint8, device="cuda"))}
        if others:
            try:
                import cupy
                row["cupy_empty_ns"] = timed(lambda: cupy.empty(b, dtype=cupy.uint8))
            except ImportError:
                pass
        emit(row)

    for th in THREADS:
        row = {"bench": "threads", "threads": th, "bytes": 4096,
               prefix + "_ns_per_pair": ext.threads(0, 4096, 100000 // scale, th)}
        if others:
            row["cuda_async_ns_per_pair"] = ext.threads(1, 4096, 100000 // scale, th)
        emit(row)

    for path in sorted(glob.glob(os.path.join(trace_dir, "*.trace"))):
        events, nids, peak_live = read_trace(path)
        if quick:
            events = events[:20000]
        t = torch.tensor(events, dtype=torch.int64)
        row = {"bench": "replay", "trace": os.path.basename(path), "events": len(events),
               "peak_live_bytes": peak_live}
        kinds = [(0, prefix)] + ([(1, "cuda_async_pool"), (2, "cudaMalloc")] if others else [])
        for kind, name in kinds:
            if kind == 0:
                # cold: from an empty cache
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
                total, _, fails = ext.replay(t, nids, 0)
                row[name + "_cold_ns_per_event"] = total / len(events)
                row[name + "_cold_peak_reserved"] = torch.cuda.max_memory_reserved()
                # warm: the cache of the cold pass kept
                torch.cuda.reset_peak_memory_stats()
                total, _, fails = ext.replay(t, nids, 0)
                reserved = torch.cuda.max_memory_reserved()
                torch.cuda.empty_cache()
            else:
                ext.trim_pool()
                ext.replay(t, nids, kind)                    # first pass fills the pool
                total, high, fails = ext.replay(t, nids, kind)
                reserved = int(high) if kind == 1 else peak_live   # cudaMalloc holds what is live
                ext.trim_pool()
            row[name + "_ns_per_event"] = total / len(events)
            row[name + "_peak_reserved"] = int(reserved)
            row[name + "_fails"] = int(fails)
        emit(row)


def merge_key(row):
    return (row.get("bench"), row.get("bytes"), row.get("threads"), row.get("trace"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace_dir", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "..", "data"))
    ap.add_argument("--quick", action="store_true", help="a tenth of the iterations, 20 000 events per trace")
    ap.add_argument("--configs", default="default,expandable", help="PyTorch configurations to measure")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker, a.trace_dir, a.quick)

    rows, index = [], {}
    for config in a.configs.split(","):
        if config not in CONFIGS:
            sys.exit(f"anchor_bench.py: unknown configuration {config!r}; known: {', '.join(CONFIGS)}")
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=CONFIGS[config][0])
        cmd = [sys.executable, __file__, a.trace_dir, "--worker", config] + (["--quick"] if a.quick else [])
        out = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, check=True, text=True).stdout
        for line in out.splitlines():
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            k = merge_key(r)
            if r["bench"] != "info" and k in index:
                index[k].update(r)          # the expandable figures join the default row
            else:
                index[k] = r
                rows.append(r)
    for r in rows:
        emit(r)


if __name__ == "__main__":
    main()
