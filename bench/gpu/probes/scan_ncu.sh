# Nsight Compute over the scan on a fresh and on the same input (bench/julia/scan_probe.jl's
# SCAN_PROBE_ONLY), and over PyTorch's: each kernel's duration, DRAM bytes and L2 hit rate,
# without clock or cache control (the state the timed rows see). Run by bench/gpu/run.sh's probe
# suite (its jl/py environment: julia on PATH, CUMEM_LIBRARY set).
set -u
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active
command -v ncu >/dev/null || { echo "no ncu"; exit 0; }
for p in same fresh refill; do
    echo "## cumem cumsum:$p"
    SCAN_PROBE_ONLY=cumsum:$p LD_LIBRARY_PATH="${JL_LDLP-}" LD_PRELOAD="${JL_PRELOAD-}" timeout 150 ncu --clock-control none --cache-control none -k regex:scan_onepass \
        --launch-skip 3 --metrics "$M" --csv julia --startup-file=no --project=. bench/julia/scan_probe.jl 2>&1 | grep -v '^==PROF==' | tail -30
done
cat > /tmp/torch_scan_ncu.py <<'PY'
import sys, torch
n = 10**8; src = torch.rand(n, device="cuda"); dst = torch.empty_like(src); kind = sys.argv[1]
for k in range(8):
    x = src if kind == "same" else src.clone()
    torch.cuda.synchronize(); torch.cumsum(x, 0, out=dst); torch.cuda.synchronize()
PY
for p in same fresh; do
    echo "## torch cumsum:$p"
    timeout 120 env -u LD_PRELOAD ncu --clock-control none --cache-control none -k regex:'[Ss]can' \
        --launch-skip 6 --metrics "$M" --csv python3 /tmp/torch_scan_ncu.py $p 2>&1 | grep -v '^==PROF==' | tail -30
done
