# README.md's Julia session (the "## Julia" section's first julia block), run statement by
# statement in this process as the REPL would (a value is shown unless the line ends in
# `;`), with the pool its memory_status() comment names (runtests.jl sets
# JULIA_CUDA_MEMORY_POOL=split). Each statement's output must be the README's text; the
# first memory_status() line is the device's own view of all its memory (any numbers),
# and the device line reads `Host memory (no GPU) usage` on the host device where the
# README shows a GPU's `CUDA GPU memory usage`. The loop over `batches` (`...`) is not run.
using CuMem, Test

const README = joinpath(@__DIR__, "..", "..", "README.md")

# The (statement, expected output lines) pairs of the first julia block after "## Julia".
function readme_session()
    text = read(README, String)
    sec = findfirst("## Julia\n", text)
    sec === nothing && error("README.md has no \"## Julia\" section")
    block = match(r"```julia\n(.*?)```"s, text, last(sec)).captures[1]
    pairs = Tuple{String,Vector{String}}[]
    for chunk in split(block, r"\n(?=julia> )")
        lines = split(chomp(chunk), '\n')
        startswith(lines[1], "julia> ") || continue
        stmt = lines[1][8:end]
        k = 2
        while k <= length(lines) && startswith(lines[k], "       ")   # continuation lines
            stmt *= "\n" * lines[k][8:end]
            k += 1
        end
        occursin("...", stmt) && continue
        out = String[l for l in lines[k:end] if !isempty(l)]
        push!(pairs, (stmt, out))
    end
    return pairs
end

# What the REPL prints for `stmt`: its printed output, then its value unless the line ends in `;`.
function repl_output(stmt::String)
    code = replace(stmt, r"\s+#[^\n]*$" => "")
    quiet = endswith(rstrip(code), ";")
    io = IOBuffer()
    val = nothing
    mktemp() do path, f
        redirect_stdout(f) do
            val = Core.eval(Main, Meta.parse("begin $code end"))
        end
        flush(f)
        write(io, read(path, String))
    end
    if !quiet && val !== nothing
        show(IOContext(io, :limit => true, :module => Main), MIME"text/plain"(), val)
        println(io)
    end
    # Julia 1.6 and later write `CuArray{Float32, 1}` where the README (1.5) has `{Float32,1}`
    return [replace(l, r"\{(\w+), (\d+)\}" => s"{\1,\2}") for l in split(String(take!(io)), '\n') if !isempty(l)]
end

function same_line(got::AbstractString, want::AbstractString)
    startswith(want, "Effective GPU memory usage: ") &&
        return occursin(r"^Effective GPU memory usage: \d+\.\d\d% \([\d.]+ (bytes|KiB|MiB|GiB)/[\d.]+ (KiB|MiB|GiB|TiB)\)$", got)
    CuMem.on_host() && startswith(want, "CUDA GPU memory usage: ") &&
        return got == replace(want, "CUDA GPU memory usage: " => "Host memory (no GPU) usage: ")
    return got == want
end

@testset "README.md's Julia session" begin
    @test get(ENV, "JULIA_CUDA_MEMORY_POOL", "") == "split"
    session = readme_session()
    @test length(session) >= 6
    @test any(p -> occursin("memory_status()", p[1]), session)
    for (stmt, want) in session
        got = repl_output(stmt)
        ok = length(got) == length(want) && all(same_line.(got, want))
        ok || println("README statement `", stmt, "`:\n  printed: ", got, "\n  README:  ", want)
        @test ok
    end
end
