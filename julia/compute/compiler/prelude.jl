# The fixed C that every kernel built on the typed-IR compiler starts with:
# integer typedefs (NVRTC has no <stdint.h>), Float16 as bits with the hardware
# conversions, the error record a throwing kernel fills, and the helpers that give C
# Julia's semantics for intrinsics (shifts, `===`, `isequal`/`isless` on floats). The C is
# julia/cuda/prelude.cuh (which includes common.cuh, the helpers of every fixed kernel).

"""
    CuMem.C_PRELUDE_V2 :: String

The C every kernel using compiled element functions ([`device_function`](@ref)) starts
with (put in by [`kernel_source`](@ref)): fixed-width integer typedefs, `half_t` (the bits
of a Float16) with round-to-nearest conversions `jl_h2f`/`jl_f2h`/`jl_d2h`, `jl_ghost_t`
(zero-size values), `jl_err_t` (the error record: a flag, the throw site's number, a lock,
the element number of the throw, then its values, as many bytes as the largest site's) and the helpers for Julia's intrinsics. The launch context type
`jl_ctx_t` is declared here and defined by `kernel_source`.
"""
const C_PRELUDE_V2 = cuda_source("prelude.cuh")
