# LinearAlgebra.BLAS's level-1 entry points on CuArrays, as CUDA.jl's lib/cublas/linalg.jl
# extends them (`BLAS.asum`, `BLAS.dot`, `BLAS.dotc`, `BLAS.dotu`; `rotate!`, `reflect!`),
# the complex row-vector product `transpose(x) * y` (a number, as Base), and products
# with views of CuArrays as operands (gathered into a CuArray first). On the host
# device each runs Base's BLAS on the same memory (`host_view`), so it gives Base's result
# exactly; on a GPU, one fused broadcast and reduction.

# The vectors these calls take: CuArrays and contiguous views of one (no copy).
const CuBlas1{T} = DenseCuArray{T}

# the host memory behind `x` (host device): the array itself or the same view of it
blas1_host(x::CuArray) = host_view(x)
blas1_host(x::SubArray) = view(host_view(parent(x)), parentindices(x)...)

function check_blas1_lengths(what, x, y)
    check_devices(what, x, y)
    length(x) == length(y) ||
        throw(DimensionMismatch("$what arguments have lengths $(length(x)) and $(length(y))"))
    return nothing
end

"""
    BLAS.asum(x::DenseCuArray{T}) -> real(T)

The sum of `abs(real(xᵢ)) + abs(imag(xᵢ))` over all elements (BLAS's `asum`, which for
complex numbers is not `sum(abs, x)`), for `T` among `Float32`, `Float64`, `ComplexF32`,
`ComplexF64`. As CUDA.jl's `BLAS.asum` (cuBLAS `asum`); a reduction on a GPU.
"""
function LinearAlgebra.BLAS.asum(x::CuBlas1{T}) where {T<:CuBlasFloat}
    check_devices("BLAS.asum", x)
    on_host() && return GC.@preserve x BLAS.asum(blas1_host(x))
    isempty(x) && return zero(real(T))
    return T <: Real ? sum(abs, x) : sum(z -> abs(real(z)) + abs(imag(z)), x)
end

"""
    BLAS.dot(x::DenseCuArray{T}, y::DenseCuArray{T})
    BLAS.dotc(x, y)
    BLAS.dotu(x, y)

`sum(conj(x) .* y)` (`dot`, `dotc`) and `sum(x .* y)` (`dotu`, complex only) of two
arrays of equal length, as CUDA.jl's methods of LinearAlgebra.BLAS's functions (cuBLAS
`dot`/`dotc`/`dotu`): `BLAS.dot` of complex CuArrays is `dotc`, as in CUDA.jl (Base's
`BLAS.dot` takes real types only). `DimensionMismatch` for different lengths.
"""
function LinearAlgebra.BLAS.dot(x::CuBlas1{T}, y::CuBlas1{T}) where {T<:CuBlasFloat}
    T <: Real || return BLAS.dotc(x, y)
    check_blas1_lengths("dot product", x, y)
    on_host() && return GC.@preserve x y BLAS.dot(blas1_host(x), blas1_host(y))
    return dot(x, y)
end
function LinearAlgebra.BLAS.dotc(x::CuBlas1{T}, y::CuBlas1{T}) where {T<:Union{ComplexF32,ComplexF64}}
    check_blas1_lengths("dot product", x, y)
    on_host() && return GC.@preserve x y BLAS.dotc(blas1_host(x), blas1_host(y))
    return dot(x, y)
end
function LinearAlgebra.BLAS.dotu(x::CuBlas1{T}, y::CuBlas1{T}) where {T<:Union{ComplexF32,ComplexF64}}
    check_blas1_lengths("dot product", x, y)
    on_host() && return GC.@preserve x y BLAS.dotu(blas1_host(x), blas1_host(y))
    return unconjugated_dot(x, y)
end

# sum(x .* y) over two arrays of equal length (any shapes)
function unconjugated_dot(x, y)
    T = promote_type(eltype(x), eltype(y))
    isempty(x) && return zero(T)
    p = vec(x) .* vec(y)
    r = sum(p)
    unsafe_free!(p)
    return r
end

