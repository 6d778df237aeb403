# Installing CuMem: `Pkg.add("CuMem")` by name from a registry made by
# scripts/make-registry.sh (added with `Pkg.Registry.add`, then placed in the depot's
# registries/ by hand), `Pkg.add(path)` and `Pkg.develop(path)`, each into a fresh
# environment of a temporary depot, then `using CuMem` there. The depot of the add by
# name is shared by the steps whose package files are the same (by name twice: the same
# version installed; the dev of this checkout: its cache from runtests.jl's
# precompilation), so that each source path is precompiled once.
#
# Needs the package root to be a git checkout with Project.toml committed (the registry
# points at HEAD's tree; uncommitted changes are not part of what gets installed).
#
# `add` by name and `add` by path build the engine for real, as a user's install does:
# with `cargo` found on PATH as a rustup-style multiplexer (a symlink named `cargo` to a
# program that dispatches on the name it was started as), and CARGO_TARGET_DIR pointing
# at a target directory shared by both builds and seeded with hard links to this
# checkout's compiled dependencies, so only the `cumem` crate itself is compiled. The
# other installs skip the build by setting CUMEM_LIBRARY to the engine built here.

using Test

const ROOT = normpath(joinpath(@__DIR__, ".."))
const LIB = let p = get(ENV, "CUMEM_LIBRARY", "")
    isempty(p) ? joinpath(ROOT, "target", "release", "libcumem.so") : p
end

function in_git_checkout()
    success(pipeline(`git -C $ROOT rev-parse --verify -q HEAD:Project.toml`, stdout = devnull, stderr = devnull))
end

# The first `cargo` on PATH, unresolved (as deps/build.jl finds it).
function path_cargo()
    for dir in split(get(ENV, "PATH", ""), ':')
        c = joinpath(dir, "cargo")
        !isempty(dir) && isfile(c) && Sys.isexecutable(c) && return c
    end
    return nothing
end

# A directory with `rustup`, a program that behaves like rustup's multiplexer (it runs
# the tool named by its argv[0], and is otherwise `rustup`, which rejects `build
# --release`), and `cargo`, a symlink to it. Each call is logged to `calls.log`.
# The `cumem` crate itself is compiled at opt-level 0 (`--config`, which the log does not
# show; its dependencies keep the release profile's, so the seeded ones are reused): these
# builds test installing, and the library they make only loads and makes a CuArray, while
# CI's release build compiles the same crate at the release profile's level. It took
# 8.5 s of CPU instead of 30.9 s (user+sys on a 2-core machine), twice per run.
function fake_rustup(dir, real_cargo)
    bin = mkpath(joinpath(dir, "bin"))
    log = joinpath(dir, "calls.log")
    write(joinpath(bin, "rustup"), """
        #!/bin/sh
        echo "\$(basename "\$0") \$*" >> '$log'
        case "\$(basename "\$0")" in
          cargo) exec '$real_cargo' --config 'profile.release.package.cumem.opt-level=0' "\$@" ;;
          *) echo "error: unexpected argument '\$2' found" >&2; exit 1 ;;
        esac
        """)
    chmod(joinpath(bin, "rustup"), 0o755)
    symlink("rustup", joinpath(bin, "cargo"))
    return bin, log
end

# A cargo target directory whose compiled dependencies are hard links to this checkout's
# (target/release/{deps,build,.fingerprint}). Cargo writes new files for the `cumem`
# crate built from another path (its hash differs) and never rewrites fresh ones; the
# top-level outputs (libcumem.so, ...) are not linked, so nothing of this checkout's
# build can be overwritten. Where hard links fail, the files are copied.
function seeded_target_dir(dir)
    rel = mkpath(joinpath(dir, "release"))
    src = joinpath(ROOT, "target", "release")
    for sub in ("deps", "build", ".fingerprint")
        isdir(joinpath(src, sub)) || continue
        from, to = joinpath(src, sub), joinpath(rel, sub)
        success(pipeline(`cp -al $from $to`, stderr = devnull)) || (rm(to, recursive = true, force = true); run(`cp -a $from $to`))
    end
    for f in (".rustc_info.json", "CACHEDIR.TAG")
        isfile(joinpath(ROOT, "target", f)) && cp(joinpath(ROOT, "target", f), joinpath(dir, f))
    end
    return dir
