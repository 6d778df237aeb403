"""The table of the linalg suite of bench/gpu/run.sh: CuMem beside PyTorch per operation and size.

    python3 bench/anchors/linalg_table.py cumem.jsonl torch.jsonl > table.md

Columns: operation, n, CuMem ms, PyTorch ms, CuMem / PyTorch (below 1.10: within the
issue's 10 % target or faster).
"""
import json, sys

rows = {}
for path in sys.argv[1:]:
    for line in open(path):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        rows.setdefault((r["bench"], r["n"]), {})[r["impl"]] = r.get("ms", "error")

print("| operation (Float32) | n | CuMem ms | PyTorch ms | CuMem / PyTorch |")
print("|---|---:|---:|---:|---:|")
order = ["solve", "cholesky", "cholesky_lower", "qr", "eigh", "svd_gesvd", "svd"]
for (bench, n) in sorted(rows, key=lambda k: (order.index(k[0]) if k[0] in order else 99, k[1])):
    r = rows[(bench, n)]
    c, t = r.get("cumem"), r.get("torch")
    num = lambda v: isinstance(v, (int, float))
    ratio = f"{c / t:.2f}" if num(c) and num(t) and t > 0 else "-"
    fmt = lambda v: f"{v:.2f}" if num(v) else (v or "-")
    print(f"| {bench} | {n} | {fmt(c)} | {fmt(t)} | {ratio} |")
