# The kernels of the typed fast paths (fastpath.jl, reduce_full.jl, dims_slot.jl; the scans
# of accumulate.jl) indexed on disk by the Julia types that chose them. The engine's cache
# (kernel_cache.jl) keeps each
# compiled kernel by its source, so a fresh process skips NVRTC; but to have the source it
# first runs the code generator, whose own compilation by Julia was most of a fresh
# process's first `x .+ y` (3.6 s on the H100 machine). This index maps the slot's type
# (`Tuple{CuArray{Float32,1}, Broadcasted{..., typeof(+), ...}}`) to the kernel's source,
# so the first call of a type seen by an earlier process loads its kernel and runs the
# fast path without generating anything.
#
# Only types whose meaning cannot change between processes are indexed: functions that are
# singletons of Base or Core, element types among the kernel types, isbits numbers (values
# are launch arguments, not part of the source); plus the Julia version and a stamp of
# CuMem's own Julia files and .cuh files (another CuMem generates other code). Files live beside the
# engine's (`<disk_cache_dir()>/index`), written through a temporary file and a rename;
# `CUMEM_KERNEL_CACHE=0` turns both off. A file holds its full key and is used only when
# that matches (a hash collision reads as a miss).

# CuMem's Julia sources and fixed CUDA C (julia/cuda/*.cuh) as of this precompilation.
const INDEX_STAMP = let h = hash(string(VERSION))
    for root in (dirname(@__DIR__), CUDA_DIR), (dir, _, files) in walkdir(root), f in sort(files)
        (endswith(f, ".jl") || endswith(f, ".cuh")) && (h = hash(read(joinpath(dir, f), String), h))
    end
    h
end

const KERNEL_INDEX = Ref(true)       # a switch (tests; the disk cache's switch also applies)

# Types whose meaning is fixed by Julia's version: functions of Base or Core without
# captured values, numbers of the kernel types, arrays of them, Broadcasted trees of these.
# (Written with loops and field reads only: generic calls on types took seconds of
# inference in a fresh process, which this file is here to avoid.)
const INDEX_ELTYPES = (Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Float16, Float32, Float64)
function index_eltype(@nospecialize(T))
    for E in INDEX_ELTYPES
        E === T && return true
    end
    return false
end
function index_all_safe(ps::Core.SimpleVector)
    for p in ps
        p isa Type || return false
        index_safe(p) || return false
    end
    return true
end
function index_safe(@nospecialize(T::Type))
    index_eltype(T) && return true
    T isa DataType || return false
    T === Nothing && return true
    T <: CuArray && return index_eltype(T.parameters[1])
    if T <: Base.Broadcast.Broadcasted
        ps = T.parameters
        return ps[3] isa DataType && index_safe_fn(ps[3]::DataType) && ps[4] isa DataType && index_all_safe((ps[4]::DataType).parameters)
    end
    T <: Tuple && return index_all_safe(T.parameters)
    T <: Val && return true
    return index_safe_fn(T)
end
function index_safe_fn(F::DataType)
    isdefined(F, :instance) || return false             # a singleton: no captured values
    m = F.name.module
    return m === Base || m === Core || parentmodule(m) === Base || parentmodule(m) === Core
end

"""
    CuMem.index_key(T::Type; prefix = "") -> String

The kernel index's key of a slot type: every type by its module's full path and name
with its parameters, whatever the caller's module imports (`string(T)` drops the module
of names visible in `Main`, so the same type would print differently in two processes).
"""
function index_key(@nospecialize(T::Type); prefix::String = "")
    io = IOBuffer()
    print(io, prefix)
    index_key!(io, T)
    return String(take!(io))
end
function index_key!(io::IOBuffer, @nospecialize(x))
    if x isa DataType
        for m in fullname(x.name.module)
            print(io, m, '.')
        end
        print(io, x.name.name)
        ps = x.parameters
        if length(ps) > 0
            print(io, '{')
            for i in 1:length(ps)
                i > 1 && print(io, ',')
                index_key!(io, ps[i])
            end
            print(io, '}')
        end
    elseif x isa Symbol
        print(io, ':', x)
    elseif x isa Int
        print(io, x)
    else
        print(io, '(', typeof(x), ')')
        x isa Type ? print(io, x) : show(io, x)
    end
    return nothing
end

function index_dir()
    KERNEL_INDEX[] || return nothing
    d = disk_cache_dir()
    return d === nothing ? nothing : joinpath(d, "index")
end

# The index file of key `k` (a string) and what it must start with.
index_file(dir, k::String) = joinpath(dir, string(hash(k, INDEX_STAMP); base = 16, pad = 16) * ".jlk")
index_head(k::String) = string("cumem-index ", INDEX_STAMP, "\n", k, "\n")

