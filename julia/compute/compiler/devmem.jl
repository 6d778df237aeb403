# Device memory accesses of CuDeviceArray (compute/devarray.jl) as C: `dev_load(T, addr, i)`
# reads element i (1-based) of T at address `addr`, `dev_store!(addr, v::T, i)` writes it.
# Called from dc_math (mathlib.jl) for every resolved call; nothing for other calls.

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
