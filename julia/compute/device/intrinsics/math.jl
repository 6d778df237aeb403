# Device math beyond Base's names (CUDA.jl's src/device/intrinsics/math.jl, libdevice's
# `__nv_*`): Base's functions (sin, exp, fma, isinf, ...) already compile to CUDA's math
# library in kernels (compute/compiler/mathlib.jl); these are CUDA.jl's extra names, plain
# Julia that the kernel compiler translates like any other code. Not exported (call them
# as `CuMem.pow`, as CUDA.jl's `CUDA.pow`).

"""
    CuMem.pow(x, y)

`x` raised to `y` (libdevice's `pow`, `powf`, `powi`) for `Float32`/`Float64` `x` and a
float or integer `y`, as CUDA.jl's `CUDA.pow`: `x^y` in `x`'s precision (a float `y` of
another precision is converted to `x`'s type; an integer `y` is exact for `|y|` below
2^24 in Float32, 2^53 in Float64).
"""
@inline pow(x::T, y::T) where {T<:Union{Float32,Float64}} = x^y
@inline pow(x::T, y::Union{Float32,Float64}) where {T<:Union{Float32,Float64}} = x^T(y)
@inline pow(x::T, y::Union{Int32,Int64}) where {T<:Union{Float32,Float64}} = x^T(y)