"""
    CuMem.index_store(k::String, name::String, text::String)

Records `text` (a kernel's source, or what the caller keeps) and `name` under the key `k`
(the slot type as a string, checked index-safe by the caller: see
julia/compute/runtime/kernel_index.jl) when the disk cache is on. Errors writing are ignored (the
index is a cache).
"""
function index_store(k::String, name::String, text::String)
    dir = index_dir()
    dir === nothing && return nothing
    try
        mkpath(dir)
        f = index_file(dir, k)
        isfile(f) && return nothing
        tmp = string(f, ".", getpid(), ".tmp")
        write(tmp, index_head(k), name, "\n", text)
        mv(tmp, f; force = true)
    catch
    end
    return nothing
end

"""
    CuMem.index_lookup(k::String) -> Union{Nothing,Tuple{String,String}}

`(name, text)` recorded by [`index_store`](@ref) under the key `k` by this CuMem under
this Julia, or `nothing`.
"""
function index_lookup(k::String)
    dir = index_dir()
    dir === nothing && return nothing
    f = index_file(dir, k)
    isfile(f) || return nothing
    s = try
        read(f, String)
    catch
        return nothing
    end
    h = index_head(k)
    startswith(s, h) || return nothing
    i = findnext('\n', s, ncodeunits(h) + 1)
    i === nothing && return nothing
    return (s[ncodeunits(h)+1:prevind(s, i)], s[nextind(s, i):end])
end

## the index read once per process, device and key

# What the typed fast paths (broadcasts, whole-array and one-dimension reductions, scans)
# found in the index, by `(device ordinal, key)`: the value that `build` made when the caller
# keeps it here (`keep`: the scans, which have no slot table), else `nothing`, as once tried
# without a record.
const INDEX_TRIED = IdDict{Any,Any}()
const INDEX_TRIED_LOCK = ReentrantLock()

# The kernel index read once per process, device and `key` (a value naming the family and
# its types, e.g. `(:dims, K, nk, linear)`), on the task's device (`index_entry_on`: on device
# ordinal `dev`). The first call for `(dev, key)` asks `ikey(key, arg)` for the index key and the
# name its record must have (`nothing`: types that are not indexed; a name `nothing`: any)
# and, when the record is there, returns `build(key, arg, text, kernels)`: `text` the recorded
# text, `kernels` those of the names in `names` loaded from it (`nothing`: none;
# `:recorded`: the one of the recorded name; each `nothing` on the host device, where nothing
# is loaded). Later calls for `(dev, key)` return the first call's value when `keep`, else
# `nothing` (the slot families keep it in their own tables, checked against the world age
# there). (Compiled once for all keys: every argument arrives as `Any`; `ikey` and `build`
# functions and `arg` their data, not closures, which would be allocated on each call. The
# scans call it on every call: a lock and a table read once tried.)
index_entry(@nospecialize(ikey), @nospecialize(build), @nospecialize(arg), @nospecialize(key), @nospecialize(names), keep::Bool) =
    index_entry_on(task_device(), ikey, build, arg, key, names, keep)

# Makes `v` what `index_entry` returns for `key` on the task's device from now on, as if the
# index had held it at the first call: a kept family's (the scans') kernels generated in this
# process and recorded in the index, so that its later calls take the index's path (a table
# read) instead of the generator's (the element functions looked up, the index's key built and
# the record checked again: about 30 us a `cumsum` on an H200, session 15).
index_keep!(@nospecialize(key), @nospecialize(v)) =
    (k = (task_device(), key); lock(() -> INDEX_TRIED[k] = v, INDEX_TRIED_LOCK); nothing)
@noinline function index_entry_on(dev::Int, @nospecialize(ikey), @nospecialize(build), @nospecialize(arg), @nospecialize(key),
                                  @nospecialize(names), keep::Bool)
    k = (dev, key)
    lock(INDEX_TRIED_LOCK)
    try
        haskey(INDEX_TRIED, k) && return INDEX_TRIED[k]
        INDEX_TRIED[k] = nothing
    finally
        unlock(INDEX_TRIED_LOCK)
    end
    ikn = ikey(key, arg)
    ikn === nothing && return nothing
    ik, name = ikn
    r = index_lookup(ik::String)
    (r === nothing || (name !== nothing && r[1] != name)) && return nothing
    text = r[2]
    ns = names === :recorded ? (r[1],) : names === nothing ? () : names
    kernels = Any[on_host() ? nothing : load_kernel(text, n) for n in ns]
    v = build(key, arg, text, kernels)
    keep && v !== nothing && lock(() -> INDEX_TRIED[k] = v, INDEX_TRIED_LOCK)
    return v
end
