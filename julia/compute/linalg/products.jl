# Linear algebra on CuArrays: matrix products through cuBLAS's gemm (the engine's
# `cumem_gemm`, via `gemm!`), with `Adjoint`/`Transpose` operands passed as cuBLAS op
# flags instead of being materialised (CUDA.jl does the same). On the host device the
# same calls run Julia's BLAS on the host memory behind the arrays. `dot`, `norm`,
# `axpy!`, `axpby!`, `rmul!`, `lmul!` are reductions and broadcasts; on the host device
# they run Base/BLAS on that memory.

"""
    CuMem.CuBlasFloat

The element types cuBLAS multiplies: `Float32`, `Float64`, `ComplexF32`, `ComplexF64`.
"""
const CuBlasFloat = Union{Float32,Float64,ComplexF32,ComplexF64}

# A matrix operand cuBLAS reads directly: stored, transposed or adjoint.
const CuMatOperand{T} = Union{CuMatrix{T},Adjoint{T,<:CuMatrix{T}},Transpose{T,<:CuMatrix{T}}}
# The same without the element-type constraint (for the error path).
const AnyCuMatOperand = Union{CuMatrix,Adjoint{<:Any,<:CuMatrix},Transpose{<:Any,<:CuMatrix}}

op_flag(::CuArray) = 'N'
op_flag(::Transpose) = 'T'
op_flag(::Adjoint{T}) where {T} = T <: Real ? 'T' : 'C'
stored(A::CuArray) = A
stored(A::Union{Adjoint,Transpose}) = parent(A)

function aliased(C::CuArray, A)
    a, b = byte_range(strided_operand(C)), byte_range(strided_operand(stored(A)))
    return a[1] <= a[2] && b[1] <= b[2] && a[1] <= b[2] && b[1] <= a[2]
end

"""
    mul!(C, A, B, α=true, β=false) -> C

`C = A*B*α + C*β` for CuArrays of one element type among `Float32`, `Float64`,
`ComplexF32`, `ComplexF64` (cuBLAS's gemm; no TF32, on the device's one stream), where
`A` is a `CuMatrix`, `transpose(::CuMatrix)` or `adjoint(::CuMatrix)` and `B` the same or
a `CuVector` (then `C` is a `CuVector`). Transposes are cuBLAS op flags, not copies.
Small real products (`Float32`/`Float64`, `C` a matrix, `k <= 512`, `m*n*k <= 128^3`) run
as one CuMem kernel instead of cuBLAS, with the same results up to rounding
([`CuMem.small_gemm!`](@ref) switches that off). On the host device: Julia's BLAS on the
same memory. `DimensionMismatch` for incompatible
shapes; `ArgumentError` when `C` shares memory with `A` or `B`, and for other element
types without a GPU product (other element types and mixed ones promote as Base:
[`CuMem.generic_mul!`](@ref)). `A * B` allocates `C` and calls this.
"""
function LinearAlgebra.mul!(C::CuMatrix{T}, A::CuMatOperand{T}, B::CuMatOperand{T},
                            α::Number, β::Number) where {T<:CuBlasFloat}
    return cu_gemm!(C, A, B, α, β)
end
function LinearAlgebra.mul!(C::CuVector{T}, A::CuMatOperand{T}, B::CuVector{T},
                            α::Number, β::Number) where {T<:CuBlasFloat}
    return cu_gemm!(C, A, B, α, β)
end

# Every other CuArray product: julia/compute/linalg/generic.jl (promoting as Base).

@noinline function throw_mul_eltypes(C, A, B)
    throw(ArgumentError("CuArray matrix products run on cuBLAS, which needs one element type " *
                        "among Float32, Float64, ComplexF32, ComplexF64; got C::$(eltype(C)) = " *
                        "A::$(eltype(A)) * B::$(eltype(B)). Convert first, e.g. Float32.(A)"))
end

