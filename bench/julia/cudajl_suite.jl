# Runs CUDA.jl v2.6.3's own test files against CuMem, through the `CUDA` shim of
# bench/julia/cudajl_shim.jl, and counts pass / fail / error / broken / skipped per file.
#
# CUDA.jl is not part of this repository: put its v2.6.3 tree somewhere outside the
# checkout, e.g.
#
#   git clone https://github.com/JuliaGPU/CUDA.jl $SRC
#   mkdir -p $DIR && git -C $SRC archive v2.6.3 | tar -x -C $DIR
#
# then, from the repository root:
#
#   CUMEM_DEVICE=host julia --project=. bench/julia/cudajl_suite.jl $DIR --out OUTDIR [--array|--kernels] [file ...]
#
# (CUMEM_DEVICE=cuda on a GPU). Files are named as in CUDA.jl's test/ ("array",
# "cudadrv/memory", "device/intrinsics"; "examples/vadd" for examples/vadd.jl); without
# names, the array-side and kernel files of cudajl_skips.jl run (--array or --kernels: one
# group). Each file runs in a module of its own, under a testset of its own, top-level
# statement by statement: a statement that throws counts as one error and the rest of the
# file still runs. What is skipped, and why, is in cudajl_skips.jl.
#
# Without arguments (bench/gpu/run.sh's cudajl suite) the tree is $CUDAJL_DIR or
# .cudajl-2.6.3/ in the checkout and OUTDIR is $OUT/cudajl.
# OUTDIR receives results.jsonl (one line per file: file, pass, fail, error, broken,
# skipped, seconds), summary.md (the table, the totals, the skip reasons) and failures.md
# (each failing check: file:line, the expression, the first line of its error).

using CuMem, Test, Random, LinearAlgebra, Printf

include(joinpath(@__DIR__, "cudajl_shim.jl"))
include(joinpath(@__DIR__, "cudajl_skips.jl"))

# ---------------------------------------------------------------------------- arguments
function parse_args(args)
    root = ""; out = ""; group = :all; files = String[]
    i = 1
    while i <= length(args)
        a = args[i]
        if a == "--out"
            out = args[i += 1]
        elseif a == "--array"
            group = :array
        elseif a == "--kernels"
            group = :kernels
        elseif isempty(root)
            root = a
        else
            push!(files, a)
        end
        i += 1
    end
    # defaults for bench/gpu/run.sh (no arguments): $CUDAJL_DIR or .cudajl-2.6.3/ in the
    # checkout (an ignored copy of the tree), results under $OUT/cudajl
    isempty(root) && (root = get(ENV, "CUDAJL_DIR", joinpath(pwd(), ".cudajl-2.6.3")))
    isempty(out) && haskey(ENV, "OUT") && (out = joinpath(ENV["OUT"], "cudajl"))
    isdir(root) || error("usage: cudajl_suite.jl <CUDA.jl v2.6.3 tree> --out DIR [--array|--kernels] [file ...]")
    isfile(joinpath(root, "test", "setup.jl")) || error("no test/setup.jl in $root")
    isempty(out) && error("--out DIR is required")
    if isempty(files)
        files = group === :array ? ARRAY_FILES : group === :kernels ? KERNEL_FILES :
                vcat(ARRAY_FILES, KERNEL_FILES)
    end
    return abspath(root), abspath(out), files
end

source_path(root, f) = startswith(f, "examples/") ? joinpath(root, f * ".jl") :
                       joinpath(root, "test", f * ".jl")

# ------------------------------------------------------------------- the counting testset
"""A failing check: where, what, and the first line of its error."""
struct Failure
    file::String
    where_::String
    kind::String
    expr::String
    first::String
end

mutable struct CountingTestSet <: Test.AbstractTestSet
    description::String
    pass::Int
    fail::Int
    error::Int
    broken::Int
    failures::Vector{Failure}
end
CountingTestSet(desc; kw...) = CountingTestSet(desc, 0, 0, 0, 0, Failure[])
const CURRENT_FILE = Ref("")

first_line(s) = (l = strip(split(s, '\n')[1]); l[1:min(end, 300)])
where_of(src) = src isa LineNumberNode ? string(basename(string(src.file)), ":", src.line) : "?"
function Test.record(ts::CountingTestSet, r::Test.Fail)
    ts.fail += 1
    msg = r.value === nothing ? "" : string(r.value)
    push!(ts.failures, Failure(CURRENT_FILE[], where_of(r.source), "fail",
                               first_line(string(r.orig_expr)), first_line(msg)))
    ts
