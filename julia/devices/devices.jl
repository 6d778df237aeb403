# Several devices (CUDA.jl's device API): CuDevice, devices(), ndevices(), device(),
# device!(i) and device!(f, i), with the active device task-local as in CUDA.jl.
#
# The engine has one engine (pool, statistics, limit) per device and a current device per
# OS thread (`cumem_set_device`); Julia keeps the device per task (task_local_storage),
# and lib/libcumem.jl's wrappers make the thread's device the task's before each call
# that acts on the current device. Frees and copies name an address, from which the
# engine finds the device itself, so the finalizer path is untouched. All of it is
# skipped until a task first switches to a device other than 0 (`MULTI`): a
# single-device program pays one load of a Bool per allocation. No method here names
# CuArray: array/ adds those (`device(a)`, copies between devices).

"""
    CuDevice(ordinal)

A device of the engine, by its 0-based ordinal (CUDA's device number, or the host
stand-in's index under `CUMEM_DEVICE=host:N`), as CUDA.jl's `CuDevice`. `deviceid(d)` is
the ordinal; `CuMem.name(d)` the device's name. Made by [`devices`](@ref),
[`device`](@ref) and [`device!`](@ref).
"""
struct CuDevice
    handle::Int
end

"""
    CuMem.deviceid(d::CuDevice = device()) -> Int

The 0-based ordinal of `d` (CUDA.jl's `deviceid`).
"""
deviceid(d::CuDevice = device()) = d.handle

"""
    CuMem.name(d::CuDevice) -> String

The device's name, e.g. `"NVIDIA H100 80GB HBM3"` or `"host memory (no GPU)"`. Opens the
device's engine if it is not open yet.
"""
name(d::CuDevice) = device!(device_name, d)

Base.show(io::IO, d::CuDevice) = print(io, "CuDevice(", d.handle, ")")
# CuDevice(-1) and CuDevice(-2) are CUDA.jl's DEVICE_CPU and DEVICE_INVALID (tools/driver.jl)
Base.show(io::IO, ::MIME"text/plain", d::CuDevice) =
    print(io, "CuDevice(", d.handle, "): ", d.handle == -1 ? "CPU" : d.handle == -2 ? "INVALID" : name(d))

"""
    ndevices() -> Int

The number of devices: CUDA's device count on a GPU machine (`torch.cuda.device_count()`),
`N` under `CUMEM_DEVICE=host:N` (host memory standing in for N GPUs), else 1.
"""
function ndevices()
    if NDEVICES[] == 0
        n = c_device_count()
        n < 1 && throw(CuMemError(CUMEM_ERROR_DEVICE, "the engine cannot start: " * last_error()))
        NDEVICES[] = n
    end
    return NDEVICES[]
end

"""
    devices() -> Vector{CuDevice}

Every device, `CuDevice(0)` to `CuDevice(ndevices() - 1)` (CUDA.jl's `devices()`).
"""
devices() = [CuDevice(i) for i in 0:ndevices()-1]

"""
    device() -> CuDevice

The current task's device: where new arrays are allocated and kernels, reductions and
GEMMs run, and what `memory_stats()`, `memory_status()` and `reclaim()` report on. Each
task starts on device 0 (task-local, as in CUDA.jl); [`device!`](@ref) switches.
"""
device() = CuDevice(task_device())

"""
    device!(d::Union{Integer,CuDevice}) -> CuDevice
    device!(f, d)

Makes `d` (a 0-based ordinal or a `CuDevice`) the current task's device, opening its
engine (on a GPU: its primary context) on first use: from then on the task's new arrays
are allocated there and its kernels run there (CUDA.jl's `device!`). The switch is
task-local: other tasks keep theirs, and new tasks start on device 0. With a function,
runs `f()` on device `d` and switches back afterwards (also on error); returns `f()`.

Every device has its own pool, statistics and memory limit (`JULIA_CUDA_MEMORY_LIMIT`
applies to each). Throws `ArgumentError` for an ordinal outside `0:ndevices()-1` (naming
`CUMEM_DEVICE=host:N` without a GPU), `CuMemError` when the device cannot be opened.
"""
function device!(d::Integer)
    n = ndevices()
    0 <= d < n || throw(ArgumentError("device!($d): there " * (n == 1 ? "is 1 device" : "are $n devices") *
                                      " (ordinals 0 to $(n - 1))" *
                                      (on_host() ? "; CUMEM_DEVICE=host:N makes N host devices stand in for N GPUs" : "")))
    set_task_device!(Int(d))
    return CuDevice(d)