function cu_gemm!(C, A, B, α, β)
    check_devices("mul!", C, A, B)
    T = eltype(C)
    mA, nA = size(A)
    mB, nB = size(B, 1), size(B, 2)
    mC, nC = size(C, 1), size(C, 2)
    nA == mB || throw(DimensionMismatch("A has dimensions ($mA,$nA) but B has dimensions ($mB,$nB)"))
    (mC == mA && nC == nB) ||
        throw(DimensionMismatch("C has dimensions ($mC,$nC), should have ($mA,$nB)"))
    (aliased(C, A) || aliased(C, B)) &&
        throw(ArgumentError("output matrix must not be aliased with input matrix"))
    (mC == 0 || nC == 0) && return C
    if C isa CuMatrix && B isa CuMatOperand && small_gemm_fits(T, mC, nC, nA)
        return small_gemm!(op_flag(A), op_flag(B), convert(T, α), stored(A), stored(B), convert(T, β), C)
    end
    # (gemm! runs Julia's BLAS on the host device, so CI checks the op-flag mapping too)
    return gemm!(op_flag(A), op_flag(B), convert(T, α), stored(A), stored(B), convert(T, β), C)
end

## small products: one CuMem kernel instead of cuBLAS (julia/cuda/gemm.cuh)

const GEMM_SOURCE = cuda_source("gemm.cuh")
const GEMM_SMALL_OUTS = 32        # gemm.cuh's GEMM_OUTS: outputs of C a block takes at a time
const GEMM_SMALL_THREADS = 256    # gemm.cuh's GEMM_THREADS
const GEMM_SMALL_MAX_K = 512      # k beyond this: cuBLAS (a thread walks k / 8 in a row)
const GEMM_SMALL_MAX_MNK = 2^21   # m*n*k beyond this (128^3): cuBLAS
# -1: not yet read from CUMEM_SMALL_GEMM; 0: off; 1: on
const SMALL_GEMM = Ref{Int}(-1)

"""
    CuMem.small_gemm() -> Bool
    CuMem.small_gemm!(on::Bool) -> Bool

Whether real `Float32`/`Float64` matrix products (`mul!`, `*`) of small shapes run as one
CuMem kernel (julia/cuda/gemm.cuh: a block of 256 threads takes 32 outputs and 8 slices of
`k`) instead of cuBLAS's gemm, whose fixed cost (~7 µs a call on an H100/H200) dominates
there. Small means `1 <= k <= 512` and `m*n*k <= 2^21` (`128^3`) for `C` `m×n`, `op(A)`
`m×k`; transposes and adjoints are read in place and `α`, `β` apply as in BLAS (`β = 0`
does not read `C`). The results agree with cuBLAS's to a gemm's rounding (each slice of
`k` summed in order by fused multiply-adds, then the slices' sums in order; not cuBLAS's
blocking). On by default; `CUMEM_SMALL_GEMM=0` in the environment (read at the first
product) or `small_gemm!(false)` sends every product to cuBLAS. `small_gemm!` returns the
previous setting. The host device always runs Julia's BLAS (the kernel is checked there
compiled by the host's C++ compiler, test/compute/linalg/linalg_kernel_tests.jl).
"""
function small_gemm()
    if SMALL_GEMM[] < 0
        SMALL_GEMM[] = get(ENV, "CUMEM_SMALL_GEMM", "1") in ("0", "false", "no", "off") ? 0 : 1
    end
    return SMALL_GEMM[] == 1
end
function small_gemm!(on::Bool)
    old = small_gemm()
    SMALL_GEMM[] = on ? 1 : 0
    return old
end

small_gemm_fits(::Type{T}, m, n, k) where {T} =
    (T === Float32 || T === Float64) && !on_host() && 1 <= k <= GEMM_SMALL_MAX_K &&
    widemul(widemul(m, n), k) <= GEMM_SMALL_MAX_MNK && small_gemm()

