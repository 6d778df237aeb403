# The device sort and scan at 10^6 and 10^8 elements: sort! of Float32 (uniform in [0, 1)),
# Int64 and UInt32 keys (their whole range) and of Int64 in [0, 2^31) ("sort_i64_31bit": four
# digits equal over all keys, skipped), sortperm of Float32, cumsum of Float32 (also cumsum! into an array allocated before the
# clock starts: the scan without the output's allocation) and a device copy of Float32 (the bandwidth
# the one-pass scan is measured against: "gbps" = bytes read + written / time), as JSON lines
# {"op", "impl": "cumem", "n", "ms"[, "gbps"]} (median of 15 timed runs after one warm-up,
# each ending with a synchronize). With CUMEM_SORT_ANCHOR=1, then PyTorch's and CuPy's rows
# from bench/anchors/sort_anchor.py in the same call (impl "torch"/"cupy"; bench/gpu/run.sh's
# `sort` suite runs the anchor itself, after this). Run on a GPU:
#   CUMEM_DEVICE=cuda [CUMEM_SORT_ANCHOR=1] julia --project=. bench/julia/sort_bench.jl [n ...]
# Tuning variants, measured after the default rows at the largest n, each row's op suffixed
# with its tuning (e.g. "sort_f32@items=24,blocks=2,lookback=8,..."):
#   CUMEM_SORT_VARIANTS="items,blocks_per_sm,lookback[,sleep_ns[,match[,early[,threads[,hist[,walk]]]]]] ..."
#                       (CuMem.RadixTuning: sort!, sortperm; fields left out: the defaults'). Each
#                       sort variant is timed interleaved with the default tuning (default, variant,
#                       default, ... in one loop, SORT_AB_ROUNDS = 10 of each after a warm-up of
#                       each), so that both see the same GPU and memory state: its row has "ms"
#                       (the variant's median), "ms_default" (the default's, from the same loop)
#                       and "ratio" (ms / ms_default; below 1: the variant is faster)
#   CUMEM_SCAN_VARIANTS="threads,items,blocks_per_sm[,sleep_ns[,spin[,kernel[,window]]]] ..."
#                       (CuMem.ScanTuning: cumsum and cumsum! at every size, each timed
#                       interleaved with the default tuning as the sort variants are; kernel 1:
#                       the vector kernel (kernels 2 and 3 were removed: such a variant's row has
#                       "ok": false and the ArgumentError), window: its look-back's status words per lane)
# SORT_VARIANTS_ONLY=1 leaves the default rows out (the variants, each beside the default, only).
# e.g. CUMEM_SORT_VARIANTS="16,3,8,0,0 16,4,8 20,2,8,100,2,0,384,16" CUMEM_SCAN_VARIANTS="128,24,0 256,16,0,100".
# The default rows use the tuning of the CUMEM_SORT_* / CUMEM_SCAN_* variables (or the defaults).
using CuMem, Random, Printf, Statistics
CuMem.allowscalar(false)

function timed(f, setup)
    ts = Float64[]
    for k in 1:16
        x = setup()
        CuMem.synchronize()
        t = time_ns()
        f(x)
        CuMem.synchronize()
        k > 1 && push!(ts, (time_ns() - t) / 1e6)
        x isa CuArray && CuMem.unsafe_free!(x)
    end
    return median(ts)
end

# The median (ms) of `f(setup())` between two timing events on the task's stream (the GPU's
# time from the first to the second, the gaps of queuing included; cuEventElapsedTime), 11
# runs after a warm-up: for the scans, beside `timed`'s host clock (session 12: cumsum 0.834
# ms by the host clock where Nsight Compute timed its one kernel at 0.417 ms).
function timed_events(f, setup)
    ts = Float64[]
    for k in 1:12
        x = setup()
        CuMem.synchronize()
        s = CuMem.stream()
        t = CuMem.@elapsed s f(x)
        k > 1 && push!(ts, t * 1e3)
        x isa CuArray && CuMem.unsafe_free!(x)
    end
    return median(ts)