end

# Runs `code` in a Julia whose only depot is `depot` (plus the stdlib). `build`: let
# Pkg.build compile the engine (with `path` as PATH and `target` as CARGO_TARGET_DIR)
# instead of pointing CUMEM_LIBRARY at the engine built here.
function julia_in(depot, code; build = false, path = nothing, target = nothing)
    env = copy(ENV)
    env["JULIA_DEPOT_PATH"] = depot
    # Not offline: offline mode only considers versions already installed. Nothing here
    # needs the network (registry and repository are local); the bundled Julia's wrapper
    # leaves the variable alone, so this is what a user of the README gets.
    delete!(env, "JULIA_PKG_OFFLINE")
    env["JULIA_PKG_SERVER"] = ""
    if build
        delete!(env, "CUMEM_LIBRARY")
        env["PATH"] = path
        env["CARGO_TARGET_DIR"] = target
    else
        env["CUMEM_LIBRARY"] = LIB
    end
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

# A depot at `dir` whose only content is this process's first depot's compile caches of
# CuMem (a symbolic link to their directory), for a second entry of JULIA_DEPOT_PATH:
# Julia looks for cache files in every depot but writes new ones to the first.
function compiled_only_depot(dir)
    compiled = joinpath("compiled", "v$(VERSION.major).$(VERSION.minor)")
    caches = joinpath(first(DEPOT_PATH), compiled, "CuMem")
    mkpath(joinpath(dir, compiled))
    isdir(caches) && symlink(caches, joinpath(dir, compiled, "CuMem"))
    return dir
end