end
function Test.record(ts::CountingTestSet, r::Test.Error)
    ts.error += 1
    # Julia 1.5 keeps the exception; later versions a string of it
    msg = r.value isa AbstractString ? r.value : sprint(showerror, r.value)
    push!(ts.failures, Failure(CURRENT_FILE[], where_of(r.source), "error",
                               first_line(string(r.orig_expr)), first_line(msg)))
    ts
end
Test.record(ts::CountingTestSet, ::Test.Pass) = (ts.pass += 1; ts)
Test.record(ts::CountingTestSet, ::Test.Broken) = (ts.broken += 1; ts)
function Test.record(ts::CountingTestSet, c::CountingTestSet)
    ts.pass += c.pass; ts.fail += c.fail; ts.error += c.error; ts.broken += c.broken
    append!(ts.failures, c.failures)
    ts
end
function Test.finish(ts::CountingTestSet)
    Test.get_testset_depth() > 0 && Test.record(Test.get_testset(), ts)
    ts
end

# ------------------------------------------------------------------------------ skipping
"""The names an expression mentions (symbols, quoted names, macro names)."""
function mentions!(s::Set{Symbol}, ex)
    if ex isa Symbol
        push!(s, ex)
    elseif ex isa QuoteNode
        mentions!(s, ex.value)
    elseif ex isa Expr
        for a in ex.args
            mentions!(s, a)
        end
    end
    return s
end
mentions(ex) = mentions!(Set{Symbol}(), ex)

"""The names a statement assigns (x = ..., x, y = ..., f(x) = ..., function f, const, import)."""
function assigns!(s::Set{Symbol}, ex)
    ex isa Expr || return s
    if ex.head in (:(=), :function, :const, :global, :local) && !isempty(ex.args)
        lhs = ex.args[1]
        while lhs isa Expr && lhs.head in (:call, :where, :(::), :curly)
            lhs = lhs.args[1]
        end
        lhs isa Symbol ? push!(s, lhs) : lhs isa Expr && lhs.head === :tuple ?
            foreach(a -> a isa Symbol && push!(s, a), lhs.args) : assigns!(s, lhs)
    elseif ex.head in (:import, :using)     # the names brought in: `x, y` of `using A: x, y`, else `A`
        for p in ex.args
            p isa Expr && p.head === :(:) ? foreach(q -> push!(s, q.args[end]), p.args[2:end]) :
            p isa Expr && p.head === :. && push!(s, p.args[end])
        end
    elseif ex.head === :block
        foreach(a -> assigns!(s, a), ex.args)
    end
    return s
end

"""The names a statement changes in place: the last positional argument of each call to a
function whose name ends in `!`, when it is a name (BLAS's and Base's convention: the
output comes last, as `gemm!(..., C)`, `axpy!(a, x, y)`, `copyto!(dst, src)` aside)."""
function mutates!(s::Set{Symbol}, ex)
    ex isa Expr || return s
    if ex.head === :call && !isempty(ex.args)
        f = ex.args[1]
        fname = f isa Symbol ? f : f isa Expr && f.head === :. && f.args[end] isa QuoteNode ? f.args[end].value : nothing
        if fname isa Symbol && endswith(string(fname), "!")
            pos = filter(a -> !(a isa Expr && a.head in (:parameters, :kw)), ex.args[2:end])
            !isempty(pos) && pos[end] isa Symbol && push!(s, pos[end])
        end
    end
    foreach(a -> mutates!(s, a), ex.args)
    return s
end

"""The names a statement assigns anywhere inside it (in its blocks, loops and `do` bodies
too): what a skipped statement would have set."""
function assigns_deep!(s::Set{Symbol}, ex)
    assigns!(s, ex)
    ex isa Expr && foreach(a -> assigns_deep!(s, a), ex.args)
    return s
end

is_macro(ex, names...) = ex isa Expr && ex.head === :macrocall && string(ex.args[1]) in names
is_check(ex) = ex isa Expr && ex.head === :macrocall &&
    (n = string(ex.args[1]); occursin(r"(^|\.)@test", n) && !occursin("@testset", n)) ||
    is_macro(ex, "@not_if_memcheck") && any(is_check, ex.args[3:end])
count_checks(ex) = is_check(ex) ? 1 : ex isa Expr ? sum(Int[count_checks(a) for a in ex.args]) : 0