# C = α op(A) op(B) + β C by gemm.cuh's kernel (the caller checked shapes, aliasing and
# small_gemm_fits); one operation of a capture reading A, B, C and writing C
function small_gemm!(tA::Char, tB::Char, α::T, A::CuMatrix{T}, B::CuMatrix{T}, β::T, C::CuMatrix{T}) where {T}
    return captured_op(() -> small_gemm_queue!(tA, tB, α, A, B, β, C), (A, B, C), (C,))
end
function small_gemm_queue!(tA::Char, tB::Char, α::T, A::CuMatrix{T}, B::CuMatrix{T}, β::T, C::CuMatrix{T}) where {T}
    m, n = size(C)
    k = tA == 'N' ? size(A, 2) : size(A, 1)
    kern = fixed_kernel(:gemm, GEMM_SOURCE, T === Float32 ? "cumem_gemm_small_f32" : "cumem_gemm_small_f64")
    groups = cld(m * n, GEMM_SMALL_OUTS)
    GC.@preserve A B C launch(kern, CuPtr{UInt8}(devaddr(C)), CuPtr{UInt8}(devaddr(A)), CuPtr{UInt8}(devaddr(B)),
                              Int32(m), Int32(n), Int32(k), Int32(max(1, size(A, 1))), Int32(max(1, size(B, 1))),
                              Int32(max(1, m)), Int32(tA != 'N'), Int32(tB != 'N'), α, β;
                              blocks = min(groups, 65535), threads = GEMM_SMALL_THREADS)
    return C
end

## BLAS level 1: reductions and in-place updates

# Complex element types have no generated kernels yet (the code generator covers the real
# types): on a GPU, the vector operations below download such operands once, compute with
# Base, and upload an in-place result. Never the scalar path.
needs_host_math(xs...) = any(x -> !is_kernel_eltype(eltype(x)), xs)

function host_inplace!(f!, y::CuArray, xs...)
    Y = Array(y)
    f!(Y, map(Array, xs)...)
    copyto!(y, Y)
    return y
end

"""
    dot(x::CuArray, y::CuArray)

`sum(conj(x) .* y)` over all elements (x and y of equal length, any shapes, as Base).
Float32 and Float64: one reduction kernel over both arrays (its order of summation is not
BLAS's); ComplexF32: one gemm of x' (1×n) and y (n×1); otherwise a fused broadcast and
`sum`. On the host device: Base's `dot` (BLAS) on the same memory.
"""
function LinearAlgebra.dot(x::CuArray, y::CuArray)
    check_devices("dot", x, y)
    length(x) == length(y) ||
        throw(DimensionMismatch("x has length $(length(x)), but y has length $(length(y))"))
    if on_host()
        return GC.@preserve x y dot(host_view(x), host_view(y))
    end
    T = promote_type(eltype(x), eltype(y))
    isempty(x) && return zero(T)
    if !(eltype(x) == eltype(y) && T <: CuBlasFloat) && needs_host_math(x, y)
        return dot(Array(x), Array(y))
    end
    if eltype(x) == eltype(y) && (T === Float32 || T === Float64)
        # one reduction kernel, the result read back once (reduce_full.jl)
        v = fast_full_reduce(*, +, x, y)
        v === nothing || return v
        v = Base.invokelatest(reduce_two, *, +, x, y)
        v === nothing || return v::T
    end
    if eltype(x) == eltype(y) && T <: CuBlasFloat
        n = length(x)
        c = CuArray{T}(undef, 1, 1)
        gemm!(T <: Real ? 'T' : 'C', 'N', one(T), reshape(x, n, 1), reshape(y, n, 1), zero(T), c)
        r = read_scalar(c)
        unsafe_free!(c)
        return r
    end
    return eltype(x) <: Real ? sum(x .* reshape(y, size(x))) : sum(conj.(x) .* reshape(y, size(x)))
end