end
device!(d::CuDevice) = device!(d.handle)
function device!(f::Function, d::Union{Integer,CuDevice})
    old = task_device()
    device!(d)
    try
        return f()
    finally
        device!(old)
    end
end

# The devices opened so far (device 0 always), by ordinal.
open_devices() = [CuDevice(i) for i in 0:ndevices()-1 if c_device_is_open(i) == 1]

## operands of one computation must share the task's device

# The device ordinal of an array's memory (array/array.jl adds CuArray's), or nothing.
array_device(a::AbstractArray) = (p = parent(a); p === a ? nothing : array_device(p))
array_device(x) = nothing

"""
    CuMem.check_devices(what, arrays...)

Throws `ArgumentError` unless every CuArray among `arrays` (or under a wrapper: views,
transposes, reshapes) is on the current task's device; `what` names the operation. The
message names the devices involved and what to do (`copyto!` an array onto the other
device, or `device!`). Free until some task switched devices. Broadcasts, reductions,
scans, strided copies, `fill!`, `rand!` and the linear algebra call it; `copyto!`
between two CuArrays is the one operation that crosses devices.
"""
@inline check_devices(what, arrays...) = (MULTI[] && check_devices_slow(what, arrays); nothing)
@noinline function check_devices_slow(what, arrays)
    d = task_device_slow()
    devs = Int[]
    for a in arrays
        ad = array_device(a)
        ad === nothing || ad in devs || push!(devs, ad)
    end
    if length(devs) > 1
        throw(ArgumentError("$what mixes arrays of " * join(("device $x" for x in sort!(devs)), " and ") *
                            " while the task's device is $d: copy them onto one device first " *
                            "(copyto! between CuArrays of two devices is a peer copy) and run it there"))
    elseif length(devs) == 1 && devs[1] != d
        throw(ArgumentError("$what on arrays of device $(devs[1]) while the task's device is $d: " *
                            "switch with CuMem.device!($(devs[1])) (or device!($(devs[1])) do ... end), " *
                            "or copy the arrays onto device $d with copyto!"))
    end
    return nothing
end

## copies between devices

"""
    CuMem.peer_access(dst::CuDevice, src::CuDevice) -> Symbol

How `copyto!` moves bytes from an array on `src` to one on `dst`: `:peer`, directly (on
GPUs where `cuDeviceCanAccessPeer` allows, over NVLink or PCIe, peer access enabled on
first use as PyTorch does; always between host stand-ins), or `:host`, staged through host
memory. Opens both devices' engines.
"""
function peer_access(dst::CuDevice, src::CuDevice)
    r = c_can_access_peer(dst.handle, src.handle)
    r < 0 && throw_code(CUMEM_ERROR_INVALID_VALUE)
    return r == 1 ? :peer : :host
end

## one device's memory

"""
    memory_stats(dev::CuDevice) -> NamedTuple
    memory_status([io=stdout,] dev::CuDevice)

[`memory_stats`](@ref) and [`memory_status`](@ref) of device `dev` (each device has its
own pool, statistics and limit), whatever the current task's device.
"""
memory_stats(dev::CuDevice) = device!(memory_stats, dev)
function memory_status(io::IO, dev::CuDevice)
    flush_engine_log()
    device!(() -> print(io, engine_memory_status(CUMEM_STATUS_NO_ALLOCATIONS)), dev)
    return nothing
end
memory_status(dev::CuDevice) = memory_status(stdout, dev)
