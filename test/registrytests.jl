# Installing CuMem: `Pkg.add("CuMem")` by name from a registry made by
# scripts/make-registry.sh, `Pkg.add(path)` and `Pkg.develop(path)`, each into a fresh
# environment of a temporary depot, then `using CuMem` there.
#
# Needs the package root to be a git checkout with Project.toml committed (the registry
# points at HEAD's tree; uncommitted changes are not part of what gets installed).
# The build step is skipped by setting CUMEM_LIBRARY to the engine already built here.

using Test

const ROOT = normpath(joinpath(@__DIR__, ".."))
const LIB = let p = get(ENV, "CUMEM_LIBRARY", "")
    isempty(p) ? joinpath(ROOT, "target", "release", "libcumem.so") : p
end

function in_git_checkout()
    success(pipeline(`git -C $ROOT rev-parse --verify -q HEAD:Project.toml`, stdout = devnull, stderr = devnull))
end

# Runs `code` in a Julia whose only depot is `depot` (plus the stdlib), offline.
function julia_in(depot, code)
    env = copy(ENV)
    env["JULIA_DEPOT_PATH"] = depot
    env["JULIA_PKG_OFFLINE"] = "false"     # offline mode only considers versions already installed
                                          # (nothing here needs the network: registry and repo are local)
    env["JULIA_PKG_SERVER"] = ""
    env["CUMEM_LIBRARY"] = LIB
    env["CUMEM_DEVICE"] = get(ENV, "CUMEM_DEVICE", "host")
    delete!(env, "JULIA_PROJECT")
    delete!(env, "JULIA_LOAD_PATH")
    cmd = `$(Base.julia_cmd()) --startup-file=no --history-file=no -e $code`
    out = IOBuffer()
    p = run(pipeline(ignorestatus(setenv(cmd, env)), stdout = out, stderr = out))
    text = String(take!(out))
    success(p) || println(text)
    return success(p), text
end

const USE = """
    using CuMem
    x = CuArray([1.0, 2.0])
    @assert Array(x) == [1.0, 2.0]
    @assert cu([1.0]) isa CuArray{Float32,1}
    println("CUMEM_LOADED_FROM ", pathof(CuMem))
    memory_status()
"""

@testset "installing CuMem" begin
    if !in_git_checkout()
        @info "not a git checkout with Project.toml committed: skipping the install tests" ROOT
        @test_skip false
        return
    end
    @test isfile(LIB)
    mktempdir() do tmp
        depot = joinpath(tmp, "depot")
        mkpath(depot)
        reg = joinpath(tmp, "registry")
        # the registry of HEAD
        out = read(`bash $(joinpath(ROOT, "scripts", "make-registry.sh")) $reg`, String)
        @test occursin("CuMem 0.1.0", out)
        tree = chomp(read(`git -C $ROOT rev-parse 'HEAD^{tree}'`, String))
        versions = read(joinpath(reg, "C", "CuMem", "Versions.toml"), String)
        @test occursin("git-tree-sha1 = \"$tree\"", versions)
        @test occursin("julia = \"1.5.0-1\"", read(joinpath(reg, "C", "CuMem", "Compat.toml"), String))
        @test occursin("LinearAlgebra", read(joinpath(reg, "C", "CuMem", "Deps.toml"), String))
        # running it again is harmless
        @test success(`bash $(joinpath(ROOT, "scripts", "make-registry.sh")) $reg`)

        # ] add CuMem, by name, through Pkg.Registry.add of the registry
        env1 = joinpath(tmp, "env-by-name")
        ok, text = julia_in(depot, """
            import Pkg
            Pkg.Registry.add(Pkg.RegistrySpec(url = $(repr(reg))))
            Pkg.activate($(repr(env1)))
            Pkg.add("CuMem")
            $USE
            """)
        @test ok
        @test occursin("CUMEM_LOADED_FROM " * joinpath(depot, "packages", "CuMem"), text)
        @test occursin("BinnedPool usage", text)
        @test !occursin("failed to update", text)
        @test isfile(joinpath(env1, "Manifest.toml"))
        @test occursin("git-tree-sha1 = \"$tree\"", read(joinpath(env1, "Manifest.toml"), String))

        # the registry placed directly in a depot's registries/ works the same
        depot2 = joinpath(tmp, "depot2")
        mkpath(joinpath(depot2, "registries"))
        run(`git clone -q $reg $(joinpath(depot2, "registries", "CuMemRegistry"))`)
        env2 = joinpath(tmp, "env-placed")
        ok, text = julia_in(depot2, """
            import Pkg
            Pkg.activate($(repr(env2)))
            Pkg.add("CuMem")
            $USE
            """)
        @test ok
        @test !occursin("failed to update", text)

        # ] add <path> and ] dev <path>
        env3 = joinpath(tmp, "env-path")
        env4 = joinpath(tmp, "env-dev")
        ok, text = julia_in(depot, """
            import Pkg
            Pkg.activate($(repr(env3)))
            Pkg.add(Pkg.PackageSpec(path = $(repr(ROOT))))
            Pkg.activate($(repr(env4)))
            Pkg.develop(Pkg.PackageSpec(path = $(repr(ROOT))))
            $USE
            """)
        @test ok
        @test occursin("CUMEM_LOADED_FROM " * joinpath(ROOT, "src", "CuMem.jl"), text)
        @test occursin("CuMem", read(joinpath(env3, "Manifest.toml"), String))
    end
end