end

# A row whose measurement `f` threw (a variant that cannot compile, say): "ok": false and the
# error's first line, and the benchmark goes on.
function guarded(f, op, n)
    try
        f()
    catch e
        e isa InterruptException && rethrow()
        msg = filter(c -> ' ' <= c <= '~', first(split(sprint(showerror, e), '\n')))     # (as a JSON string)
        msg = replace(replace(msg, '\\' => "\\\\"), '"' => "\\\"")
        println("{\"op\": \"$op\", \"impl\": \"cumem\", \"n\": $n, \"ok\": false, \"error\": \"$msg\"}")
        flush(stdout)
    end
end

sizes = isempty(ARGS) ? (10^6, 10^8) : map(s -> parse(Int, s), ARGS)
# SORT_VARIANTS_ONLY=1: no default rows, only the variants (and the optional parts below)
for n in (get(ENV, "SORT_VARIANTS_ONLY", "0") == "1" ? () : sizes)
    for (name, T) in (("sort_f32", Float32), ("sort_i64", Int64), ("sort_u32", UInt32))
        src = CuMem.rand(T, n)
        ms = timed(x -> sort!(x), () -> copy(src))
        println("{\"op\": \"$name\", \"impl\": \"cumem\", \"n\": $n, \"ms\": $(round(ms; digits = 3))}")
        CuMem.unsafe_free!(src)
    end
    # Int64 keys in [0, 2^31) (CuPy's before: four high digits zero in every key, passes skipped)
    r = CuMem.rand(Int64, n); src = r .& Int64(2^31 - 1); CuMem.unsafe_free!(r)
    ms = timed(x -> sort!(x), () -> copy(src))
    println("{\"op\": \"sort_i64_31bit\", \"impl\": \"cumem\", \"n\": $n, \"ms\": $(round(ms; digits = 3))}")
    CuMem.unsafe_free!(src)
    src = CuMem.rand(Float32, n)
    ms = timed(x -> CuMem.unsafe_free!(sortperm(x)), () -> copy(src))
    println("{\"op\": \"sortperm_f32\", \"impl\": \"cumem\", \"n\": $n, \"ms\": $(round(ms; digits = 3))}")
    # ("ms_events": the same between timing events on the stream, timed_events)
    ms = timed(x -> CuMem.unsafe_free!(cumsum(x)), () -> copy(src))
    me = timed_events(x -> CuMem.unsafe_free!(cumsum(x)), () -> copy(src))
    println("{\"op\": \"cumsum_f32\", \"impl\": \"cumem\", \"n\": $n, \"ms\": $(round(ms; digits = 3)), \"gbps\": $(round(8n / ms / 1e6; digits = 1)), \"ms_events\": $(round(me; digits = 3))}")
    dst = similar(src)
    ms = timed(x -> cumsum!(dst, x), () -> copy(src))
    me = timed_events(x -> cumsum!(dst, x), () -> copy(src))
    println("{\"op\": \"cumsum!_f32\", \"impl\": \"cumem\", \"n\": $n, \"ms\": $(round(ms; digits = 3)), \"gbps\": $(round(8n / ms / 1e6; digits = 1)), \"ms_events\": $(round(me; digits = 3))}")
    ms = timed(x -> copyto!(dst, x), () -> copy(src))
    me = timed_events(x -> copyto!(dst, x), () -> copy(src))
    println("{\"op\": \"copy_f32\", \"impl\": \"cumem\", \"n\": $n, \"ms\": $(round(ms; digits = 3)), \"gbps\": $(round(8n / ms / 1e6; digits = 1)), \"ms_events\": $(round(me; digits = 3))}")
    CuMem.unsafe_free!(dst)
    CuMem.unsafe_free!(src)
    flush(stdout)
end

