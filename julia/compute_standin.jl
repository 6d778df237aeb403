# PRIVATE STAND-IN for the compute-engine helper's julia/compute.jl (the contract's names).
# Host paths are real; GPU paths throw. Deleted when compute-engine lands on main.

struct KernelCompileError <: Exception
    msg::String
end
Base.showerror(io::IO, e::KernelCompileError) = print(io, "KernelCompileError: ", e.msg)

const _ON_HOST = Ref{Int}(-1)
on_host() = (_ON_HOST[] < 0 && (_ON_HOST[] = c_device_is_host() != 0 ? 1 : 0); _ON_HOST[] == 1)

function host_view(a::CuArray{T,N}) where {T,N}
    on_host() || throw(CuMemError(Int32(6), "host_view needs the host device"))
    check_alive(a)
    length(a) == 0 && return Array{T,N}(undef, size(a))
    return unsafe_wrap(Array, Ptr{T}(devaddr(a)), size(a))
end

const _NVRTC = Ref{Any}(nothing)
function _nvrtc()
    if _NVRTC[] === nothing
        p = get(ENV, "CUMEM_NVRTC", "")
        h = isempty(p) ? C_NULL : Libdl.dlopen_e(p)
        _NVRTC[] = h
    end
    return _NVRTC[]::Ptr{Cvoid}
end
nvrtc_available() = _nvrtc() != C_NULL

function compile_ptx(source::String; arch = nothing)
    lib = _nvrtc()
    lib == C_NULL && throw(CuMemError(Int32(6), "libnvrtc not found"))
    sym(n) = Libdl.dlsym(lib, n)
    prog = Ref{Ptr{Cvoid}}()
    r = ccall(sym(:nvrtcCreateProgram), Cint, (Ptr{Ptr{Cvoid}}, Cstring, Cstring, Cint, Ptr{Cstring}, Ptr{Cstring}),
              prog, source, "kernel.cu", 0, C_NULL, C_NULL)
    r == 0 || error("nvrtcCreateProgram: $r")
    a = "--gpu-architecture=" * (arch === nothing ? "compute_75" : arch)
    opts = [a]
    r = ccall(sym(:nvrtcCompileProgram), Cint, (Ptr{Cvoid}, Cint, Ptr{Cstring}), prog[], 1, opts)
    if r != 0
        n = Ref{Csize_t}()
        ccall(sym(:nvrtcGetProgramLogSize), Cint, (Ptr{Cvoid}, Ptr{Csize_t}), prog[], n)
        buf = Vector{UInt8}(undef, n[])
        ccall(sym(:nvrtcGetProgramLog), Cint, (Ptr{Cvoid}, Ptr{UInt8}), prog[], buf)
        ccall(sym(:nvrtcDestroyProgram), Cint, (Ptr{Ptr{Cvoid}},), prog)
        lines = split(source, '\n')
        numbered = join([lpad(i, 4) * "  " * l for (i, l) in enumerate(lines)], "\n")
        throw(KernelCompileError(String(buf[1:end-1]) * "\n" * numbered))
    end
    n = Ref{Csize_t}()
    ccall(sym(:nvrtcGetPTXSize), Cint, (Ptr{Cvoid}, Ptr{Csize_t}), prog[], n)
    buf = Vector{UInt8}(undef, n[])
    ccall(sym(:nvrtcGetPTX), Cint, (Ptr{Cvoid}, Ptr{UInt8}), prog[], buf)
    ccall(sym(:nvrtcDestroyProgram), Cint, (Ptr{Ptr{Cvoid}},), prog)
    return String(buf[1:end-1])
end

struct Kernel
    handle::UInt64
end
load_kernel(source::String, name::String) = throw(CuMemError(Int32(6), "kernels need a CUDA GPU"))
launch(k::Kernel, args...; blocks, threads, shmem = 0) = throw(CuMemError(Int32(6), "kernels need a CUDA GPU"))
suggest_block(k::Kernel) = 256
device_info() = (cc_major = 0, cc_minor = 0, sm_count = Sys.CPU_THREADS, max_threads = 1024)
synchronize() = nothing
