# Copy bandwidth between two devices through CuMem: `copyto!` of a 256 MiB CuArray on
# device 0 into one on device 1 (a peer copy where the GPUs allow it: cuMemcpyPeer after
# cuCtxEnablePeerAccess), the same copy staged through host memory
# (`CuMem.copy_peer!(...; staged = true)`), and a copy within device 0 for reference.
# Device-to-device `copyto!` is asynchronous (it returns once the copy is queued), so every
# sample waits for both devices (`synchronize()` on device 0 and on device 1) before the clock
# stops, timed with time_ns; medians of REPS after a warm-up. One JSON line per measurement
# on stdout.
#
#   CUMEM_DEVICE=cuda julia --project bench/julia/peer_copy.jl [MiB] [reps]

using CuMem, Printf

median(v) = (s = sort(v); n = length(s); isodd(n) ? s[(n + 1) ÷ 2] : (s[n ÷ 2] + s[n ÷ 2 + 1]) / 2)

const MIB = length(ARGS) >= 1 ? parse(Int, ARGS[1]) : 256
const REPS = length(ARGS) >= 2 ? parse(Int, ARGS[2]) : 20

ndevices() >= 2 || error("peer_copy.jl needs two devices (CUMEM_DEVICE=cuda on 2 GPUs, or host:2)")
n = MIB << 20
x = CuArray{UInt8}(undef, n); fill!(x, 0x5a)
y = device!(() -> CuArray{UInt8}(undef, n), 1)
z = CuArray{UInt8}(undef, n)

# Waits until every copy queued on either device is done.
sync_both() = (synchronize(); device!(synchronize, 1); nothing)

function timed(f)
    f(); f(); sync_both()                      # warm-up (peer access enabled on the first)
    ts = Float64[]
    for _ in 1:REPS
        t0 = time_ns(); f(); sync_both(); push!(ts, (time_ns() - t0) / 1e9)
    end
    return median(ts)
end

path = CuMem.peer_access(CuDevice(1), CuDevice(0))
rows = [("copyto! dev0->dev1 ($(path))", timed(() -> copyto!(y, x))),
        ("copy_peer! staged dev0->dev1 (host)", timed(() -> CuMem.copy_peer!(y, x; staged = true))),
        ("copyto! dev1->dev0 ($(CuMem.peer_access(CuDevice(0), CuDevice(1))))", timed(() -> copyto!(x, y))),
        ("copyto! within dev0", timed(() -> copyto!(z, x)))]
@assert Array(y)[1:16] == fill(0x5a, 16)
for (what, t) in rows
    @printf("{\"bench\":\"peer_copy\",\"impl\":\"cumem\",\"what\":\"%s\",\"bytes\":%d,\"median_s\":%.6f,\"GBps\":%.2f,\"device\":\"%s\"}\n",
            what, n, t, n / t / 1e9, CuMem.device_name())
end
