# g++ for the emulation tests (the generated CUDA C of kernels compiled for the CPU):
# `gxx_library(header, body, flags)` compiles `header * body` into a shared library and
# returns its path. Every distinct source is compiled; what is saved is the repeated work:
#
# - the test's fixed header (its CUDA stand-ins and the C headers they include) is parsed
#   once, into a precompiled header that each kernel's compile reads (`-include`; where
#   g++ finds the .gch unusable it reads the header's text instead: the same program,
#   only slower). Parsing the header was about half of each kernel's g++ time (0.155 s
#   -> 0.075 s of CPU for a broadcast kernel of test/compute/compiler/kernel_emulation_tests.jl
#   with -O1, g++ 12).
# - a source compiled before with the same flags is not compiled again: the libraries are
#   kept under a name made of a hash of (flags, header, body), in CUMEM_EMU_CACHE (set by
#   test/runtests.jl to one directory for all the processes of a run: the same kernel made
#   by two test files is compiled once) or else a directory of this process. A library is
#   written under a temporary name and renamed, so a process never loads a half-written one.
#
# Included (once) by the emulation tests: test/compute/emulation_threads.jl,
# test/compute/compiler/kernel_emulation_tests.jl, test/compute/device/kernel_emulation_tests.jl,
# test/compute/linalg/linalg_kernel_tests.jl.

const GXX_DIR = let d = get(ENV, "CUMEM_EMU_CACHE", "")
    isempty(d) ? mktempdir() : mkpath(d)
end

# 128 bits of two seeded hashes of the parts (Base.hash of strings is the same in every
# process of one Julia version).
gxx_key(parts...) = join((string(foldl((h, p) -> hash(p, h), parts; init = seed), base = 16, pad = 16)
                          for seed in (UInt(0x243f6a8885a308d3), UInt(0x13198a2e03707344))))

# `from` renamed to `to` unless `to` exists (another process made it first): then `from`
# is removed. Returns `to`.
# g++ runs in the machine's environment rather than a Julia bundle's: where
# CUMEM_EMU_LD_LIBRARY_PATH is set (bench/gpu/run.sh, whose Julia runs with the bundle's
# libraries first on LD_LIBRARY_PATH and its libunwind preloaded), it is g++'s
# LD_LIBRARY_PATH and LD_PRELOAD is dropped.
function emu_env(cmd::Cmd)
    haskey(ENV, "CUMEM_EMU_LD_LIBRARY_PATH") || return cmd
    env = Dict(k => v for (k, v) in ENV if k != "LD_PRELOAD")
    env["LD_LIBRARY_PATH"] = ENV["CUMEM_EMU_LD_LIBRARY_PATH"]
    return setenv(cmd, env)
end

function gxx_place(from, to)
    if ispath(to)
        rm(from; recursive = true, force = true)
    else
        try
            Base.Filesystem.rename(from, to)
        catch
            ispath(to) || rethrow()
            rm(from; recursive = true, force = true)
        end
    end
    return to
end

# The precompiled header of `header` for `flags`: the path of its hdr.h (hdr.h.gch beside it).
function gxx_pch(header::String, flags::Vector{String})
    dir = joinpath(GXX_DIR, "pch-" * gxx_key(flags, header))
    if !isdir(dir)
        tmp = mktempdir(GXX_DIR)
        write(joinpath(tmp, "hdr.h"), header)
        run(emu_env(`g++ $flags -fPIC -w -x c++-header -o $(joinpath(tmp, "hdr.h.gch")) $(joinpath(tmp, "hdr.h"))`))
        gxx_place(tmp, dir)
    end
    return joinpath(dir, "hdr.h")
end

"""
    gxx_library(header, body, flags) -> String

The path of a shared library compiled by g++ from the C++ text `header * body` with
`flags` (e.g. `["-O1", "-std=c++17"]`; `-shared -fPIC -w` are added), the header through
a precompiled header. Throws `ProcessFailedException` (g++'s messages on stderr) when the
source does not compile.
"""
function gxx_library(header::String, body::String, flags::Vector{String})
    so = joinpath(GXX_DIR, "k-" * gxx_key(flags, header, body) * ".so")
    isfile(so) && return so
    hdr = gxx_pch(header, flags)
    tmp = mktempdir(GXX_DIR)
    write(joinpath(tmp, "k.cpp"), body)
    run(emu_env(`g++ $flags -shared -fPIC -w -include $hdr -o $(joinpath(tmp, "k.so")) $(joinpath(tmp, "k.cpp"))`))
    gxx_place(joinpath(tmp, "k.so"), so)
    rm(tmp; recursive = true, force = true)
    return so
end
