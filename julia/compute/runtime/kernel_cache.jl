# The engine keeps the kernels NVRTC compiles on disk (src/compute/disk_cache.rs), as
# CuPy's kernel cache does, so a fresh process loads them instead of compiling again.
# The Julia package puts that cache under the first Julia depot, beside Julia's own
# compiled files, unless CUMEM_CACHE_DIR names another directory.

# The cache's directory when CUMEM_CACHE_DIR is not set: `<first depot>/compiled/cumem_kernels`.
default_disk_cache_dir() =
    isempty(DEPOT_PATH) ? nothing : joinpath(DEPOT_PATH[1], "compiled", "cumem_kernels")

function init_kernel_cache()
    isempty(strip(get(ENV, "CUMEM_CACHE_DIR", ""))) || return nothing   # the engine reads it
    check(c_kernel_cache_config(default_disk_cache_dir(), UInt64(0), Int32(1)))
    return nothing
end

"""
    CuMem.disk_cache_dir() -> Union{String,Nothing}

Where compiled kernels are kept between processes: `CUMEM_CACHE_DIR` when set, else
`<first Julia depot>/compiled/cumem_kernels`; `nothing` when the cache is off
(`CUMEM_KERNEL_CACHE=0`). Every kernel NVRTC compiles (broadcasts, reductions,
[`load_kernel`](@ref), [`compile_ptx`](@ref)) is stored there as PTX/CUBIN keyed by its
source, the GPU architecture and NVRTC's version, written through a temporary file and a
rename (safe with concurrent processes) and bounded by `CUMEM_CACHE_MAXSIZE` bytes
(default 256 MiB; least recently used files go first). Deleting the directory is safe.
"""
function disk_cache_dir()
    v = lowercase(strip(get(ENV, "CUMEM_KERNEL_CACHE", "")))
    v in ("0", "off", "false", "no") && return nothing
    d = strip(get(ENV, "CUMEM_CACHE_DIR", ""))
    return isempty(d) ? default_disk_cache_dir() : String(d)
end

"""
    CuMem.disk_cache_stats() -> NamedTuple{(:hits, :misses, :writes, :evictions)}

What the kernel cache on disk did in this process: compiles answered from a file
(`hits`), compiles that ran NVRTC (`misses`), files written and files deleted to stay
under the bound (see [`disk_cache_dir`](@ref)).
"""
function disk_cache_stats()
    h, m, w, e = Ref{UInt64}(0), Ref{UInt64}(0), Ref{UInt64}(0), Ref{UInt64}(0)
    check(c_kernel_cache_stats(h, m, w, e))
    return (hits = Int(h[]), misses = Int(m[]), writes = Int(w[]), evictions = Int(e[]))
end

## the Julia kernel cache

# One cache level above the engine's registry (which keeps loaded modules by source): the
# kernels of every family (broadcasts, reductions, scans, sorts, copies, ...) keyed by the
# device and by types (functions, element types, layouts, 32- or 64-bit indexing), never by
# values. An entry made from compiled Julia functions keeps them (`fns`) and is used only
# while `device_function` still returns the same ones (a redefined method compiles again).

"""
    CuMem.kernel_cache_stats() -> NamedTuple

Counters of the Julia kernel cache ([`CuMem.kernel_entry`](@ref)): `entries` (distinct
kernels generated, per device), `hits` (calls that reused one), `misses` (calls that
generated CUDA C; on a GPU each is one NVRTC compile or a load from the cache on disk),
`nvrtc_checks` (on the host device: sources compiled to PTX to check them, when libnvrtc is
available). Entries are keyed by types (functions, element types, array wrappers,
dimensionality, 32- or 64-bit indexing), never by values.
"""
kernel_cache_stats() = lock(KERNEL_TABLE_LOCK) do
    (entries = length(KERNEL_TABLE), hits = KERNEL_TABLE_STATS.hits, misses = KERNEL_TABLE_STATS.misses,
     nvrtc_checks = KERNEL_TABLE_STATS.nvrtc_checks)
end

mutable struct KernelTableStats
    hits::Int
    misses::Int
    nvrtc_checks::Int
end
const KERNEL_TABLE_STATS = KernelTableStats(0, 0, 0)

"""
    CuMem.KernelEntry

A cached kernel source and, on a GPU, its loaded functions: `source`, `names` (the
`extern "C" __global__` functions launched from it), `kernels` (one [`Kernel`](@ref) per
name on a GPU; empty on the host device), `extra` (what the family keeps beside it) and
`fns` (the compiled element functions it contains).
"""
struct KernelEntry
    source::String
    names::Vector{String}
    kernels::Vector{Any}
    extra::Any
    fns::Tuple
end