const USE = """
    using CuMem
    x = CuArray([1.0, 2.0])
    @assert Array(x) == [1.0, 2.0]
    @assert cu([1.0]) isa CuArray{Float32,1}
    println("CUMEM_LOADED_FROM ", pathof(CuMem))
    println("CUMEM_LIBRARY_PATH ", CuMem.library_path())
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

        # The bundled Julia's depot holds an empty registry (scripts/install-julia.sh);
        # adding by name must work beside it.
        localreg = joinpath(ROOT, ".julia-local", "depot", "registries", "Local")
        isdir(localreg) && cp(localreg, joinpath(mkpath(joinpath(depot, "registries")), "Local"))

        real_cargo = path_cargo()
        fakebin, calls = fake_rustup(joinpath(tmp, "rustup"), something(real_cargo, "/nonexistent/cargo"))
        buildpath = fakebin * ":" * get(ENV, "PATH", "")
        # (inside this checkout's target/, so that hard links work: same file system)
        target = seeded_target_dir(mktempdir(mkpath(joinpath(ROOT, "target"))))
        real_cargo === nothing && @warn "no cargo on PATH: the install tests cannot build the engine"

        # ] add CuMem, by name, through Pkg.Registry.add of the registry; Pkg.build
        # compiles the engine through the rustup-style `cargo`
        env1 = joinpath(tmp, "env-by-name")
        ok, text = julia_in(depot, """
            import Pkg
            Pkg.Registry.add(Pkg.RegistrySpec(url = $(repr(reg))))
            Pkg.activate($(repr(env1)))
            Pkg.add("CuMem")
            $USE
            """; build = true, path = buildpath, target = target)
        @test ok
        @test occursin("CUMEM_LOADED_FROM " * joinpath(depot, "packages", "CuMem"), text)
        @test occursin("CUMEM_LIBRARY_PATH " * joinpath(depot, "packages", "CuMem"), text)
        @test !occursin("Error building", text)
        @test !occursin("has no known versions", text)
        @test isfile(calls) && occursin("cargo build --release --lib", read(calls, String))
        @test occursin("BinnedPool usage", text)
        @test !occursin("failed to update", text)
        @test isfile(joinpath(env1, "Manifest.toml"))
        @test occursin("git-tree-sha1 = \"$tree\"", read(joinpath(env1, "Manifest.toml"), String))

        # the registry placed directly in a depot's registries/ works the same: in the
        # same depot, with the registry that Pkg.Registry.add made replaced by a clone
        # placed there, so that Pkg can find CuMem by name only through the placed one.
        # The package's tree is then installed already (the same version of the same
        # registry) and its load takes the cache compiled above instead of precompiling
        # the same files again in a depot of its own (about 37 s of CPU).
        regs = joinpath(depot, "registries")
        rm(joinpath(regs, "CuMemRegistry"), recursive = true, force = true)
        @test isempty(setdiff(readdir(regs), ["Local"]))
        run(`git clone -q $reg $(joinpath(regs, "CuMemRegistry"))`)
        env2 = joinpath(tmp, "env-placed")
        ok, text = julia_in(depot, """
            import Pkg
            Pkg.activate($(repr(env2)))
            Pkg.add("CuMem")
            $USE
            """)
        @test ok
        @test !occursin("failed to update", text)

        # ] add <path>, building for real (into the same target directory). Julia 1.5's
        # libgit2 cannot open a `git worktree` checkout (.git is a file there): add a
        # clone of it instead.
        addpath = isdir(joinpath(ROOT, ".git")) ? ROOT : joinpath(tmp, "clone")
        addpath == ROOT || run(`git clone -q $ROOT $addpath`)
        # (a depot of its own, or Pkg would find the package installed by name and not
        # build it again; with the bundled Julia's empty registry, so that Pkg does not
        # try to clone the General registry)
        depot3 = joinpath(tmp, "depot3")
        mkpath(joinpath(depot3, "registries"))
        isdir(localreg) && cp(localreg, joinpath(depot3, "registries", "Local"))
        env3 = joinpath(tmp, "env-path")
        rm(calls, force = true)
        ok, text = julia_in(depot3, """
            import Pkg
            Pkg.activate($(repr(env3)))
            Pkg.add(Pkg.PackageSpec(path = $(repr(addpath))))
            $USE
            """; build = true, path = buildpath, target = target)
        @test ok
        @test occursin("CUMEM_LIBRARY_PATH " * joinpath(depot3, "packages", "CuMem"), text)
        @test !occursin("Error building", text)
        @test isfile(calls) && occursin("cargo build --release --lib", read(calls, String))
        @test occursin("CuMem", read(joinpath(env3, "Manifest.toml"), String))

        # ] dev <path>. The package is then this checkout's source, which runtests.jl
        # precompiled before the jobs started (into this process's first depot): a second
        # depot holding only that cache lets the load reuse it (Julia accepts a cache file
        # of any depot compiled from the same source files, unchanged) instead of compiling
        # the same files once more (about 37 s of CPU on a 2-core machine); a cache that is
        # missing or stale (this file run alone) is compiled into `depot`, as before.
        env4 = joinpath(tmp, "env-dev")
        ok, text = julia_in(depot * ":" * compiled_only_depot(joinpath(tmp, "depot-compiled")), """
            import Pkg
            Pkg.activate($(repr(env4)))
            Pkg.develop(Pkg.PackageSpec(path = $(repr(ROOT))))
            $USE
            """)
        @test ok
        @test occursin("CUMEM_LOADED_FROM " * joinpath(ROOT, "src", "CuMem.jl"), text)
    end
end

# The bundled Julia's wrapper must not force offline mode: with JULIA_PKG_OFFLINE=true,
# Pkg only considers versions already installed and `Pkg.add("CuMem")` by name fails
# with "has no known versions".
const WRAPPER = joinpath(ROOT, ".julia-local", "bin", "julia")
@testset "the bundled Julia leaves Pkg online" begin
    if isfile(WRAPPER)
        env = copy(ENV)
        delete!(env, "JULIA_PKG_OFFLINE")
        out = read(setenv(`$WRAPPER --startup-file=no -e 'print(get(ENV, "JULIA_PKG_OFFLINE", "unset"))'`, env), String)
        @test out == "unset"
    else
        @test_skip isfile(WRAPPER)
    end
end