"""A testset's name: its literal text, interpolations left out."""
function testset_name(ex)
    for a in ex.args[3:end]
        a isa String && return a
        a isa Expr && a.head === :string && return join(filter(x -> x isa String, a.args))
        a isa Expr && a.head === :for && return "for"
    end
    return ""
end

mutable struct SkipState
    tainted::Set{Symbol}
    locals::Set{Symbol}
    counts::Dict{String,Int}
    sources::Dict{Symbol,Set{Symbol}}   # a block's local => the locals its value came from
end
SkipState() = SkipState(Set{Symbol}(), Set{Symbol}(), Dict{String,Int}(), Dict{Symbol,Set{Symbol}}())

# Statements that hold blocks (testsets, loops, conditionals, let, begin) are looked into
# statement by statement; their headers (a loop's range, a condition) decide like a leaf.
holds_blocks(st) = st isa Expr && (st.head in (:block, :for, :while, :if, :elseif, :let, :try) ||
    is_macro(st, "@testset", "@not_if_memcheck"))
# (a `for` over several ranges, or a `let` of several bindings, has them in a block:
# `for a in x, b in y` is `(for (block (= a x) (= b y)) body)`, so the first argument of a
# loop or `let` is its header whatever it is)
header(st) = st.head in (:for, :let) ? st.args[1] :
    Expr(:tuple, Any[a isa Expr && a.head === :for ? a.args[1] : a for a in st.args
                     if !(a isa Expr && a.head === :block)]...)

function skip_reason(st, S::SkipState)
    if is_macro(st, "@testset")
        name = testset_name(st)
        for (re, why) in TESTSETS
            occursin(re, name) && return why
        end
    end
    ms = mentions(holds_blocks(st) ? header(st) : st)
    # a local variable that happens to have a listed name (`cudacall = :(@cuda $call)` in
    # execution.jl) is not the API: names the statement assigns or the block assigned before
    # are not looked up in REFS
    # (names a `using`/`import` brings in are the API itself: `using CUDA.CUBLAS: band` is
    # judged by REFS)
    own = union(is_import(st) ? Set{Symbol}() : assigns!(Set{Symbol}(), st), S.locals)
    for n in ms
        haskey(REFS, n) && !(n in own) && return REFS[n]
    end
    # a function definition depends on the names it uses free, not on its arguments and
    # locals (`function init_case(T, f, N) a = ...; c = CuArray(a) end` does not use an
    # `a` or `c` that a skipped statement left unset)
    bound = is_fundef(st) ? fundef_bound(st) : Set{Symbol}()
    for n in ms
        n in S.tainted && !(n in bound) && return "depends on a skipped statement"
    end
    return nothing
end

is_import(st) = st isa Expr && st.head in (:using, :import)
is_fundef(st) = st isa Expr && (st.head === :function ||
    (st.head === :(=) && st.args[1] isa Expr && st.args[1].head in (:call, :where)))
"""The names a function definition binds: its arguments and the locals its body assigns."""
function fundef_bound(st)
    s = Set{Symbol}()
    sig = st.args[1]
    while sig isa Expr && sig.head in (:where, :(::))
        sig = sig.args[1]
    end
    sig isa Expr && sig.head === :call && foreach(a -> arg_names!(s, a), sig.args[2:end])
    length(st.args) >= 2 && assigns_deep!(s, st.args[2])
    return s
end
function arg_names!(s::Set{Symbol}, a)
    if a isa Symbol
        push!(s, a)
    elseif a isa Expr && a.head in (:(::), :kw, :(=), :..., :parameters)
        a.head === :parameters ? foreach(b -> arg_names!(s, b), a.args) :
            (isempty(a.args) || (a.head === :(::) && length(a.args) == 1) || arg_names!(s, a.args[1]))
    end
    return s
end