# The fields broadcasting reads (`entry.kernel`: its one kernel; `entry.name`; `entry.globals`:
# launch-time globals, none since compiled functions carry them in the launch context).
function Base.getproperty(e::KernelEntry, s::Symbol)
    if s === :kernel
        k = getfield(e, :kernels)
        return isempty(k) ? nothing : k[1]
    elseif s === :name
        return getfield(e, :names)[1]
    elseif s === :globals
        return ()
    end
    return getfield(e, s)
end
const CachedKernel = KernelEntry

const KERNEL_TABLE = Dict{Any,KernelEntry}()
const KERNEL_TABLE_LOCK = ReentrantLock()
# Held while a missing entry is built (kernel_entry): the builds are serialised.
const KERNEL_BUILD_LOCK = ReentrantLock()

"""
    CuMem.kernel_entry(make, key, fns::Tuple = ()) -> KernelEntry

The cached kernel for `key` (types only) on the task's device, made on a miss by `make()`,
which returns `(source, names, extra)` (`names` a string or a tuple of strings). An entry
made from compiled element functions `fns` is reused only while the same ones are passed
(`device_function` returns new ones after a method is redefined). On a GPU every name is
compiled and loaded once; on the host device the source is compiled to PTX to check it
when libnvrtc is available.
"""
function kernel_entry(make, key, fns::Tuple = ())
    k = (task_device(), key)
    lock(KERNEL_TABLE_LOCK)
    try
        e = get(KERNEL_TABLE, k, nothing)
        kernel_table_hit(e, fns) && return e
    finally
        unlock(KERNEL_TABLE_LOCK)
    end
    # (a miss behind inference barriers: compiled once for every family's key and closure
    # type; only the look-up above is compiled for each)
    return kernel_entry_miss(Base.inferencebarrier(make), Base.inferencebarrier(k), fns)::KernelEntry
end
# The look-up's test, kernel_entry's and kernel_entry_miss's again under the build lock
# (the caller holds KERNEL_TABLE_LOCK): whether `e`, the table's entry of the key or
# `nothing`, was made from the compiled functions `fns`; a hit is counted. (The table read
# stays in the callers: a helper returning the entry, a union of `nothing` and an inline
# struct, cost an allocation per call on Julia 1.5.)
@inline kernel_table_hit(e, fns::Tuple) = e !== nothing && e.fns === fns && (KERNEL_TABLE_STATS.hits += 1; true)
@noinline function kernel_entry_miss(@nospecialize(make), @nospecialize(k), fns::Tuple)
    # One builder at a time: two tasks missing the same key must not both build it (the
    # builders register compiled functions and sites), so the second waits and finds it
    # (the look-up again, under the build lock).
    # (no closures over `k`: each would be compiled for the key's type)
    lock(KERNEL_BUILD_LOCK)
    try
        lock(KERNEL_TABLE_LOCK)
        try
            e = get(KERNEL_TABLE, k, nothing)
            kernel_table_hit(e, fns) && return e
        finally
            unlock(KERNEL_TABLE_LOCK)
        end
        return kernel_build(make, k, fns)
    finally
        unlock(KERNEL_BUILD_LOCK)
    end
end
function kernel_build(@nospecialize(make), @nospecialize(k), fns::Tuple)
    source, names, extra = make()
    names = names isa AbstractString ? [String(names)] : String[n for n in names]
    kernels = Any[]
    if on_host()
        if nvrtc_available()
            compile_ptx(source)
            lock(() -> KERNEL_TABLE_STATS.nvrtc_checks += 1, KERNEL_TABLE_LOCK)
        end
    else
        for n in names
            push!(kernels, load_kernel(source, n))
        end
    end
    e = KernelEntry(source, names, kernels, extra, fns)
    lock(KERNEL_TABLE_LOCK)
    try
        KERNEL_TABLE_STATS.misses += 1
        KERNEL_TABLE[k] = e
    finally
        unlock(KERNEL_TABLE_LOCK)
    end
    return e
end

# The loaded kernel `name` of an entry (GPU only).
function entry_kernel(e::KernelEntry, name::String)
    for i in eachindex(e.names)
        e.names[i] == name && return e.kernels[i]
    end
    throw(ArgumentError("the cached kernel source has no function $name"))
end
entry_kernel(e::KernelEntry) = e.kernels[1]

# The kernel `name` of a fixed CUDA C `source` (no compiled functions), cached under `tag`.
fixed_kernel(tag::Symbol, source::String, name::String) =
    entry_kernel(kernel_entry(() -> (source, name, nothing), (tag, name)), name)

# The entry for `key` made by `make()` returning `(source, name, extra, _)` (broadcasting's
# form; its fourth value, launch-time globals, is unused: compiled functions read them
# through the launch context).
cached_kernel(make, key) = kernel_entry(key) do
    r = make()
    (r[1], r[2], r[3])
end