"""
    norm(x::CuArray, p=2)

The `p`-norm of all elements, as Base: `p = 2` (scaled against overflow and underflow
like Base's), `1`, `Inf`, `-Inf`, `0` (number of non-zeros) and other real `p`. A float
of `x`'s real type. Reductions over the device array; on the host device, Base's `norm`
on the same memory.
"""
function LinearAlgebra.norm(x::CuArray, p::Real = 2)
    if on_host()
        return GC.@preserve x norm(host_view(x), p)
    end
    needs_host_math(x) && return norm(Array(x), p)
    R = float(real(eltype(x)))
    isempty(x) && return zero(R)
    if !(eltype(x) <: AbstractFloat)
        # Base computes integer norms in floating point (no overflow of abs2)
        xf = R.(x)
        r = norm(xf, p)
        unsafe_free!(xf)
        return r
    end
    if p == 2
        s = convert(R, sqrt(sum(abs2, x)))
        # Base rescales when the sum of squares over- or underflows
        if !isfinite(s) || (iszero(s) && !iszero(maximum(abs, x)))
            m = convert(R, maximum(abs, x))
            (iszero(m) || !isfinite(m)) && return m
            s = m * sqrt(convert(R, sum(abs2, x ./ m)))
        end
        return s
    elseif p == 1
        return convert(R, sum(abs, x))
    elseif p == Inf
        return convert(R, maximum(abs, x))
    elseif p == -Inf
        return convert(R, minimum(abs, x))
    elseif p == 0
        return convert(R, count(!iszero, x))
    else
        return convert(R, sum(abs.(x) .^ p)^(1 / p))
    end
end

"""
    axpy!(α, x::CuArray, y::CuArray) -> y

`y .= α .* x .+ y` (x and y of equal length). Host device: BLAS on the same memory.
"""
function LinearAlgebra.axpy!(α::Number, x::CuArray, y::CuArray)
    check_devices("axpy!", x, y)
    length(x) == length(y) ||
        throw(DimensionMismatch("x has length $(length(x)), but y has length $(length(y))"))
    if on_host()
        GC.@preserve x y axpy!(α, host_view(x), host_view(y))
    elseif needs_host_math(x, y) || !(α isa Real)
        host_inplace!((Y, X) -> axpy!(α, X, Y), y, x)
    else
        y .= α .* reshape(x, size(y)) .+ y
    end
    return y
end

"""
    axpby!(α, x::CuArray, β, y::CuArray) -> y

`y .= α .* x .+ β .* y` (x and y of equal length). Host device: BLAS on the same memory.
"""
function LinearAlgebra.axpby!(α::Number, x::CuArray, β::Number, y::CuArray)
    check_devices("axpby!", x, y)
    length(x) == length(y) ||
        throw(DimensionMismatch("x has length $(length(x)), but y has length $(length(y))"))
    if on_host()
        GC.@preserve x y axpby!(α, host_view(x), β, host_view(y))
    elseif needs_host_math(x, y) || !(α isa Real && β isa Real)
        host_inplace!((Y, X) -> axpby!(α, X, β, Y), y, x)
    else
        y .= α .* reshape(x, size(y)) .+ β .* y
    end
    return y
end

"""
    rmul!(x::CuArray, s::Number) -> x
    lmul!(s::Number, x::CuArray) -> x

Scale `x` in place (`x .= x .* s`, `x .= s .* x`).
"""
function LinearAlgebra.rmul!(x::CuArray, s::Number)
    check_devices("rmul!", x)
    if on_host()
        GC.@preserve x rmul!(host_view(x), s)
    elseif needs_host_math(x) || !(s isa Real)
        host_inplace!(X -> rmul!(X, s), x)
    else
        x .= x .* s
    end
    return x
end
function LinearAlgebra.lmul!(s::Number, x::CuArray)
    check_devices("lmul!", x)
    if on_host()
        GC.@preserve x lmul!(s, host_view(x))
    elseif needs_host_math(x) || !(s isa Real)
        host_inplace!(X -> lmul!(s, X), x)
    else
        x .= s .* x
    end
    return x
end
