# The Julia package's layering (the Julia counterpart of tests/layers.rs): julia/CuMem.jl
# includes its files in dependency order, so no file may use a top-level name that only a
# file included after it defines. A reader then finds everything a file uses above it, and
# a folder (lib/, memory/, devices/, array/, compute/, tools/) uses only the folders before
# it. Runs without loading CuMem: it parses the sources.
#
#   julia test/layers_tests.jl            # the test
#   julia test/layers_tests.jl --list     # print every upward reference, then the test
#   julia test/layers_tests.jl --list lib/errors.jl lib/libcumem.jl ...   # for another order
#
# A "use" is any identifier in a file outside the local scopes that bind it (arguments,
# assignments, loop variables, let/do/comprehension variables, keyword names), so a local
# variable named like a later function does not count. Field names (`a.b`) and quoted
# symbols are not uses.

using Test

const JULIA_DIR = normpath(joinpath(@__DIR__, "..", "julia"))

# The files in include order, as julia/CuMem.jl lists them.
function include_order(root = joinpath(JULIA_DIR, "CuMem.jl"))
    files = String[]
    for line in eachline(root)
        m = match(r"^\s*include\(\"([^\"]+)\"\)", line)
        m === nothing || push!(files, m[1])
    end
    return files
end

# Every top-level expression of a file (Meta.parseall needs Julia 1.6; 1.5 is supported).
function parse_file(path)
    text = read(path, String)
    exprs = Any[]
    pos = 1
    while pos <= ncodeunits(text)
        ex, pos = Meta.parse(text, pos; greedy = true, raise = true)
        ex === nothing || push!(exprs, ex)
    end
    return exprs
end

strip_macros(ex) = (Meta.isexpr(ex, :macrocall) && length(ex.args) >= 3) ? strip_macros(ex.args[end]) : ex

# The name a function signature defines in this module, or nothing for a method of another
# module's function (`Base.show(...)`, `(::Type{T})(...)`).
function signature_name(sig)
    sig = strip_macros(sig)
    while Meta.isexpr(sig, :where) || Meta.isexpr(sig, :(::)) && length(sig.args) == 2 && Meta.isexpr(sig.args[1], :call)
        sig = sig.args[1]
    end
    Meta.isexpr(sig, :call) || return nothing
    f = sig.args[1]
    Meta.isexpr(f, :curly) && (f = f.args[1])
    return f isa Symbol ? f : nothing
end

# Names defined at top level by one expression.
function definitions!(names, ex)
    ex = strip_macros(ex)
    ex isa Expr || return names
    h = ex.head
    if h === :block || h === :toplevel
        foreach(a -> definitions!(names, a), ex.args)
    elseif h === :function || h === :macro
        sig = ex.args[1]
        if h === :macro
            push!(names, Symbol("@", signature_name(sig)))
        elseif sig isa Symbol                       # function f end
            push!(names, sig)
        else
            n = signature_name(sig)
            n === nothing || push!(names, n)
        end
    elseif h === :(=)
        lhs = ex.args[1]
        n = signature_name(lhs)
        if n !== nothing
            push!(names, n)
        else
            assigned!(names, lhs)
        end
    elseif h === :const || h === :global
        foreach(a -> definitions!(names, a isa Symbol ? Expr(:(=), a, nothing) : a), ex.args)
    elseif h === :struct
        push!(names, type_name(ex.args[2]))
    elseif h === :abstract || h === :primitive
        push!(names, type_name(ex.args[1]))
    elseif h === :if
        foreach(a -> definitions!(names, a), ex.args[2:end])
    end
    return names
end

function type_name(t)
    Meta.isexpr(t, :<:) && (t = t.args[1])
    Meta.isexpr(t, :curly) && (t = t.args[1])
    return t
end

