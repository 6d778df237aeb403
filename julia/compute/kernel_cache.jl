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
