# Writes docs/api.md, CuMem's API reference, from the docstrings of the package: every
# documented name, exported ones first, then the public names used as `CuMem.name`, then
# the methods CuMem adds to functions of Base and the standard library.
#
#   julia --project scripts/gen-api-docs.jl           # rewrite docs/api.md
#   julia --project scripts/gen-api-docs.jl --check   # exit 1 if docs/api.md is stale
#
# `using CuMem` needs the engine: run `cargo build --release` first. The test suite runs
# the check, so a docstring changed without regenerating the file fails CI.

using CuMem

const ROOT = normpath(joinpath(@__DIR__, ".."))
const OUT = joinpath(ROOT, "docs", "api.md")

# Documented names that are implementation details, not API: the code generator's C
# prelude and types, the raw C records and calls, the engine's log plumbing, and helpers
# for tests and benchmarks. Their docstrings stay for readers of the source.
const INTERNAL = Set{Symbol}([:STRIDED_COPY_SOURCE,
                              :raw_memory_events, :flush_engine_log, :engine_memory_status,
                              :last_error, :sleep_on, :check_thrown_before_read,
                              # the reduction-like families' plumbing (compute/reduce/element_fns.jl, kernel_cache.jl)
                              :Converted, :WithInit, :FindBetter, :SortLess, :element_function,
                              :converted_function, :result_type, :KernelEntry, :kernel_entry,
                              # the kernel language's plumbing (compute/device/, compiler/kernelcalls.jl)
                              :DC_DEVICE_CALLS, :DV_DEVICE_CUH, :KernelAdaptor, :host_launch, :shfl_prim,
                              :vote_prim, :cuprintf, :shmem_static, :shmem_dynamic, :throw_cuassert,
                              # the typed-IR compiler's utf8proc tables (compute/compiler/unicode.jl)
                              :UC_TABLES])

function docstrings(binding)
    md = Base.Docs.meta(CuMem)[binding]
    texts = String[]
    for sig in md.order
        d = md.docs[sig]
        push!(texts, rstrip(lstrip(join([t for t in d.text if t isa AbstractString]), '\n')))
    end
    return texts
end

function entries()
    exported, public, extended = [], [], []
    for binding in keys(Base.Docs.meta(CuMem))
        name = binding.var
        name in INTERNAL && continue
        if binding.mod === CuMem
            (Base.isexported(CuMem, name) ? exported : public) |> v -> push!(v, binding)
        else
            push!(extended, binding)
        end
    end
    key(b) = (lowercase(lstrip(string(b.var), '@')), string(b.var), string(b.mod))
    return [("Exported", sort!(exported, by = key)),
            ("Public, not exported (use as `CuMem.name`)", sort!(public, by = key)),
            ("Methods added to Base and standard-library functions", sort!(extended, by = key))]
end

# Docstrings start with an indented signature block; make it a fenced code block so that
# the page reads the same everywhere.
# Documenter-style cross references (`[`name`](@ref)`, `[`name`]`) become plain code.
unlink(text) = replace(replace(text, r"\[(`[^`]+`)\]\(@ref\)" => s"\1"), r"\[(`[^`]+`)\](?!\()" => s"\1")

function fence_signatures(text)
    lines = split(unlink(text), '\n')
    sig = String[]
    i = 1
    while i <= length(lines) && startswith(lines[i], "    ")
        push!(sig, lines[i][5:end])
        i += 1
    end
    isempty(sig) && return text
    rest = join(lines[i:end], '\n')
    return string("```julia\n", join(sig, '\n'), "\n```\n", rest)
end

function render()
    documented = Set(b.var for b in keys(Base.Docs.meta(CuMem)) if b.mod === CuMem)
    missing_docs = [n for n in names(CuMem) if n !== :CuMem && !(n in documented)]
    isempty(missing_docs) || error("exported names without a docstring: ", join(missing_docs, ", "))
    io = IOBuffer()
    println(io, "# CuMem API reference")
    println(io)
    println(io, "Generated from the docstrings by `scripts/gen-api-docs.jl`; do not edit. Regenerate with")
    println(io, "`julia --project scripts/gen-api-docs.jl` after changing a docstring (the tests fail")
    println(io, "while this file is stale). The guide is [julia.md](julia.md).")
    for (title, bindings) in entries()
        isempty(bindings) && continue
        println(io)
        println(io, "## ", title)
        println(io)
        for b in bindings
            name = b.mod === CuMem ? (Base.isexported(CuMem, b.var) ? string(b.var) : "CuMem." * string(b.var)) :
                   string(b.mod, ".", b.var)
            println(io, "### `", name, "`")
            println(io)
            for t in docstrings(b)
                println(io, fence_signatures(t))
                println(io)
            end
        end
    end
    return rstrip(String(take!(io))) * "\n"
end

function main(args)
    text = render()
    if "--check" in args
        current = isfile(OUT) ? read(OUT, String) : ""
        if current != text
            println(stderr, "docs/api.md is stale: regenerate it with `julia --project scripts/gen-api-docs.jl` and commit it.")
            exit(1)
        end
        println("docs/api.md is up to date")
    else
        write(OUT, text)
        println("wrote ", OUT)
    end
end

main(ARGS)
