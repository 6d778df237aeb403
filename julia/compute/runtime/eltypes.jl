# The primitive element types: what the fixed kernels take (random numbers, radix-sort keys,
# linear algebra's element kernels) and what the tests run every kernel family over.
# Compiled element functions (compiler/, element_fns.jl) take any isbits type.

"""
    CuMem.KERNEL_ELTYPES

`(Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Float16, Float32,
Float64)`: the element types of `CuMem.rand` and of the fixed (not compiled) kernels.
"""
const KERNEL_ELTYPES = (Bool, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
                        Float16, Float32, Float64)
const KernelReal = Union{KERNEL_ELTYPES...}
