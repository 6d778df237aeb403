# A system image holding CuMem and the native code of what users call first: the answer of
# PackageCompiler.jl's `create_sysimage` (its 1.x steps for Julia 1.5), with stdlibs only.
# Julia 1.5 keeps inference in a package's precompile file but never its native code, so a
# fresh process compiles every first operation again (docs/performance.md, "Time to first
# result"); a system image keeps both. Three steps, each in a fresh process:
#   1. the workload under `--trace-compile`: the signatures a process compiled;
#   2. `--output-o` from Julia's default sys.so: `using CuMem`, then each recorded
#      `precompile(...)` statement; Julia writes the whole heap and its native code as an object;
#   3. `cc -shared` links the object against libjulia.
# A process started with `-J image` runs CuMem's `__init__` again (every handle, pointer and
# table the engine needs is made there, none is baked in); `init_sysimage` warns when the
# package's sources differ from the ones the image was built from.

# The package sources' digest when this CuMem came from a system image (0 otherwise: the
# build's output process sets it after `using CuMem`, so only an image carries it).
const SYSIMAGE_SOURCES = Ref{UInt64}(0)

# The files whose change makes an image stale: julia/ (sources, CUDA C, precompile lists)
# and Project.toml. A digest of their relative paths and contents (mtimes change on checkout).
function package_sources_digest(root::AbstractString = PACKAGE_ROOT)
    h = hash(:CuMemSources)
    files = String[]
    for (dir, _, fs) in walkdir(joinpath(root, "julia")), f in fs
        push!(files, joinpath(dir, f))
    end
    push!(files, joinpath(root, "Project.toml"))
    for f in sort!(files)
        isfile(f) || continue
        h = hash(read(f), hash(relpath(f, root), h))
    end
    return h
end

"""
    CuMem.sysimage_stale() -> Union{Bool,Nothing}

`nothing` when this process's CuMem was loaded as a package (not from a system image);
else whether the package's sources (`julia/`, `Project.toml`) differ from those the image
was built from by [`CuMem.create_sysimage`](@ref). `__init__` warns once when it is `true`.
"""
sysimage_stale() = SYSIMAGE_SOURCES[] == 0 ? nothing : package_sources_digest() != SYSIMAGE_SOURCES[]

# __init__'s first step: what code caches from the engine on first use (`on_host`,
# `ndevices`) is this process's to learn; an image holds the values of the process that wrote it.
init_engine_facts() = (ON_HOST[] = -1; NDEVICES[] = 0; nothing)
precompile(init_engine_facts, ())

# (__init__'s step: a package loaded as a package returns at once; the check and its warning
# behind a barrier, compiled only in an image, where they are native code already: inline,
# the warning's logging code cost every `using CuMem` 0.06 s of compilation)
function init_sysimage()
    (SYSIMAGE_SOURCES[] == 0 || ccall(:jl_generating_output, Cint, ()) != 0) && return nothing
    Base.inferencebarrier(warn_if_sysimage_stale)()
    return nothing
end
precompile(init_sysimage, ())

function warn_if_sysimage_stale()
    if sysimage_stale() === true
        @warn "CuMem: this system image was built from other CuMem sources than $(PACKAGE_ROOT); " *
              "it runs the code it was built with. Rebuild it with CuMem.create_sysimage " *
              "(docs/performance.md, \"System image\")."
    end
    return nothing
end

# The workload `create_sysimage` runs by default: what users call first, on the device present.
const DEFAULT_SYSIMAGE_WORKLOAD = joinpath(PACKAGE_ROOT, "scripts", "precompile_workload.jl")

# Julia's own system image (the one `julia` starts with when not given -J), beside libjulia:
# <libdir>/julia/sys.<dlext>. Not the running image, which may be a CuMem image.
function libjulia_path()
    for p in Libdl.dllist()
        occursin(r"^libjulia\.", basename(p)) && return p
    end
    error("CuMem.create_sysimage: libjulia is not among the libraries this process loaded")
end

