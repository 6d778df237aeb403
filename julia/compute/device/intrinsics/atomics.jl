# Atomics (CUDA.jl's src/device/intrinsics/atomics.jl): read-modify-write of one element
# of global or shared memory through its pointer, returning the old value; `@atomic` on
# array elements. In C the native atomics where CUDA has them, else a compare-and-swap loop
# (julia/cuda/device.cuh); on the host device a load and a store (the block's threads run
# one at a time, so no other thread comes in between).

const DV_ATOMIC_INTS = (Int32, Int64, UInt32, UInt64)
const DV_ATOMIC_FLOATS = (Float16, Float32, Float64)

# (name, operation on the host, element types)
const DV_ATOMICS = (
    (:add, (a, b) -> a + b, (DV_ATOMIC_INTS..., DV_ATOMIC_FLOATS...)),
    (:sub, (a, b) -> a - b, (DV_ATOMIC_INTS..., DV_ATOMIC_FLOATS...)),
    (:mul, (a, b) -> a * b, DV_ATOMIC_FLOATS),
    (:div, (a, b) -> a / b, DV_ATOMIC_FLOATS),
    (:and, (a, b) -> a & b, DV_ATOMIC_INTS),
    (:or, (a, b) -> a | b, DV_ATOMIC_INTS),
    (:xor, (a, b) -> a ⊻ b, DV_ATOMIC_INTS),
    (:max, (a, b) -> max(a, b), (DV_ATOMIC_INTS..., DV_ATOMIC_FLOATS...)),
    (:min, (a, b) -> min(a, b), (DV_ATOMIC_INTS..., DV_ATOMIC_FLOATS...)),
    (:xchg, (a, b) -> b, (DV_ATOMIC_INTS..., Float32, Float64)),
    (:inc, (a, b) -> a >= b ? zero(a) : a + one(a), (Int32, UInt32)),
    (:dec, (a, b) -> (a == 0 || a > b) ? b : a - one(a), (Int32, UInt32)),
)

# The C of `atomic_<op>!(p, v)`: `jl_atomic_<op>((T*)p, v)` (Float16: the `h` variant).
function dv_atomic_c(op::Symbol)
    return (fn, i, ts, args) -> begin
        T = ts[2]
        ct = dc_ct(fn, T)
        string("jl_atomic_", op, T === Float16 ? "h" : "", "((", ct, "*)(", dv_arg(fn, args, 1), "), ",
               dv_arg(fn, args, 2), ")")
    end
end

for (op, hostop, types) in DV_ATOMICS
    aname = Symbol(:atomic_, op, :!)
    AU = Union{types...}
    @eval begin
        @noinline function $aname(p::Ptr{T}, v::T) where {T<:$AU}
            host_thread()
            old = unsafe_load(p)
            unsafe_store!(p, $hostop(old, v))
            return old
        end
        dv_register!(dv_atomic_c($(QuoteNode(op))), $aname)
    end
end

"""
    CuMem.atomic_cas!(ptr::Ptr{T}, cmp::T, val::T) -> T

Reads `old = ptr[]`, stores `val` there if `old == cmp` (bitwise), all atomically, and
returns `old`. For `Int32`, `Int64`, `UInt32`, `UInt64`, `Float32`, `Float64` (and
`Float16` on sm_70 and later): CUDA's `atomicCAS`.
"""
@noinline function atomic_cas!(p::Ptr{T}, cmp::T, v::T) where {T<:Union{DV_ATOMIC_INTS...,DV_ATOMIC_FLOATS...}}
    host_thread()
    old = unsafe_load(p)
    old === cmp && unsafe_store!(p, v)
    return old
end
dv_register!(atomic_cas!) do fn, i, ts, args
    string("jl_atomic_cas((", dc_ct(fn, ts[2]), "*)(", dv_arg(fn, args, 1), "), ", dv_arg(fn, args, 2), ", ",
           dv_arg(fn, args, 3), ")")
end

@doc """
    CuMem.atomic_add!(ptr::Ptr{T}, val::T) -> T
    CuMem.atomic_sub!, atomic_mul!, atomic_div!, atomic_and!, atomic_or!, atomic_xor!,
    atomic_max!, atomic_min!, atomic_xchg!, atomic_inc!, atomic_dec!

Atomically reads `old = ptr[]`, stores `old op val` and returns `old`, as CUDA.jl's
functions of the same names (`ptr` is `pointer(A, i)` of a kernel's array, global or
shared). Types: `add`, `sub`, `max`, `min` over `Int32`, `Int64`, `UInt32`, `UInt64`,
`Float32`, `Float64` and `Float16`; `mul`, `div` over the floats; `and`, `or`, `xor` over
the integers; `xchg` over the integers, `Float32` and `Float64`; `inc`
(`old >= val ? 0 : old + 1`) and `dec` (`old == 0 || old > val ? val : old - 1`) over
`Int32` and `UInt32`. Native CUDA atomics where they exist, else a compare-and-swap loop.
Float `max`/`min` follow Julia's (NaN wins).
""" atomic_add!