# The medians (ms) of `f(setup())` under tuning `tb` and under `ta`, timed alternately in one
# loop (a warm-up of each first, which also compiles their kernels), each run synchronized;
# `tuning`: CuMem.sort_tuning or CuMem.scan_tuning (restored after).
function timed_ab(f, setup, ta, tb; rounds = parse(Int, get(ENV, "SORT_AB_ROUNDS", "10")), tuning = CuMem.sort_tuning)
    ts = (Float64[], Float64[])
    t0 = tuning()
    try
        for k in 0:rounds, (i, t) in enumerate((ta, tb))
            tuning(t)
            x = setup()
            CuMem.synchronize()
            c = time_ns()
            f(x)
            CuMem.synchronize()
            k > 0 && push!(ts[i], (time_ns() - c) / 1e6)
            x isa CuArray && CuMem.unsafe_free!(x)
        end
    finally
        tuning(t0)
    end
    return median(ts[2]), median(ts[1])
end

# the variants: "a,b,c[,...] ..." (spaces or semicolons between them) as integers, those left
# out from `default`
variants(name, default) = [(p = parse.(Int, split(v, ',')); vcat(p, default[length(p)+1:end]))
                           for v in split(get(ENV, name, ""), r"[;\s]+"; keepempty = false)]
fields(t) = [getfield(t, f) for f in fieldnames(typeof(t))]
nmax = maximum(sizes)
# (each variant's row says whether its result was right: "ok", a sort's from issorted on the
# device and the default tuning's result element for element; a scan's from an exact Int32
# accumulate against Base's)
# ("items": the keys per thread the sort used, CuMem.radix_fit's: fewer than the tuning's for
# 8-byte keys where its shared memory would pass 48 KiB)
# (the variant's row and the default's median from the same interleaved loop: "ratio" < 1 when
# the variant is faster)
function ab_row(op, n, ms, ms0, ok, items)
    println("{\"op\": \"$op\", \"impl\": \"cumem\", \"n\": $n, \"ms\": $(round(ms; digits = 3)), \"ms_default\": $(round(ms0; digits = 3)), ",
            "\"ratio\": $(round(ms / ms0; digits = 3)), \"ok\": $ok, \"items\": $items}")
end
function sort_rows(n, tag, t0, t)
    for (name, T) in (("sort_f32", Float32), ("sort_i64", Int64), ("sort_u32", UInt32))
        guarded("$name$tag", n) do
            src = CuMem.rand(T, n)
            try
                ms, ms0 = timed_ab(x -> sort!(x), () -> copy(src), t0, t)
                # (right: sorted, and the default tuning's result element for element)
                y = sort!(copy(src)); CuMem.sort_tuning(t); x = sort!(copy(src))
                ok = issorted(x) && all(x .== y); CuMem.unsafe_free!(x); CuMem.unsafe_free!(y)
                ab_row("$name$tag", n, ms, ms0, ok, CuMem.radix_fit(T, 0).items)
            finally
                CuMem.sort_tuning(t0)
                CuMem.unsafe_free!(src)
            end
        end
        flush(stdout)
    end
    guarded("sortperm_f32$tag", n) do
        src = CuMem.rand(Float32, n)
        try
            ms, ms0 = timed_ab(x -> CuMem.unsafe_free!(sortperm(x)), () -> copy(src), t0, t)
            # (stable: the one permutation, the default tuning's)
            q = sortperm(src); CuMem.sort_tuning(t); p = sortperm(src)
            ok = all(p .== q); s = src[p]; ok &= issorted(s); foreach(CuMem.unsafe_free!, (p, q, s))
            ab_row("sortperm_f32$tag", n, ms, ms0, ok, CuMem.radix_fit(Float32, 4).items)
        finally
            CuMem.sort_tuning(t0)
            CuMem.unsafe_free!(src)
        end
    end
    flush(stdout)
