# Device memory accesses of CuDeviceArray (compute/runtime/devarray.jl) as C: `dev_load(T, addr, i)`
# reads element i (1-based) of T at address `addr`, `dev_store!(addr, v::T, i)` writes it.
# Called from dc_math (mathlib.jl) for every resolved call; nothing for other calls.

# The primitives: element i (1-based) of T at `addr`. In kernels they are C pointer
# accesses (dc_devmem below). Called on the host (Base computing a broadcast on
# the host device) they read host memory, which the host device's memory is; nothing on
# the host calls them for a GPU's arrays (`show` prints the summary only). Kept free of
# other calls, so that inference types them inside any element function.
@noinline dev_load(::Type{T}, addr::UInt64, i::Int) where {T} = unsafe_load(Ptr{T}(addr), i)
@noinline dev_store!(addr::UInt64, v::T, i::Int) where {T} = (unsafe_store!(Ptr{T}(addr), v, i); nothing)


function dc_devmem(fn, @nospecialize(f), ts, args)
    if f === dev_load && length(ts) == 3
        T = ts[1].parameters[1]
        dc_is_ghost(T) && return DC_GHOST
        ct = dc_ct(fn, T)
        return string("(*(const ", ct, "*)(uint64_t)((uint64_t)(", dc_val(fn, args[2]), ") + (uint64_t)((int64_t)(",
                      dc_val(fn, args[3]), ") - 1) * sizeof(", ct, ")))")
    elseif f === dev_store! && length(ts) == 3
        T = ts[2]
        dc_is_ghost(T) && return DC_GHOST
        ct = dc_ct(fn, T)
        return string("(*(", ct, "*)(uint64_t)((uint64_t)(", dc_val(fn, args[1]), ") + (uint64_t)((int64_t)(",
                      dc_val(fn, args[3]), ") - 1) * sizeof(", ct, ")) = ", dc_val(fn, args[2]), ")")
    end
    return nothing
end
