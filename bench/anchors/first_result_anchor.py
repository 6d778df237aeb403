"""Time to first result of the anchors, beside bench/julia/first_result.jl.

Each measurement runs in a new Python process: seconds for `import torch` (or `import cupy`),
then for the first `x + x` and the first `x.sum()` on a 1024-element float32 GPU array, each
synchronized before the clock stops. CuPy compiles its elementwise and reduction kernels on
first use and keeps them in CUPY_CACHE_DIR: "cold" points it at a new empty directory,
"warm" at one that a first (untimed) process filled. PyTorch ships its kernels compiled
(cache "none"). One JSON line per process on stdout; a library that is not installed or
finds no GPU prints one line with "error".

    python3 bench/anchors/first_result_anchor.py [--reps N]
"""

import json
import os
import subprocess
import sys
import tempfile
import shutil

CHILD = r"""
import json, sys, time
lib = sys.argv[1]
t0 = time.perf_counter()
if lib == "torch":
    import torch
    t_import = time.perf_counter() - t0
    x = torch.ones(1024, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    t = time.perf_counter(); y = x + x; torch.cuda.synchronize(); t_add = time.perf_counter() - t
    t = time.perf_counter(); s = x.sum(); torch.cuda.synchronize(); t_sum = time.perf_counter() - t
    dev = torch.cuda.get_device_name(0)
else:
    import cupy
    t_import = time.perf_counter() - t0
    x = cupy.ones(1024, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    t = time.perf_counter(); y = x + x; cupy.cuda.Device().synchronize(); t_add = time.perf_counter() - t
    t = time.perf_counter(); s = x.sum(); cupy.cuda.Device().synchronize(); t_sum = time.perf_counter() - t
    dev = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
print(json.dumps({"import_s": round(t_import, 4), "first_add_s": round(t_add, 4),
                  "first_sum_s": round(t_sum, 4), "device": dev}))
"""


def run(lib, cache, env):
    p = subprocess.run([sys.executable, "-c", CHILD, lib], env=env, capture_output=True, text=True, timeout=300)
    row = {"bench": "first_result", "impl": lib, "cache": cache}
    if p.returncode != 0:
        row["error"] = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        return row
    row.update(json.loads(p.stdout.strip().splitlines()[-1]))
    return row


def main():
    reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 3
    for _ in range(reps):
        print(json.dumps(run("torch", "none", dict(os.environ))), flush=True)
    for cache in ("cold", "warm"):
        warm = tempfile.mkdtemp() if cache == "warm" else None
        if warm:
            run("cupy", "prime", dict(os.environ, CUPY_CACHE_DIR=warm))
        for _ in range(reps):
            d = warm or tempfile.mkdtemp()
            print(json.dumps(run("cupy", cache, dict(os.environ, CUPY_CACHE_DIR=d))), flush=True)
            if not warm:
                shutil.rmtree(d, ignore_errors=True)
        if warm:
            shutil.rmtree(warm, ignore_errors=True)


if __name__ == "__main__":
    main()