"""
    transpose(x::CuVector) * y::CuVector -> number

`sum(x .* y)` for complex vectors (no conjugation; real ones go to `dot`, as Base), a
number as for `Array`s. `DimensionMismatch` for different lengths.
"""
function Base.:*(u::Transpose{<:Complex,<:CuVector}, v::CuVector)
    check_blas1_lengths("*", parent(u), v)
    return unconjugated_dot(parent(u), v)
end
function Base.:*(u::Transpose{<:Real,<:CuVector}, v::CuVector{<:Complex})
    check_blas1_lengths("*", parent(u), v)
    return unconjugated_dot(parent(u), v)
end

# The two differ only in y's new value, so one body serves both (the same kernels: the new
# x into a temporary, y in place, the temporary copied into x).
for (f, name, ynew) in ((:rotate!, "rotate", :(.-conj(s) .* reshape(x, size(y)) .+ c .* y)),
                        (:reflect!, "reflect", :(conj(s) .* reshape(x, size(y)) .- c .* y)))
    @eval function LinearAlgebra.$f(x::CuBlas1{T}, y::CuBlas1{T}, c, s) where {T<:CuBlasFloat}
        check_blas1_lengths($name, x, y)
        if on_host()
            GC.@preserve x y $f(blas1_host(x), blas1_host(y), c, s)
            return x, y
        end
        t = c .* x .+ s .* reshape(y, size(x))
        y .= $ynew
        copyto!(x, t)
        unsafe_free!(t)
        return x, y
    end
end

"""
    rotate!(x::DenseCuArray, y::DenseCuArray, c, s) -> (x, y)
    reflect!(x::DenseCuArray, y::DenseCuArray, c, s) -> (x, y)

Base's plane rotation `(x, y) = (c x + s y, -conj(s) x + c y)` and reflection
`(x, y) = (c x + s y, conj(s) x - c y)`, in place, element by element, for arrays of equal
length (cuBLAS `rot` in CUDA.jl). `DimensionMismatch` otherwise; on the host device
Base's loop on the same memory.
"""
LinearAlgebra.rotate!(x::CuBlas1{T}, y::CuBlas1{T}, c, s) where {T<:CuBlasFloat}

## views as product operands

# A view of a CuArray (any indices: ranges, index arrays, `reshape(1:n, m, k)`) or a
# reshape of one, which cuBLAS cannot read in place; CuArrays, transposes and adjoints
# go straight to the products of products.jl/generic.jl.
const CuViewOperand{T,N} = Union{SubArray{T,N,<:CuArray},Base.ReshapedArray{T,N,<:SubArray{<:Any,<:Any,<:CuArray}}}
const CuDirectOperand = Union{CuVecOrMat,AnyCuMatOperand}

# the operand as a CuArray (a copy of a view: one gather kernel) and whether it is a copy
dense_operand(A::CuViewOperand) = (copy(A), true)
dense_operand(A) = (A, false)

"""
    mul!(C::CuVecOrMat, A, B, α = true, β = false) (views as operands)

Products whose `A` or `B` is a view of a CuArray (e.g. `@view p[reshape(1:n, m, k)]`,
`view(A, :, 2:5)`) or a reshape of one: the view is gathered into a new CuArray (one
kernel) and the product of products.jl/generic.jl runs on it, as CUDA.jl's generic
products accept such views. `A * B` of such operands allocates `C` and calls this.
"""
function LinearAlgebra.mul!(C::CuVecOrMat, A::CuViewOperand{<:Any,2}, B::Union{CuDirectOperand,CuViewOperand},
                            α::Number, β::Number)
    return mul_dense!(C, A, B, α, β)
end
function LinearAlgebra.mul!(C::CuVecOrMat, A::AnyCuMatOperand, B::CuViewOperand, α::Number, β::Number)
    return mul_dense!(C, A, B, α, β)
end
function mul_dense!(C, A, B, α, β)
    a, fa = dense_operand(A)
    b, fb = dense_operand(B)
    try
        return mul!(C, a, b, α, β)
    finally
        fa && unsafe_free!(a)
        fb && unsafe_free!(b)
    end
end
