"""Dense linear algebra in PyTorch, the anchor of bench/julia/linalg_bench.jl (issue 25).

    python3 bench/anchors/linalg_anchor.py [--quick] [--sizes 1024,4096] [--reps N]

The same operations, sizes, data ranges and timing (median over reps of the wall time from a
synchronize to one after the call, one warm-up call): torch.linalg.solve(A, b),
torch.linalg.cholesky(P), torch.linalg.qr(A) (reduced), torch.linalg.svd(A,
full_matrices=False) with the default driver (svd) and driver="gesvd" (svd_gesvd),
torch.linalg.eigh(P), torch.geqrf(A) and
torch.linalg.householder_product (qr's two halves), A.t().contiguous() (transpose) and A.clone() (copy). No TF32.
--only a,b (or LINALG_ONLY=a,b) runs those operations only. One JSON object per line, "impl":"torch".
"""
import argparse, json, os, time
import torch

p = argparse.ArgumentParser()
p.add_argument("--quick", action="store_true")
p.add_argument("--sizes", default=None)
p.add_argument("--reps", type=int, default=None)
p.add_argument("--only", default=None)
a = p.parse_args()
sizes = [int(s) for s in (a.sizes or ("64" if a.quick else "1024,4096")).split(",")]
reps = a.reps or (2 if a.quick else 5)
only = [x for x in (a.only or os.environ.get("LINALG_ONLY", "")).split(",") if x]
torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"


def timed(f, reps):
    f(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        r = f()
        torch.cuda.synchronize()
        ts.append(time.perf_counter() - t0)
        del r
    ts.sort()
    return 1e3 * ts[(len(ts) + 1) // 2 - 1]


torch.manual_seed(1)
for n in sizes:
    A = torch.rand(n, n, device=dev, dtype=torch.float32)
    b = torch.rand(n, device=dev, dtype=torch.float32)
    Ph = torch.rand(n, n, device=dev, dtype=torch.float32)
    P = Ph.T @ Ph / n + torch.eye(n, device=dev)
    QRa, QRtau = torch.geqrf(A)
    benches = [
        ("solve", lambda: torch.linalg.solve(A, b)),
        ("cholesky", lambda: torch.linalg.cholesky(P)),
        ("cholesky_lower", lambda: torch.linalg.cholesky(P)),  # the same call: CuMem's lower variant's anchor
        ("qr", lambda: torch.linalg.qr(A)),
        ("svd", lambda: torch.linalg.svd(A, full_matrices=False)),
        ("svd_gesvd", lambda: torch.linalg.svd(A, full_matrices=False, driver="gesvd")),
        ("eigh", lambda: torch.linalg.eigh(P)),
        ("geqrf", lambda: torch.geqrf(A)),
        ("orgqr", lambda: torch.linalg.householder_product(QRa, QRtau)),
        ("transpose", lambda: A.t().contiguous()),
        ("copy", lambda: A.clone()),
    ]
    for name, f in benches:
        if only and name not in only:
            continue
        try:
            k = min(reps, 3) if name.startswith("svd") and n >= 4096 else reps  # as linalg_bench.jl
            r = {"ms": round(timed(f, k), 3), "reps": k}
        except Exception as e:  # a failed call gives its line an "error"
            r = {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
        print(json.dumps({"impl": "torch", "bench": name, "n": n, **r, "torch": torch.__version__}), flush=True)