function default_julia_sysimage()
    cands = (joinpath(dirname(libjulia_path()), "julia", "sys." * Libdl.dlext),
             normpath(joinpath(Sys.BINDIR, "..", "lib", "julia", "sys." * Libdl.dlext)))
    for c in cands
        isfile(c) && return c
    end
    error("CuMem.create_sysimage: Julia's default system image is not at $(join(cands, " or "))")
end

default_cpu_target() = (p = Base.JLOptions().cpu_target; p == C_NULL ? "native" : unsafe_string(p))

# Julia 1.5 keeps no inferred code for a method instance whose signature is not one it would
# compile itself (inference's `cache_the_tree`: not inlineable, not `jl_isa_compileable_sig`),
# such as `f(::DCFn, ::Any)` where a caller's abstract argument matched one method and the
# caller's code calls that instance directly. `--output-o` compiles native code only for
# instances with inferred code (or code run in that process), so the image's callers would
# compile these at their first call (51 of the default workload's methods on the host device,
# among them the code generator's `dc_*`: the first `sum` took 0.55 s instead of 0.03). This infers `tt` again and adds the tree to the cache
# beside the instance's existing result (same return type and worlds, whose inference
# registered the backedges that invalidate both), so that the image holds its native code.
# Only in the build's output process; `false` when there is nothing to do or on other Julia
# versions (whose internals differ).
function sysimage_keep_inferred!(@nospecialize(tt), world::UInt = Base.get_world_counter())
    v"1.5" <= VERSION < v"1.6-" || return false
    ms = Base._methods_by_ftype(tt, -1, world)
    (ms isa Vector && length(ms) == 1) || return false
    sparams, meth = ms[1][2], ms[1][3]
    mi = Core.Compiler.specialize_method(meth, tt, sparams, true)
    mi isa Core.MethodInstance && isdefined(mi, :cache) || return false
    ci = mi.cache
    while !(ci.min_world <= world <= ci.max_world)
        isdefined(ci, :next) || return false
        ci = ci.next
    end
    (ci.inferred === nothing && ci.invoke == C_NULL && !isdefined(ci, :rettype_const)) || return false
    src, _ = Core.Compiler.typeinf_code(meth, tt, sparams, true, Core.Compiler.Params(world))
    src isa Core.CodeInfo || return false
    n = length(src.slotflags)
    resize!(src.slottypes, n)
    resize!(src.slotnames, n)
    tree = ccall(:jl_compress_ir, Any, (Any, Any), meth, src)
    ccall(:jl_set_method_inferred, Ref{Core.CodeInstance}, (Any, Any, Any, Any, Int32, UInt, UInt),
          mi, ci.rettype, nothing, tree, Int32(0), ci.min_world, ci.max_world)
    return true
end

# Runs `cmd` with its output in `log`; on failure, an error naming the step with the log's end.
function sysimage_step(cmd::Cmd, log::AbstractString, what::AbstractString)
    t = time()
    ok = success(pipeline(cmd; stdout = log, stderr = log))
    if !ok
        text = isfile(log) ? read(log, String) : ""
        tail = length(text) > 3000 ? "…" * text[prevind(text, end - 2999):end] : text
        error("CuMem.create_sysimage: $what failed ($(cmd.exec[1]) exited with an error). " *
              "The end of its output:\n", tail)
    end
    return time() - t
end