function assigned!(names, lhs)
    lhs = strip_macros(lhs)
    if lhs isa Symbol
        push!(names, lhs)
    elseif Meta.isexpr(lhs, :(::))
        assigned!(names, lhs.args[1])
    elseif Meta.isexpr(lhs, :tuple) || Meta.isexpr(lhs, :parameters)
        foreach(a -> assigned!(names, a), lhs.args)
    elseif Meta.isexpr(lhs, :kw) || Meta.isexpr(lhs, :(=))
        assigned!(names, lhs.args[1])
    elseif Meta.isexpr(lhs, :...)
        assigned!(names, lhs.args[1])
    end
    return names
end

# The argument names of a signature (and its type parameters from `where`).
function argnames!(names, sig)
    sig = strip_macros(sig)
    if Meta.isexpr(sig, :where)
        for p in sig.args[2:end]
            push!(names, type_name(p isa Symbol ? p : p))
        end
        argnames!(names, sig.args[1])
    elseif Meta.isexpr(sig, :(::)) && length(sig.args) == 2 && Meta.isexpr(sig.args[1], :call)
        argnames!(names, sig.args[1])
    elseif Meta.isexpr(sig, :call) || Meta.isexpr(sig, :tuple)
        for a in (Meta.isexpr(sig, :call) ? sig.args[2:end] : sig.args)
            assigned!(names, a)
        end
    elseif sig isa Symbol
        push!(names, sig)
    end
    return names
end

# Identifiers used in `ex` that are not bound locally (`bound` holds the enclosing scopes'
# names). Conservative: a name bound anywhere in a function counts as bound in all of it.
function uses!(out, ex, bound::Set{Symbol})
    if ex isa Symbol
        ex in bound || push!(out, ex)
    elseif ex isa QuoteNode || ex isa LineNumberNode || !(ex isa Expr)
        return out
    elseif ex.head === :quote || ex.head === :inert || ex.head === :meta || ex.head === :line
        return out
    elseif ex.head === :. && length(ex.args) == 2 && ex.args[2] isa QuoteNode
        uses!(out, ex.args[1], bound)               # a.b: only `a` is a use
    elseif ex.head === :function || ex.head === :-> ||
           (ex.head === :(=) && signature_name(ex.args[1]) !== nothing && !Meta.isexpr(ex.args[1], :(::)))
        inner = copy(bound)
        argnames!(inner, ex.args[1])
        locals!(inner, ex.args[end])
        sig_uses!(out, ex.args[1], inner)
        uses!(out, ex.args[end], inner)
    elseif ex.head === :let || ex.head === :for || ex.head === :while || ex.head === :try ||
           ex.head === :generator || ex.head === :comprehension || ex.head === :do
        inner = copy(bound)
        locals!(inner, ex)
        foreach(a -> uses!(out, a, inner), ex.args)
    elseif ex.head === :kw
        uses!(out, ex.args[2], bound)               # f(x; name = value)
    elseif ex.head === :macrocall
        push!(out, ex.args[1] isa Symbol ? ex.args[1] : :_)
        foreach(a -> uses!(out, a, bound), ex.args[2:end])
    elseif ex.head === :struct
        inner = copy(bound)
        t = ex.args[2]
        Meta.isexpr(t, :<:) && (t = t.args[1])
        Meta.isexpr(t, :curly) && foreach(p -> push!(inner, type_name(p)), t.args[2:end])
        for f in ex.args[3].args                    # field names are not uses
            f isa Symbol && continue
            if Meta.isexpr(f, :(::))
                uses!(out, f.args[2], inner)
            else
                uses!(out, f, inner)
            end
        end
    elseif ex.head === :where
        inner = copy(bound)
        foreach(p -> push!(inner, type_name(p)), ex.args[2:end])
        foreach(p -> Meta.isexpr(p, :<:) && uses!(out, p.args[2], inner), ex.args[2:end])
        uses!(out, ex.args[1], inner)
    else
        foreach(a -> uses!(out, a, bound), ex.args)
    end
    return out
end

