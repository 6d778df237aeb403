# Element kernels for the linear algebra cuBLAS lacks: zeroing outside a band (triu!,
# tril!), testing a band (istriu, istril) and symmetry (issymmetric, ishermitian), adding to
# the diagonal (A + λI), integer matrix products, the tiled transpose and the symmetric fill.
# Fixed CUDA C templates (julia/cuda/linalg.cuh), instantiated per element size (moves of
# bits) or per element type (arithmetic, comparisons), each a grid-stride loop. On the host device the same operations run in Julia on `host_view`s;
# test/compute/linalg/linalg_kernel_tests.jl runs these kernels compiled by g++ on the CPU.

const LINALG_KERNELS_SOURCE = cuda_source("linalg.cuh")

const LA_THREADS = 256

# kernel name suffixes: bits of a size; arithmetic and comparisons of a type
word_suffix(::Type{T}) where {T} = sizeof(T) in (1, 2, 4, 8, 16) ? "w$(sizeof(T))" :
    throw(ArgumentError("no GPU kernel for $(sizeof(T))-byte elements ($T)"))
function value_suffix(::Type{T}) where {T}
    T <: Union{Bool,Base.BitInteger} && return "w$(sizeof(T))"
    T === Float16 && return "h16"
    T === Float32 && return "f32"
    T === Float64 && return "f64"
    T === ComplexF32 && return "c32"
    T === ComplexF64 && return "c64"
    throw(ArgumentError("no GPU kernel for element type $T (integers, Bool, Float16/32/64, ComplexF32/64)"))
end

# one kernel value of type T as the C kernel takes it (Float16 as its bits, complex as a
# pair, 16 bytes as a word pair)
struct LaPair{T}
    a::T
    b::T
end
kernel_value(x::Union{Bool,Base.BitInteger,Float32,Float64}) = x
kernel_value(x::Float16) = reinterpret(UInt16, x)
kernel_value(x::Complex{T}) where {T<:Union{Float32,Float64}} = LaPair{T}(real(x), imag(x))

function la_launch(name, n, args...)
    n == 0 && return nothing
    k = fixed_kernel(:linalg, LINALG_KERNELS_SOURCE, name)
    blocks = max(1, min(cld(n, LA_THREADS), 65535 * 16))
    launch(k, args...; blocks = blocks, threads = LA_THREADS)
    return nothing
end

"""
    CuMem.adjoint_into!(B::CuMatrix{T}, A::CuMatrix{T}, conj = true) -> B

`B = adjoint(A)` (`transpose(A)` with `conj = false`, or for real `T`), `B` `n × m` for `A`
`m × n` and not sharing memory with it: one kernel of 32×32 tiles through shared memory
(reads and writes coalesced, where the strided copy behind `copy(adjoint(A))` reads with
a stride); `adjoint!`/`transpose!` on the host device. `CuMem.la_adjoint(A)` allocates `B`.
"""
function adjoint_into!(B::CuMatrix{T}, A::CuMatrix{T}, conj::Bool = true) where {T}
    m, n = size(A)
    size(B) == (n, m) || throw(DimensionMismatch("adjoint of a $m×$n matrix into one of size $(size(B))"))
    aliased(B, A) && throw(ArgumentError("adjoint_into!: B must not share memory with A"))
    check_devices("adjoint_into!", A, B)
    activate()
    (m == 0 || n == 0) && return B
    if on_host()
        GC.@preserve A B (conj ? adjoint!(host_view(B), host_view(A)) : transpose!(host_view(B), host_view(A)))
        return B
    end
    name = "la_transpose_" * (T <: Union{ComplexF32,ComplexF64} ? value_suffix(T) : word_suffix(T))
    k = load_kernel(LINALG_KERNELS_SOURCE, name)
    GC.@preserve A B launch(k, CuPtr{UInt8}(devaddr(B)), CuPtr{UInt8}(devaddr(A)), Int64(m), Int64(n), Int64(ld(A)),
                            Int64(ld(B)), Int32(conj); blocks = min(cld(m, 32) * cld(n, 32), 65535), threads = LA_THREADS)
    return B
