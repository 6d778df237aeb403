# cuBLAS GEMM through PyTorch (torch.matmul, TF32 off as by default) for comparison with
# bench/julia/compute_engine_bench.jl in the same session on the same GPU:  python3 bench/anchors/torch_gemm.py
import torch, time
print("torch", torch.__version__, "allow_tf32", torch.backends.cuda.matmul.allow_tf32)
for dt in (torch.float32, torch.float64):
    for n in (4096, 8192):
        a = torch.rand(n, n, device="cuda", dtype=dt); b = torch.rand(n, n, device="cuda", dtype=dt)
        c = a @ b; torch.cuda.synchronize()
        reps = 5; t = time.perf_counter()
        for _ in range(reps): c = a @ b
        torch.cuda.synchronize(); t = time.perf_counter() - t
        print(f"torch.matmul {dt} {n}x{n}: {2*n**3*reps/t/1e12:.1f} TFLOP/s")
