# Nsight Compute over the radix sort of 10^8 Float32 keys (CuMem's onesweep kernels and CuPy's,
# which is CUB's DeviceRadixSort): each
# kernel's speed of light, warp states (stall reasons), occupancy and launch statistics, without
# clock or cache control. Run by bench/gpu/run.sh's probe suite.
set -u
command -v ncu >/dev/null || { echo "no ncu"; exit 0; }
S=(--section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis)
J='using CuMem; n = 10^8; src = CuMem.rand(Float32, n); x = copy(src)
   for k in 1:3; copyto!(x, src); sort!(x); CuMem.synchronize(); end'
echo "## cumem sort! Float32 1e8 (the third call)"
LD_LIBRARY_PATH="${JL_LDLP-}" LD_PRELOAD="${JL_PRELOAD-}" timeout 200 ncu --clock-control none --cache-control none \
    -k regex:'cumem_sort_(hist|onesweep)' --launch-skip 10 --launch-count 5 "${S[@]}" \
    julia --startup-file=no --project=. -e "$J" 2>&1 | grep -v "^==PROF=="
cat > /tmp/cupy_sort_ncu.py <<'PY'
import cupy
n = 10**8
src = cupy.random.rand(n, dtype=cupy.float32)
for k in range(3):
    x = src.copy(); x.sort(); cupy.cuda.runtime.deviceSynchronize()
PY
echo "## CuPy sort Float32 1e8 (the third call)"
timeout 200 env -u LD_PRELOAD ncu --clock-control none --cache-control none \
    -k regex:'Onesweep|Histogram' --launch-skip 10 --launch-count 5 "${S[@]}" \
    python3 /tmp/cupy_sort_ncu.py 2>&1 | grep -v "^==PROF=="