end
# a scan variant's rows at n under tuning t, each timed interleaved with the default tuning t0
# (timed_ab: "ms", "ms_default", "ratio"): cumsum ("ok" from exact Int32 sums, and Float32
# sums of small integers, against Base's) and cumsum! (`variant_rows` restores the tuning)
function scan_rows(n, tag, t0, t)
    src = CuMem.rand(Float32, n)
    ms, ms0 = timed_ab(x -> CuMem.unsafe_free!(cumsum(x)), () -> copy(src), t0, t; tuning = CuMem.scan_tuning)
    CuMem.scan_tuning(t)
    h = rand(Int32(-100):Int32(100), n)
    ok = Array(accumulate(+, CuArray(h))) == accumulate(+, h)
    hf = Float32.(h)
    ok &= Array(cumsum(CuArray(hf))) == cumsum(hf)
    CuMem.scan_tuning(t0)
    # ("ms_events": the variant's time between timing events on the stream, timed_events)
    events(f) = (CuMem.scan_tuning(t); try timed_events(f, () -> copy(src)) finally CuMem.scan_tuning(t0) end)
    scan_row(op, ms, ms0, me, ok) = println("{\"op\": \"$op\", \"impl\": \"cumem\", \"n\": $n, \"ms\": $(round(ms; digits = 3)), ",
                                            "\"ms_default\": $(round(ms0; digits = 3)), \"ratio\": $(round(ms / ms0; digits = 3)), ",
                                            "\"gbps\": $(round(8n / ms / 1e6; digits = 1)), \"ms_events\": $(round(me; digits = 3)), \"ok\": $ok}")
    scan_row("cumsum_f32$tag", ms, ms0, events(x -> CuMem.unsafe_free!(cumsum(x))), ok)
    dst = similar(src)
    ms, ms0 = timed_ab(x -> cumsum!(dst, x), () -> copy(src), t0, t; tuning = CuMem.scan_tuning)
    scan_row("cumsum!_f32$tag", ms, ms0, events(x -> cumsum!(dst, x)), ok)
    CuMem.unsafe_free!(dst)
    CuMem.unsafe_free!(src)
end
# Each variant of ENV[var] (`variants`, as tuning type typeof(default)) at each n in ns: the
# tuning checked by `tuning` (CuMem.sort_tuning or scan_tuning; the one in use, t0, set again
# after), then rows(n, tag, t0, t) with t the variant's tuning and tag "@" and the fields as
# labels=values; a variant refused or failing there gives a row "op$tag" with "ok": false
# (`guarded`). The tuning in use is restored after each variant.
function variant_rows(rows, tuning, var, default, labels, op, ns)
    for v in variants(var, fields(default))
        tag = "@" * join(("$l=$x" for (l, x) in zip(labels, v)), ",")
        t0 = tuning()
        try
            for n in ns
                guarded("$op$tag", n) do
                    t = tuning(typeof(default)(v...))
                    tuning(t0)
                    rows(n, tag, t0, t)
                end
                flush(stdout)
            end
        finally
            tuning(t0)
        end
    end
end
variant_rows(sort_rows, CuMem.sort_tuning, "CUMEM_SORT_VARIANTS", CuMem.RADIX_DEFAULT,
             ("items", "blocks", "lookback", "sleep", "match", "early", "threads", "hist", "walk"), "sort", (nmax,))
# (the scan variants at every size: the one-pass scan's small sizes are latency-bound, its large ones bandwidth-bound)
variant_rows(scan_rows, CuMem.scan_tuning, "CUMEM_SCAN_VARIANTS", CuMem.SCAN_DEFAULT,
             ("threads", "items", "blocks", "sleep", "spin", "kernel", "window"), "cumsum_f32", sizes)