end
la_adjoint(A::CuMatrix) = adjoint_into!(similar(A, size(A, 2), size(A, 1)), A)

# a flag word on the device, set by a kernel; read back
function la_flag(f)
    flag = CuMem.zeros(Int32, 1)
    GC.@preserve flag f(CuPtr{Int32}(devaddr(flag)))
    r = Array(flag)[1] != 0
    unsafe_free!(flag)
    return r
end

"""
    triu!(A::CuMatrix, k::Integer = 0) -> A
    tril!(A::CuMatrix, k::Integer = 0) -> A

Zero the elements below the `k`th superdiagonal (`triu!`) or above it (`tril!`) in place,
as LinearAlgebra (one kernel moving element bits; Base on the host device). `triu(A, k)`
and `tril(A, k)` copy first. Number element types of 1 to 16 bytes.
"""
LinearAlgebra.triu!(A::CuMatrix, k::Integer = 0) = band!(A, k, true)
LinearAlgebra.tril!(A::CuMatrix, k::Integer = 0) = band!(A, k, false)
LinearAlgebra.triu(A::CuMatrix, k::Integer = 0) = triu!(copy(A), k)
LinearAlgebra.tril(A::CuMatrix, k::Integer = 0) = tril!(copy(A), k)

function band!(A::CuMatrix{T}, k::Integer, upper::Bool) where {T}
    check_devices(upper ? "triu!" : "tril!", A)
    activate()
    m, n = size(A)
    if on_host()
        GC.@preserve A (upper ? triu!(host_view(A), k) : tril!(host_view(A), k))
        return A
    end
    T <: Number || throw(ArgumentError("triu!/tril! of $T elements on a GPU (numbers only)"))
    GC.@preserve A la_launch("la_band_" * word_suffix(T), m * n, CuPtr{UInt8}(devaddr(A)), Int64(m), Int64(n),
                             Int64(ld(A)), Int64(k), Int32(upper))
    return A
end

"""
    istriu(A::CuMatrix, k::Integer = 0) -> Bool
    istril(A::CuMatrix, k::Integer = 0) -> Bool

Whether every element below (`istriu`) or above (`istril`) the `k`th superdiagonal is
zero (`iszero`, so `-0.0` counts), as LinearAlgebra: one kernel and a 4-byte download.
"""
LinearAlgebra.istriu(A::CuMatrix, k::Integer = 0) = isband(A, k, true)
LinearAlgebra.istril(A::CuMatrix, k::Integer = 0) = isband(A, k, false)

function isband(A::CuMatrix{T}, k::Integer, upper::Bool) where {T}
    check_devices(upper ? "istriu" : "istril", A)
    activate()
    m, n = size(A)
    if on_host()
        return GC.@preserve A (upper ? istriu(host_view(A), k) : istril(host_view(A), k))
    end
    (m == 0 || n == 0) && return true
    name = "la_isband_" * value_suffix(T)
    return !GC.@preserve A la_flag(f -> la_launch(name, m * n, CuPtr{UInt8}(devaddr(A)), Int64(m), Int64(n),
                                                  Int64(ld(A)), Int64(k), Int32(upper), f))
end

# (istril(A), istriu(A)) with one download: the two band kernels write two flag words
function triangularity(A::CuMatrix{T}) where {T}
    check_devices("istriu", A)
    activate()
    m, n = size(A)
    if on_host()
        return GC.@preserve A (istril(host_view(A)), istriu(host_view(A)))
    end
    (m == 0 || n == 0) && return (true, true)
    name = "la_isband_" * value_suffix(T)
    flags = CuMem.zeros(Int32, 2)
    GC.@preserve A flags for (i, upper) in ((0, false), (1, true))
        la_launch(name, m * n, CuPtr{UInt8}(devaddr(A)), Int64(m), Int64(n), Int64(ld(A)), Int64(0), Int32(upper),
                  CuPtr{Int32}(devaddr(flags) + 4i))
    end
    f = Array(flags)
    unsafe_free!(flags)
    return f[1] == 0, f[2] == 0
