# Nsight Compute over the one-pass scan (cumsum! of 10^8 Float32) under several tunings
# (CuMem.ScanTuning: threads, items, blocks_per_sm, sleep_ns, spin, kernel, window), the second
# call of each, beside CUB's (PyTorch's cumsum): duration, instructions executed, registers,
# occupancy and DRAM throughput, without clock or cache control. The tunings: SCAN_INST_TUNINGS
# (semicolons between them; default below). Run by bench/gpu/run.sh's probe suite.
set -u
command -v ncu >/dev/null || { echo "no ncu"; exit 0; }
M=gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio
TUN=${SCAN_INST_TUNINGS:-"256,16,0,0,0,0,8;256,16,0,0,0,1,1;256,16,0,0,0,1,2;256,16,0,0,0,1,8;128,16,0,0,0,1,2;256,8,0,0,0,1,2;128,32,0,0,0,1,2;128,16,0,0,0,0,8;256,16,6,0,0,1,2"}
J="using CuMem; n = 10^8; src = CuMem.rand(Float32, n); dst = similar(src)
   for s in split(\"$TUN\", ';')
       t = CuMem.ScanTuning(parse.(Int, split(s, ','))...)
       CuMem.scan_tuning(t); println(\"tuning \", s)
       for k in 1:2; cumsum!(dst, src); CuMem.synchronize(); end
   end"
echo "## cumem: two calls of each tuning, in order: $TUN"
LD_LIBRARY_PATH="${JL_LDLP-}" LD_PRELOAD="${JL_PRELOAD-}" timeout 200 ncu --clock-control none --cache-control none \
    -k regex:scan_onepass --metrics "$M" --csv julia --startup-file=no --project=. -e "$J" 2>&1 | grep -v '^==PROF=='
cat > /tmp/torch_scan_inst.py <<'PY'
import torch
t = torch.rand(10**8, device="cuda"); d = torch.empty_like(t)
for k in range(3):
    torch.cumsum(t, 0, out=d); torch.cuda.synchronize()
PY
echo "## torch (CUB DeviceScanKernel), three calls"
timeout 120 env -u LD_PRELOAD ncu --clock-control none --cache-control none -k regex:DeviceScanKernel \
    --metrics "$M" --csv python3 /tmp/torch_scan_inst.py 2>&1 | grep -v '^==PROF=='