# The script of step 2 (the `--output-o` process).
function sysimage_output_script(statements::AbstractString, digest::UInt64, report::AbstractString)
    return """
    Base.reinit_stdio()
    Base.init_depot_path()
    Base.init_load_path()
    # CuMem comes from the precompiled file step 1 made (a process writing an image cannot
    # make one, and loading the sources instead fails)
    let fresh = try
            id = Base.identify_package("CuMem")
            src = Base.locate_package(id)
            any(p -> Base.stale_cachefile(src, p) !== true, Base.find_all_in_cache_path(id))
        catch
            true
        end
        fresh || error("CuMem has no current precompiled file for this Julia image: were its sources changed during the build?")
    end
    # CuMem's __init__ runs here and again in every process started from the image: what it
    # registers at exit in this process is not kept.
    let hooks = copy(Base.atexit_hooks)
        Core.eval(Main, :(using CuMem))
        copy!(Base.atexit_hooks, hooks)
    end
    CuMem.SYSIMAGE_SOURCES[] = $(repr(digest))
    let m = Module(:CuMemSysimagePrecompile), ok = 0, n = 0, kept = 0
        for (_, mod) in Base.loaded_modules
            Core.eval(m, Expr(:const, Expr(:(=), nameof(mod), mod)))
        end
        for line in eachline($(repr(statements)))
            startswith(line, "precompile(") || continue
            n += 1
            # (as PackageCompiler: inference cannot cache `Vararg{T, N} where N`)
            line = replace(line, r"Vararg{(.*?), N} where N" => s"Vararg{\\1, 100}")
            try
                ex = Meta.parse(line)
                Core.eval(m, ex) === true || continue
                ok += 1
                CuMem.sysimage_keep_inferred!(Core.eval(m, ex.args[2])) && (kept += 1)
            catch
            end
        end
        write($(repr(report)), string(ok, " ", n, " ", kept))
    end
    # Finalizers run now, not in the collection while Julia writes the image: one run there
    # needs code the JIT no longer has ("Symbol ccall_cumem_init_... not found", a build of
    # the test's image)
    GC.gc(true); GC.gc(true)
    ccall(:jl_gc_enable_finalizers, Cvoid, (Ptr{Cvoid}, Int32), Core.getptls(), 0)
    """
end

