# The fixed CUDA C of the package's kernels lives in julia/cuda/*.cuh (one file per kernel
# family, shared helpers in common.cuh), not in Julia strings: the files are read here as
# text when the package is precompiled (each is an `include_dependency`, so editing one
# recompiles the package) and become the sources given to NVRTC. NVRTC gets one source and
# no headers (the engine's compile entry point, src/compute/nvrtc.rs, passes none), so an
# `#include "x.cuh"` line is replaced by x.cuh's text, each file once per source. The
# engine's kernel caches key kernels by their source text, so a changed .cuh compiles anew.

const CUDA_DIR = normpath(joinpath(@__DIR__, "..", "..", "cuda"))

"""
    CuMem.cuda_source(name::AbstractString) -> String

The text of `julia/cuda/<name>` (e.g. `"linalg.cuh"`) with each `#include "<file>"` line
replaced by that file's text from the same folder (recursively, each file at most once;
later lines naming an included file are dropped), ready for NVRTC or g++. Registers every
file read as an `include_dependency` of the package. Throws `ArgumentError` for a name
that is not a file there.
"""
function cuda_source(name::AbstractString)
    io = IOBuffer()
    splice_cuda!(io, String(name), Set{String}())
    return String(take!(io))
end

function splice_cuda!(io::IO, name::String, done::Set{String})
    path = joinpath(CUDA_DIR, name)
    isfile(path) || throw(ArgumentError("no CUDA source $name in $CUDA_DIR"))
    push!(done, name)
    include_dependency(path)
    for line in eachline(path; keep = true)
        m = match(r"^\s*#\s*include\s+\"([^\"]+)\"", line)
        if m === nothing
            print(io, line)
        elseif !(m[1] in done)
            splice_cuda!(io, String(m[1]), done)
        end
    end
    return io
end