function rewrite(st, S::SkipState, bound = Set{Symbol}())
    st isa Expr || return st
    if st.head === :block
        out = Any[]
        outer = S.locals
        S.locals = copy(bound)       # a skipped call taints the names assigned in its own block
                                     # (and those its `let` binds: `let out = ...; @cuda k(out)`)
        outer_taint = copy(S.tainted)  # and the taint ends with the block
        for a in st.args
            a isa LineNumberNode && (push!(out, a); continue)
            why = skip_reason(a, S)
            if why !== nothing
                S.counts[why] = get(S.counts, why, 0) + count_checks(a)
                if is_fundef(a)
                    # a skipped definition leaves its name undefined; its locals are its own
                    assigns!(S.tainted, a)
                elseif !is_check(a)
                    assigns_deep!(S.tainted, a)
                    # the locals it uses, and those they were made from (`ptr = pointer(out)`:
                    # a skipped `@cuda k(ptr)` leaves `out` unwritten)
                    used = intersect(mentions(a), S.locals)
                    union!(S.tainted, used)
                    for n in used
                        union!(S.tainted, get(S.sources, n, Set{Symbol}()))
                    end
                    # and what it changes in place (until the end of this block)
                    mutates!(S.tainted, a)
                end
                push!(out, nothing)
                continue
            end
            as = assigns!(Set{Symbol}(), a)
            from = intersect(mentions(a), S.locals)
            foreach(n -> S.sources[n] = from, as)
            is_import(a) || union!(S.locals, as)
            setdiff!(S.tainted, as)    # a name assigned again is no longer tainted
            push!(out, rewrite(a, S))
        end
        S.locals = outer
        S.tainted = outer_taint
        return Expr(:block, out...)
    elseif holds_blocks(st)
        # a loop's iteration, a condition or let's bindings stay as they are (skip_reason
        # judged them); the bodies are looked into
        keep = st.head in (:for, :while, :if, :elseif, :let) ? 1 : 0
        bound = st.head === :let ? assigns!(Set{Symbol}(), Expr(:block, st.args[1])) : Set{Symbol}()
        return Expr(st.head, Any[i <= keep ? a : rewrite(a, S, bound) for (i, a) in enumerate(st.args)]...)
    end
    return st
end

"""`using CUDA` and the stand-ins' `import Adapt` point at the modules of the shim (also
inside testsets: `using CUDA: AtomicError`)."""
function redirect_using(ex)
    ex isa Expr || return ex
    if ex.head in (:using, :import)
        return Expr(ex.head, map(redirect_path, ex.args)...)
    end
    ex.head === :quote && return ex
    return Expr(ex.head, map(redirect_using, ex.args)...)
end
function redirect_path(p)
    p isa Expr || return p
    if p.head === :(:)
        return Expr(:(:), redirect_path(p.args[1]), p.args[2:end]...)
    elseif p.head === :. && !isempty(p.args) && p.args[1] in (:CUDA, :Adapt, :TestSuite, :DataStructures)
        return Expr(:., :Main, p.args...)
    elseif p.head === :. && length(p.args) > 2 && p.args[1] === p.args[2] === :.
        # `import ...KernelModule`: CUDA.jl's runner evaluates the files in Main, whose parent
        # is Main; here the file's module holds what it defines, so the path starts there
        i = findfirst(a -> a !== :., p.args)
        return Expr(:., :., p.args[i:end]...)
    end
    return p
end

# -------------------------------------------------------------------------------- running
"""Runs one file; returns (testset, skipped counts, seconds)."""
function run_file(root, f, k)
    path = source_path(root, f)
    code = read(path, String)
    top = Base.parse_input_line(code; filename = path)
    S = SkipState()
    stmts = rewrite(Expr(:block, top.args...), S).args
    mod = Module(Symbol("CUDAJL_", k, "_", replace(f, r"[^A-Za-z0-9]" => "_")))
    Core.eval(mod, :(using Test, Random, LinearAlgebra, Main.CUDA, Main.CUDAJLSetup))
    # what every module made by `module` has (test files call `eval(...)`, `include(...)`)
    Core.eval(mod, :(eval(x) = Core.eval($mod, x)))
    Core.eval(mod, :(include(p) = Base.include($mod, p)))
    CURRENT_FILE[] = f
    ts = CountingTestSet(f)
    Random.seed!(1)
    CuMem.allowscalar(false)
    t0 = time()
    Test.push_testset(ts)
    old = get(task_local_storage(), :SOURCE_PATH, nothing)
    task_local_storage(:SOURCE_PATH, path)
    line = LineNumberNode(0, Symbol(path))
    try
        cd(dirname(path)) do
            for st in stmts
                st isa LineNumberNode && (line = st; continue)
                st === nothing && continue
                try
                    Core.eval(mod, Expr(:toplevel, line, redirect_using(st)))
                catch err
                    ts.error += 1
                    push!(ts.failures, Failure(f, where_of(line), "error", first_line(string(st)),
                                               first_line(sprint(showerror, err))))
                end
            end
        end
    finally
        Test.pop_testset()
        old === nothing ? delete!(task_local_storage(), :SOURCE_PATH) :
                          task_local_storage(:SOURCE_PATH, old)
    end
    return ts, S.counts, time() - t0
end