# The types and defaults of a signature are uses; argument names are not.
function sig_uses!(out, sig, bound)
    sig = strip_macros(sig)
    if Meta.isexpr(sig, :where)
        inner = copy(bound)
        foreach(p -> push!(inner, type_name(p)), sig.args[2:end])
        foreach(p -> Meta.isexpr(p, :<:) && uses!(out, p.args[2], inner), sig.args[2:end])
        sig_uses!(out, sig.args[1], inner)
    elseif Meta.isexpr(sig, :(::)) && length(sig.args) == 2
        sig_uses!(out, sig.args[1], bound)
        uses!(out, sig.args[2], bound)
    elseif Meta.isexpr(sig, :call) || Meta.isexpr(sig, :tuple) || Meta.isexpr(sig, :parameters)
        args = Meta.isexpr(sig, :call) ? sig.args[2:end] : sig.args
        Meta.isexpr(sig, :call) && !(sig.args[1] isa Symbol) && uses!(out, sig.args[1], bound)
        foreach(a -> sig_uses!(out, a, bound), args)
    elseif Meta.isexpr(sig, :kw)
        sig_uses!(out, sig.args[1], bound)
        uses!(out, sig.args[2], bound)
    elseif Meta.isexpr(sig, :...)
        sig_uses!(out, sig.args[1], bound)
    elseif Meta.isexpr(sig, :curly) || Meta.isexpr(sig, :.)
        uses!(out, sig, bound)
    end
    return out
end

# Names bound anywhere inside a function body or scope construct (assignments, loop and
# let variables, comprehension and do-block arguments, catch variables, nested function
# arguments).
function locals!(names, ex)
    ex isa Expr || return names
    h = ex.head
    if h === :(=) || h === :+= || h === :-= || h === :*= || h === :|= || h === :&=
        signature_name(ex.args[1]) === nothing ? assigned!(names, ex.args[1]) :
                                                  push!(names, signature_name(ex.args[1]))
    elseif h === :local || h === :global
        foreach(a -> a isa Symbol ? push!(names, a) : locals!(names, a), ex.args)
    elseif h === :for || h === :let
        spec = ex.args[1]
        for a in (Meta.isexpr(spec, :block) ? spec.args : [spec])
            a isa Symbol ? push!(names, a) : Meta.isexpr(a, :(=)) && assigned!(names, a.args[1])
        end
    elseif h === :generator || h === :flatten
        for a in ex.args[2:end]
            Meta.isexpr(a, :(=)) && assigned!(names, a.args[1])
            Meta.isexpr(a, :filter) && foreach(b -> Meta.isexpr(b, :(=)) && assigned!(names, b.args[1]), a.args)
        end
    elseif h === :try
        ex.args[2] isa Symbol && push!(names, ex.args[2])
    elseif h === :do || h === :->
        argnames!(names, h === :do ? ex.args[2].args[1] : ex.args[1])
    elseif h === :function
        n = signature_name(ex.args[1])
        n === nothing || push!(names, n)
        return names                                # its own scope: handled by uses!
    end
    foreach(a -> locals!(names, a), ex.args)
    return names
end

# For each file: the names it defines and the names it uses.
function scan(files = include_order())
    defs = Dict{String,Set{Symbol}}()
    used = Dict{String,Set{Symbol}}()
    for f in files
        exprs = parse_file(joinpath(JULIA_DIR, f))
        d = Set{Symbol}()
        foreach(ex -> definitions!(d, ex), exprs)
        u = Set{Symbol}()
        foreach(ex -> uses!(u, ex, Set{Symbol}()), exprs)
        defs[f] = d
        used[f] = u
    end
    return defs, used
end

# (file, name, the file defining it) for every use of a name whose first definition comes
# in a later file.
function upward_references(files = include_order())
    defs, used = scan(files)
    first_def = Dict{Symbol,Int}()
    for (i, f) in enumerate(files), n in defs[f]
        haskey(first_def, n) || (first_def[n] = i)
    end
    refs = Tuple{String,Symbol,String}[]
    for (i, f) in enumerate(files), n in sort!(collect(used[f]))
        j = get(first_def, n, 0)
        j > i && push!(refs, (f, n, files[j]))
    end
    return refs
end