"""
    CuMem.create_sysimage(path; workload, cpu_target, cc = "cc", project) -> NamedTuple

Builds a system image at `path` holding CuMem and the native code of what `workload`
runs, so that `julia -J path --project=<CuMem's project>` starts with CuMem loaded (its
`__init__` runs at startup) and its first operations compiled. The steps, each a fresh
Julia process (PackageCompiler.jl's `create_sysimage`, by hand):

1. `julia -J <Julia's default sys.so> --project=project --trace-compile=<tmp>` runs
   `workload` (a Julia file; default: the package's `scripts/precompile_workload.jl`, what
   users call first) on the device the environment chooses (`CUMEM_DEVICE`: a GPU when
   present, else the host device);
2. `julia --output-o=<tmp>.o -J <Julia's default sys.so> --cpu-target=cpu_target` loads
   CuMem and runs each `precompile(...)` statement step 1 recorded (each in try/catch:
   statements naming the workload's own closures fail);
3. `cc -shared -o path -Wl,--whole-archive <tmp>.o -Wl,--no-whole-archive -L<libdir> -l:<libjulia>`.

`cpu_target` (default: this process's, `"native"` unless julia was started with
`--cpu-target`) is the machine code's target: `"native"` runs only on CPUs like this one;
Julia's multi-versioned `"generic;sandybridge,-xsaveopt,clone_all;haswell,-rdrnd,base(1)"`
runs on any x86-64 at a longer build (its code is compiled for each target). The image must be rebuilt when
CuMem's sources or Julia change (a CuMem from a stale image warns at startup; see
[`CuMem.sysimage_stale`](@ref)); an image only runs with the Julia that built it.

Returns `(path, seconds, step_seconds, bytes, statements, precompiled, trees_kept)`: the
image, the build's wall seconds and those of each step, its size in bytes, the statements recorded, how many of them compiled,
and how many of those needed their inferred code kept by hand (Julia 1.5 drops it for
signatures it would not compile itself, and would then leave them out of the image). Takes minutes
(step 2 alone compiles Base's and CuMem's code again). Throws an `ErrorException` naming
the step and the end of its output when a step fails, when `cc` or `workload` is missing,
or when `path` is a directory; nothing is written at `path` unless the build succeeds
(the image is moved there at the end).
"""
function create_sysimage(path::AbstractString; workload::AbstractString = DEFAULT_SYSIMAGE_WORKLOAD,
                         cpu_target::AbstractString = default_cpu_target(), cc::AbstractString = "cc",
                         project::AbstractString = PACKAGE_ROOT)
    Sys.islinux() || error("CuMem.create_sysimage: only Linux is supported (the link step uses GNU ld options)")
    path = abspath(path)
    isdir(path) && error("CuMem.create_sysimage: $(repr(path)) is a directory; give the image's file name")
    isdir(dirname(path)) || error("CuMem.create_sysimage: the directory of $(repr(path)) does not exist")
    isfile(workload) || error("CuMem.create_sysimage: the workload $(repr(workload)) does not exist")
    workload = abspath(workload)
    ccpath = Sys.which(cc)
    ccpath === nothing && error("CuMem.create_sysimage: no C compiler $(repr(cc)) on PATH (it links the image: " *
                                "install gcc or clang, or pass cc = \"/path/to/cc\")")
    julia = joinpath(Sys.BINDIR, Base.julia_exename())
    base = default_julia_sysimage()
    libjulia = libjulia_path()
    t0 = time()
    tmp = mktempdir()
    try
        trace = joinpath(tmp, "trace.jl")
        # (the same -J as step 2: Julia keys a package's precompiled file by the image's path)
        t1 = sysimage_step(`$julia --startup-file=no -J $base --project=$project --trace-compile=$trace $workload`,
                      joinpath(tmp, "workload.log"), "step 1 (the workload under --trace-compile)")
        isfile(trace) || error("CuMem.create_sysimage: the workload ran but recorded no compilation")
        script = joinpath(tmp, "output.jl")
        report = joinpath(tmp, "count.txt")
        write(script, sysimage_output_script(trace, package_sources_digest(project), report))
        obj = joinpath(tmp, "cumem.o")
        out2 = `$julia --startup-file=no --cpu-target=$cpu_target --project=$project -J $base --output-o=$obj $script`
        t2 = try
            sysimage_step(out2, joinpath(tmp, "output.log"), "step 2 (compiling the image: julia --output-o)")
        catch err
            # Julia 1.5's --output-o sometimes aborts at the end ("FATAL ERROR: Symbol
            # \"ccall_cumem_init_...\" not found": code the JIT needs after the image's code
            # was taken from it; 2 of 6 test builds here): once more.
            # (Issue 34. In this process Julia 1.5 compiles a by-name `ccall((:f, lib))` or
            # `cglobal((:f, lib))` through a lazily bound global `ccall_<f>_<N>` that every
            # function naming `f` shares and the code of one of them defines; the same class as
            # PyCall.jl issue 850, gone in Julia 1.6. `cumem_init` was the only name reached both
            # ways, both in `__init__`: `open_library`'s check (a `cglobal`) and `c_init`. Now
            # neither names it: the check looks the name up with `Libdl.dlsym`, as a ccall does at
            # run time, and `c_init` calls the pointer found in the handle `open_library` opened.)
            (err isa ErrorException && occursin(r"Symbol \"[^\"]*\" ?not found", err.msg)) || rethrow()
            @warn "CuMem.create_sysimage: julia --output-o aborted (a known intermittent failure of Julia 1.5); running step 2 again"
            rm(obj; force = true)
            sysimage_step(out2, joinpath(tmp, "output.log"), "step 2 (compiling the image: julia --output-o), second try")
        end
        isfile(obj) || error("CuMem.create_sysimage: julia --output-o wrote no object file")
        so = joinpath(tmp, "cumem." * Libdl.dlext)
        t3 = sysimage_step(`$ccpath -shared -o $so -Wl,--whole-archive $obj -Wl,--no-whole-archive
                       -L$(dirname(libjulia)) -l:$(basename(libjulia))`,
                      joinpath(tmp, "link.log"), "step 3 (linking with $cc)")
        ok, n, kept = parse.(Int, split(read(report, String)))
        # Into place by a rename in the target directory: `path` is never half-written.
        part = string(path, ".partial-", getpid())
        try
            cp(so, part; force = true)
            Base.Filesystem.rename(part, path)
        finally
            rm(part; force = true)
        end
        return (path = path, seconds = time() - t0, step_seconds = (t1, t2, t3), bytes = filesize(path),
                statements = n, precompiled = ok, trees_kept = kept)
    finally
        rm(tmp; recursive = true, force = true)
    end
end
