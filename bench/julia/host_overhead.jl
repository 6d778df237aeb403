# The Julia side of small operations on the host device (no GPU): what each call costs
# besides the computation itself, which on the host device is Base's on the arrays'
# memory. For comparing two builds on the same machine, in alternation (BUILD names the
# build in every line; --project picks the package tree). One JSON object per line:
#
#   CUMEM_DEVICE=host BUILD=after julia --project=. bench/julia/host_overhead.jl [--calls N] [--reps R]
#
# "us": µs per call, the minimum over R repetitions (default 7) of the mean of N calls
# (default 4000; 300 for the MLP step): the machine's other load only adds time;
# "cpu_us": the same with the thread's CPU time (CLOCK_THREAD_CPUTIME_ID, Linux), which
# time spent waiting for a core on a loaded machine does not inflate. Rows
# that allocate free their results with unsafe_free! (no GC in the loop). The MLP step is
# demo/mlp.jl's train_step! on a 64-image batch; "julia_bytes" is what one step
# allocates on the Julia heap, "device_allocs" its allocations from the pool. Uses only the
# API of the builds before and after the typed-IR compiler.

using CuMem, Printf, Random

const BUILD = get(ENV, "BUILD", "after")
option(name, default) = (i = findfirst(==(name), ARGS); i === nothing ? default : parse(typeof(default), ARGS[i+1]))
const CALLS = option("--calls", 4000)
const REPS = option("--reps", 7)
json(pairs...) = println("{", join(("\"$k\":" * (v isa AbstractString ? repr(v) : string(v)) for (k, v) in pairs), ","), "}")

# The calling thread's CPU time in ns (Linux: clock_gettime(CLOCK_THREAD_CPUTIME_ID)).
function cpu_ns()
    ts = Ref((0, 0))
    ccall(:clock_gettime, Cint, (Cint, Ptr{Tuple{Int,Int}}), 3, ts)
    return ts[][1] * 1_000_000_000 + ts[][2]
end

# (wall µs, CPU µs) per call: the minimum of each over the repetitions
function us_per_call(f, n)
    for _ in 1:min(n, 100)
        f()
    end
    best, bestc = Inf, Inf
    for _ in 1:REPS
        t0, c0 = time_ns(), cpu_ns()
        for _ in 1:n
            f()
        end
        CuMem.synchronize()                    # the queued work is part of the calls' cost
        c1, t1 = cpu_ns(), time_ns()
        best = min(best, (t1 - t0) / 1e3 / n)
        bestc = min(bestc, (c1 - c0) / 1e3 / n)
    end
    return best, bestc
end
row(name, (us, cpu)) = json("bench" => "host_overhead", "build" => BUILD, "row" => name, "us" => round(us; digits = 3),
                            "cpu_us" => round(cpu; digits = 3))

CuMem.allowscalar(false)
A = CuMem.fill(1f0, 4, 4)
col = CuMem.fill(2f0, 4, 1)
rowv = CuMem.fill(3f0, 1, 4)
s1, s2 = CuMem.fill(1f0, 1), CuMem.fill(2f0, 1)
r = similar(s1)
for (name, f) in (("r .= s1 .+ s2, in place (fast path)", () -> (r .= s1 .+ s2; nothing)),
                  ("s1 .+ s2, allocating + unsafe_free!", () -> unsafe_free!(s1 .+ s2)),
                  ("A .+ col, 4x4 .+ 4x1, allocating", () -> unsafe_free!(A .+ col)),
                  ("exp.(A .- rowv), 4x4 .- 1x4, allocating", () -> unsafe_free!(exp.(A .- rowv))),
                  ("sum(A; dims = 1), 4x4", () -> unsafe_free!(sum(A; dims = 1))),
                  ("sum(A; dims = 2), 4x4", () -> unsafe_free!(sum(A; dims = 2))),
                  ("maximum(A; dims = 1), 4x4", () -> unsafe_free!(maximum(A; dims = 1))),
                  ("sum(A), 4x4", () -> (sum(A); nothing)))
    row(name, us_per_call(f, CALLS))
end

include(joinpath(dirname(Base.active_project()), "demo", "mlp.jl"))
X, labels = load_digits()
Xtr, Ytr, _, _ = split_data(X, labels)
xb, yb = CuArray(Xtr[:, 1:64]), CuArray(Ytr[:, 1:64])
model = MLP(MersenneTwister(42))
step() = (train_step!(model, xb, yb, 0.01f0); nothing)
t, tc = us_per_call(step, 300)
step()
bytes = @allocated step()
a0 = CuMem.memory_stats().num_allocations
step()
allocs = CuMem.memory_stats().num_allocations - a0
json("bench" => "host_overhead", "build" => BUILD, "row" => "MLP train_step!, batch 64", "us" => round(t; digits = 1), "cpu_us" => round(tc; digits = 1),
     "julia_bytes" => bytes, "device_allocs" => allocs)