# ------------------------------------------------------------------------------- output
json_str(s) = "\"" * replace(replace(replace(string(s), "\\" => "\\\\"), "\"" => "\\\""), "\n" => "\\n") * "\""
md_cell(s) = replace(replace(string(s), "|" => "\\|"), "\n" => " ")
pct(p, n) = n == 0 ? "-" : @sprintf("%.1f %%", 100p / n)

function write_results(out, rows, skipreasons)
    mkpath(out)
    open(joinpath(out, "results.jsonl"), "w") do io
        for r in rows
            println(io, "{\"file\":", json_str(r.file), ",\"pass\":", r.pass, ",\"fail\":", r.fail,
                    ",\"error\":", r.error, ",\"broken\":", r.broken, ",\"skipped\":", r.skipped,
                    ",\"seconds\":", @sprintf("%.1f", r.seconds), "}")
        end
    end
    P = sum(r.pass for r in rows); F = sum(r.fail for r in rows); E = sum(r.error for r in rows)
    B = sum(r.broken for r in rows); K = sum(r.skipped for r in rows)
    open(joinpath(out, "summary.md"), "w") do io
        println(io, "| file | pass | fail | error | broken | skipped | pass share | seconds |")
        println(io, "|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows
            println(io, "| ", r.file, " | ", r.pass, " | ", r.fail, " | ", r.error, " | ", r.broken,
                    " | ", r.skipped, " | ", pct(r.pass, r.pass + r.fail + r.error), " | ",
                    @sprintf("%.1f", r.seconds), " |")
        end
        for (name, group) in (("array-side files", ARRAY_FILES), ("kernel files", KERNEL_FILES))
            g = filter(r -> r.file in group, rows)
            isempty(g) && continue
            p, f, e = sum(r.pass for r in g), sum(r.fail for r in g), sum(r.error for r in g)
            println(io, "| *", name, "* | ", p, " | ", f, " | ", e, " | ", sum(r.broken for r in g), " | ",
                    sum(r.skipped for r in g), " | ", pct(p, p + f + e), " | ",
                    @sprintf("%.1f", sum(r.seconds for r in g)), " |")
        end
        println(io, "| **total** | ", P, " | ", F, " | ", E, " | ", B, " | ", K, " | ",
                pct(P, P + F + E), " | ", @sprintf("%.1f", sum(r.seconds for r in rows)), " |")
        println(io, "\nSkipped checks by reason (counted in the source: a check inside a loop counts once):\n")
        println(io, "| reason | checks |")
        println(io, "|---|---:|")
        for (why, n) in sort!(collect(skipreasons); by = last, rev = true)
            println(io, "| ", md_cell(why), " | ", n, " |")
        end
    end
    open(joinpath(out, "failures.md"), "w") do io
        println(io, "# Failing checks\n")
        println(io, "| file | where | kind | check | first line of the error |")
        println(io, "|---|---|---|---|---|")
        for r in rows, x in r.failures
            println(io, "| ", x.file, " | ", x.where_, " | ", x.kind, " | `", md_cell(x.expr[1:min(end, 120)]),
                    "` | ", md_cell(x.first), " |")
        end
    end
    return P, F, E, B, K
end

function main(args)
    root, out, files = parse_args(args)
    rows = []
    skipreasons = Dict{String,Int}()
    println("CUDA.jl tests from ", root, " on device ", get(ENV, "CUMEM_DEVICE", "auto"))
    for (k, f) in enumerate(files)
        isfile(source_path(root, f)) || (println(rpad(f, 24), " (no such file)"); continue)
        ts, counts, secs = run_file(root, f, k)
        skipped = reduce(+, values(counts); init = 0)
        for (why, n) in counts
            skipreasons[why] = get(skipreasons, why, 0) + n
        end
        push!(rows, (file = f, pass = ts.pass, fail = ts.fail, error = ts.error,
                     broken = ts.broken, skipped = skipped, seconds = secs, failures = ts.failures))
        n = ts.pass + ts.fail + ts.error
        @printf("%-24s %5d pass %4d fail %4d error %3d broken %4d skipped  %8s  (%.1f s)\n",
                f, ts.pass, ts.fail, ts.error, ts.broken, skipped, pct(ts.pass, n), secs)
        flush(stdout)
        write_results(out, rows, skipreasons)     # after every file: a cut-short run keeps its results
    end
    P, F, E, B, K = write_results(out, rows, skipreasons)
    println("TOTAL: $P pass, $F fail, $E error, $B broken, $K skipped: ",
            pct(P, P + F + E), " of $(P + F + E) checks that ran pass")
end

main(ARGS)