# SORT_PDL_AB=1: cumsum, cumsum! and sort! of Float32 at the largest n timed with programmatic
# dependent launch off and on (CuMem.pdl!), alternately in one loop as the variants are: rows
# "<op>@pdl=off" with "ms" (off), "ms_default" (on) and "ratio" (off / on).
pdl_tuning() = (on = CuMem.pdl!(true); CuMem.pdl!(on); on)
pdl_tuning(on::Bool) = CuMem.pdl!(on)
if get(ENV, "SORT_PDL_AB", "0") == "1"
    n = maximum(sizes)
    src = CuMem.rand(Float32, n)
    dst = similar(src)
    for (op, f) in (("cumsum_f32", x -> CuMem.unsafe_free!(cumsum(x))), ("cumsum!_f32", x -> cumsum!(dst, x)),
                    ("sort_f32", x -> sort!(x)))
        guarded(op * "@pdl=off", n) do
            ms, ms0 = timed_ab(f, () -> copy(src), true, false; tuning = pdl_tuning)
            @printf("{\"op\": \"%s@pdl=off\", \"impl\": \"cumem\", \"n\": %d, \"ms\": %.3f, \"ms_default\": %.3f, \"ratio\": %.3f}\n",
                    op, n, ms, ms0, ms / ms0)
            flush(stdout)
        end
    end
    CuMem.unsafe_free!(dst); CuMem.unsafe_free!(src)
end

# SORT_BURST=1: cumsum! and the copy at the largest n, 20 calls back to back between two timing
# events (no synchronize between them, so the GPU never idles and keeps its clocks), ms per
# call, median of 5 ("<op>@burst"; bench/anchors/sort_anchor.py gives PyTorch's the same way);
# then the same calls one at a time, synchronized, on that one input ("<op>@samein")
function timed_burst(f; reps = 20)
    ts = Float64[]
    for k in 1:6
        CuMem.synchronize()
        t = CuMem.@elapsed CuMem.stream() (for _ in 1:reps; f(); end)
        k > 1 && push!(ts, t * 1e3 / reps)
    end
    return median(ts)
end
if get(ENV, "SORT_BURST", "0") == "1"
    n = maximum(sizes)
    src = CuMem.rand(Float32, n)
    dst = similar(src)
    for (op, f) in (("cumsum!_f32", () -> cumsum!(dst, src)), ("copy_f32", () -> copyto!(dst, src)))
        ms = timed_burst(f)
        println("{\"op\": \"$op@burst\", \"impl\": \"cumem\", \"n\": $n, \"ms\": $(round(ms; digits = 3)), \"gbps\": $(round(8n / ms / 1e6; digits = 1))}")
        # one call at a time as `timed` does, but on the same input (no fresh copy written
        # before each call): tells the cost of a synchronized call from that of a fresh input
        ms = timed(_ -> f(), () -> nothing)
        me = timed_events(_ -> f(), () -> nothing)
        println("{\"op\": \"$op@samein\", \"impl\": \"cumem\", \"n\": $n, \"ms\": $(round(ms; digits = 3)), \"gbps\": $(round(8n / ms / 1e6; digits = 1)), \"ms_events\": $(round(me; digits = 3))}")
        flush(stdout)
    end
    # the scan on a fresh input written by a broadcast kernel (`y .= src`) instead of `copy`
    ms = timed(x -> cumsum!(dst, x), () -> (y = similar(src); y .= src; y))
    println("{\"op\": \"cumsum!_f32@freshbcast\", \"impl\": \"cumem\", \"n\": $n, \"ms\": $(round(ms; digits = 3))}")
    flush(stdout)
    CuMem.unsafe_free!(dst); CuMem.unsafe_free!(src)
end

if get(ENV, "CUMEM_SORT_ANCHOR", "0") == "1" && Sys.which("python3") !== nothing
    anchor = joinpath(@__DIR__, "..", "anchors", "sort_anchor.py")
    ok = success(pipeline(`python3 -c "import torch; assert torch.cuda.is_available()"`; stderr = devnull))
    ok ? run(`python3 $anchor $(string.(sizes))`) : println(stderr, "# sort_anchor.py skipped: no torch with CUDA")
end