end

"""
    issymmetric(A::CuMatrix) -> Bool
    ishermitian(A::CuMatrix) -> Bool

Whether `A == transpose(A)` (`A == A'`), as LinearAlgebra (`==` on the elements, so NaN
fails): one kernel and a 4-byte download. Non-square matrices are neither.
"""
LinearAlgebra.issymmetric(A::CuMatrix) = issym(A, false)
LinearAlgebra.ishermitian(A::CuMatrix) = issym(A, eltype(A) <: Complex)

function issym(A::CuMatrix{T}, conj::Bool) where {T}
    check_devices("issymmetric", A)
    activate()
    if on_host()
        return GC.@preserve A (conj ? ishermitian(host_view(A)) : issymmetric(host_view(A)))
    end
    m, n = size(A)
    m == n || return false
    n == 0 && return true
    name = "la_issym_" * value_suffix(T)
    return !GC.@preserve A la_flag(f -> la_launch(name, n * n, CuPtr{UInt8}(devaddr(A)), Int64(n), Int64(ld(A)),
                                                  Int32(conj), f))
end

# A[i,i] += λ for i in 1:min(size(A)...), in place (one kernel; Base on the host device)
function diag_add!(A::CuMatrix{T}, λ) where {T}
    activate()
    len = minimum(size(A))
    if on_host()
        GC.@preserve A begin
            H = host_view(A)
            for i in 1:len
                @inbounds H[i, i] += λ
            end
        end
        return A
    end
    GC.@preserve A la_launch("la_diagadd_" * value_suffix(T), len, CuPtr{UInt8}(devaddr(A)), Int64(len),
                             Int64(ld(A) + 1), kernel_value(convert(T, λ)))
    return A
end

# C = A * B for integer element types of one width (one kernel; Base's generic matmul on
# the host device). A, B, C are CuMatrix (the caller materialises transposes).
function int_matmul!(C::CuMatrix{T}, A::CuMatrix{T}, B::CuMatrix{T}) where {T<:Base.BitInteger}
    m, n, k = size(C, 1), size(C, 2), size(A, 2)
    activate()
    if on_host()
        GC.@preserve A B C mul!(host_view(C), host_view(A), host_view(B))
        return C
    end
    GC.@preserve A B C la_launch("la_imatmul_w$(sizeof(T))", m * n, CuPtr{UInt8}(devaddr(A)), CuPtr{UInt8}(devaddr(B)),
                                 CuPtr{UInt8}(devaddr(C)), Int64(m), Int64(n), Int64(k), Int64(ld(A)),
                                 Int64(ld(B)), Int64(ld(C)))
    return C
end

## the symmetric fill: the stored triangle mirrored (la_symfill/la_hermfill of linalg.cuh)


# M's `uplo` triangle copied into the other one (conjugated, with a real diagonal, for a
# complex Hermitian matrix), in place
function sym_fill!(M::CuMatrix{T}, uplo::Char, herm::Bool) where {T}
    n = LinearAlgebra.checksquare(M)
    activate()
    if on_host()
        GC.@preserve M begin
            H = host_view(M)
            copyto!(H, herm ? Matrix(Hermitian(H, Symbol(uplo))) : Matrix(Symmetric(H, Symbol(uplo))))
        end
        return M
    end
    n == 0 && return M
    herm && !(T <: Union{ComplexF32,ComplexF64}) &&
        throw(ArgumentError("Hermitian of $T elements on a GPU (ComplexF32/ComplexF64 or real types)"))
    name = herm ? (T === ComplexF32 ? "la_hermfill_c32" : "la_hermfill_c64") : "la_symfill_" * word_suffix(T)
    k = fixed_kernel(:linalg, LINALG_KERNELS_SOURCE, name)
    GC.@preserve M launch(k, CuPtr{UInt8}(devaddr(M)), Int64(n), Int64(ld(M)), Int32(uplo == 'U');
                          blocks = max(1, min(cld(n * n, LA_THREADS), 65535 * 16)), threads = LA_THREADS)
    return M
end

