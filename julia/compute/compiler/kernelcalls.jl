# The compiler's hook for the kernel language (compute/device/): calls of the device
# intrinsics (`threadIdx_x`, `sync_threads`, `atomic_add!`, `shfl_sync`, shared memory,
# `cuprintf`, ...) map to CUDA C. The device room's files fill `DC_DEVICE_CALLS` with one
# translator per function object; the translators use the compiler's values (dc_val,
# dc_ct) and may write statements before their expression (shared-memory declarations).

"""
    CuMem.DC_DEVICE_CALLS :: IdDict

Function object => translator `(fn, i, ts, args) -> String` for the kernel language's
intrinsics: `fn` is the function being translated (a `DCFn`), `i` the statement, `ts`
the argument types and `args` the IR arguments; the result is the C expression of the
call (`void` expressions for calls returning `nothing`).
"""
const DC_DEVICE_CALLS = IdDict{Any,Any}()

# The C of a call of a kernel intrinsic, or nothing for other functions (mathlib.jl asks).
function dc_device_call(fn, i::Int, @nospecialize(f), ts, args)
    h = get(DC_DEVICE_CALLS, f, nothing)
    h === nothing && return nothing
    return h(fn, i, ts, args)
end

# Julia's pointer intrinsics: `unsafe_load`/`unsafe_store!` of a `Ptr{T}` (a 64-bit address
# in C) in kernels, element i (1-based).
function dc_pointer_intrinsic(fn, name::Symbol, args)
    P = dc_argtype(fn, args[1])
    if name === :pointerref
        T = eltype(P)
        ct = dc_ct(fn, T)
        return string("(*(const ", ct, "*)((uint64_t)(", dc_val(fn, args[1]), ") + (uint64_t)((int64_t)(",
                      dc_val(fn, args[2]), ") - 1) * sizeof(", ct, ")))")
    else
        T = eltype(P)
        ct = dc_ct(fn, T)
        return string("(*(", ct, "*)((uint64_t)(", dc_val(fn, args[1]), ") + (uint64_t)((int64_t)(",
                      dc_val(fn, args[3]), ") - 1) * sizeof(", ct, ")) = ",
                      dc_conv(fn, dc_val(fn, args[2]), dc_argtype(fn, args[2]), T), ")")
    end
end