# Files allowed over 500 lines, each with its reason (see the test): none.
const LONG_FILES = String[]

# The folder of a file ("." for files at the top of julia/).
folder(f) = (d = dirname(f); isempty(d) ? "." : d)

if abspath(PROGRAM_FILE) == @__FILE__() && "--list" in ARGS
    order = filter(a -> a != "--list", ARGS)
    for (f, n, g) in upward_references(isempty(order) ? include_order() : order)
        println(rpad(f, 28), rpad(n, 28), "defined in ", g)
    end
end

@testset "julia/ layering" begin
    files = include_order()
    @test !isempty(files)
    @test all(f -> isfile(joinpath(JULIA_DIR, f)), files)
    # Every source file is included (nothing lies around unused).
    all_files = String[]
    for (dir, _, fs) in walkdir(JULIA_DIR), f in fs
        endswith(f, ".jl") && f != "CuMem.jl" && push!(all_files, relpath(joinpath(dir, f), JULIA_DIR))
    end
    @test sort(all_files) == sort(files)
    # The files of a folder are included together, so folders form layers.
    seen = String[]
    for f in files
        d = folder(f)
        (isempty(seen) || last(seen) != d) && push!(seen, d)
    end
    @test length(seen) == length(unique(seen))
    # No file uses a name defined only in a file included after it.
    refs = upward_references(files)
    for (f, n, g) in refs
        @warn "$f uses `$n`, defined in $g (included later)"
    end
    @test isempty(refs)
    # No file over 500 lines.
    for f in files
        f in LONG_FILES && continue
        n = countlines(joinpath(JULIA_DIR, f))
        n > 500 && @warn "$f has $n lines (limit 500)"
        @test n <= 500
    end

    # The checker itself finds an upward reference and ignores locals and fields.
    mktempdir() do dir
        write(joinpath(dir, "a.jl"), "f(x) = g(x) + x.h\nk(y) = (h = 1; h + y)\nconst C = 1\n")
        write(joinpath(dir, "b.jl"), "g(x) = C + x\nh(x) = x\n")
        d1, u1 = Set{Symbol}(), Set{Symbol}()
        for ex in parse_file(joinpath(dir, "a.jl"))
            definitions!(d1, ex); uses!(u1, ex, Set{Symbol}())
        end
        @test d1 == Set([:f, :k, :C])
        @test :g in u1 && !(:h in u1) && !(:x in u1) && !(:y in u1)
    end
end

# One configuration table (docs/contract.md) naming every environment variable the code
# reads: the quoted CUMEM_*/JULIA_CUDA_* names in src/ and julia/ that are not constants
# of the C header.
@testset "docs/contract.md's configuration table lists every variable read" begin
    root = normpath(joinpath(@__DIR__, ".."))
    header = read(joinpath(root, "include", "cumem.h"), String)
    defines = Set(m[1] for m in eachmatch(r"#define (CUMEM_\w+)", header))
    read_vars = Set{String}()
    for dir in ("src", "julia"), (d, _, fs) in walkdir(joinpath(root, dir)), f in fs
        (endswith(f, ".rs") || endswith(f, ".jl")) || continue
        for m in eachmatch(r"\"((?:CUMEM|JULIA_CUDA)_[A-Z_]+)\"", read(joinpath(d, f), String))
            m[1] in defines || push!(read_vars, m[1])
        end
    end
    contract = read(joinpath(root, "docs", "contract.md"), String)
    i = findfirst("| variable | read by | values | default |", contract)
    @test i !== nothing
    rest = contract[first(i):end]
    rest = rest[1:first(something(findfirst("\n\n", rest), lastindex(rest):lastindex(rest)))]
    table = Set(m[1] for m in eachmatch(r"\n\| `((?:CUMEM|JULIA_CUDA)_[A-Z_]+)` \|", rest))
    @test length(read_vars) >= 12
    for v in setdiff(read_vars, table)
        @warn "$v is read by the code but missing from docs/contract.md's configuration table"
    end
    @test read_vars == table
end