# the same on CUDA.jl's `Core.LLVMPtr`s (pointer arguments, see cudaconvert)
for f in (:atomic_add!, :atomic_sub!, :atomic_mul!, :atomic_div!, :atomic_and!, :atomic_or!, :atomic_xor!,
          :atomic_max!, :atomic_min!, :atomic_xchg!, :atomic_inc!, :atomic_dec!)
    @eval @inline $f(p::Core.LLVMPtr{T}, v::T) where {T} = $f(reinterpret(Ptr{T}, p), v)
end
@inline atomic_cas!(p::Core.LLVMPtr{T}, cmp::T, v::T) where {T} = atomic_cas!(reinterpret(Ptr{T}, p), cmp, v)

## @atomic

const DV_INPLACE_OPS = Dict(:(+=) => :(+), :(-=) => :(-), :(*=) => :(*), :(/=) => :(/), :(&=) => :(&),
                            :(|=) => :(|), :(⊻=) => :(⊻))

"""
    CuMem.AtomicError(msg)

What [`CuMem.@atomic`](@ref) throws, when it is expanded, for an expression it cannot
make atomic (CUDA.jl's `AtomicError`, with its messages).
"""
struct AtomicError <: Exception
    msg::String
end
Base.showerror(io::IO, err::AtomicError) = print(io, "AtomicError: ", err.msg)

"""
    CuMem.@atomic a[I...] op= val
    CuMem.@atomic a[I...] = op(a[I...], val)

Atomically applies `op` to the element `a[I...]` of a kernel's array and `val` (converted
to the element type), as CUDA.jl's `@atomic`; returns the old value. `+ - * / & | ⊻ max
min` use CUDA's atomics, any other function a compare-and-swap loop. Bounds-checked unless
`@inbounds`. Other expressions throw a [`CuMem.AtomicError`](@ref) when the macro is
expanded (CUDA.jl's messages).
"""
macro atomic(ex)
    if Meta.isexpr(ex, :(=))
        ref, rhs = ex.args[1], ex.args[2]
        Meta.isexpr(rhs, :call) || throw(AtomicError("right-hand side of an @atomic assignment should be a call"))
        (length(rhs.args) == 3 && rhs.args[2] == ref) ||
            throw(AtomicError("right-hand side of a non-inplace @atomic assignment should reference the left-hand side"))
        op, val = rhs.args[1], rhs.args[3]
    elseif ex isa Expr && haskey(DV_INPLACE_OPS, ex.head)
        op, ref, val = DV_INPLACE_OPS[ex.head], ex.args[1], ex.args[2]
    else
        throw(AtomicError("unknown @atomic expression"))
    end
    Meta.isexpr(ref, :ref) || throw(AtomicError("@atomic should be applied to an array reference expression"))
    return :(atomic_arrayset($(esc(ref.args[1])), ($(map(esc, ref.args[2:end])...),), $(esc(op)), $(esc(val))))
end

for (op, impl) in ((+) => atomic_add!, (-) => atomic_sub!, (*) => atomic_mul!, (/) => atomic_div!,
                   (&) => atomic_and!, (|) => atomic_or!, (⊻) => atomic_xor!, max => atomic_max!,
                   min => atomic_min!)
    @eval Base.@propagate_inbounds function atomic_arrayset(A::CuDeviceArray{T}, I::Integer, ::typeof($op), val) where {T}
        @boundscheck checkbounds(A, I)
        return $impl(pointer(A, I), convert(T, val))
    end
end
Base.@propagate_inbounds atomic_arrayset(A::CuDeviceArray, Is::Tuple, op, val) =
    atomic_arrayset(A, Base._to_linear_index(A, Is...), op, val)
Base.@propagate_inbounds function atomic_arrayset(A::CuDeviceArray{T}, I::Integer, op, val) where {T}
    # any other operation: a compare-and-swap loop
    @boundscheck checkbounds(A, I)
    p = pointer(A, I)
    old = unsafe_load(p)
    while true
        new = convert(T, op(old, val))
        cur = atomic_cas!(p, old, new)
        cur === old && return old
        old = cur
    end
end
