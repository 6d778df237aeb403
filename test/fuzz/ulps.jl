# The fuzzer's tolerance for a transcendental function at a result's root: the maximum
# ulp difference from Base documented in docs/compute.md ("Precision" table), per function,
# type and device. `cuda`: CUDA's documented maximum error (CUDA C++ Programming Guide,
# "Mathematical Functions") plus 1 ulp for Julia's own; `emu`: the host C library (glibc,
# which the g++ emulation calls) measured alone by `fuzz.jl --ulps --mode emu`, plus 1;
# `host`: the host device runs Base itself (0).
const ULPS_CUDA = Dict{Tuple{Symbol,DataType},Float64}(
    (:sin, Float32) => 3, (:cos, Float32) => 3, (:exp, Float32) => 3, (:log, Float32) => 2,
    (:sqrt, Float32) => 1, (:tanh, Float32) => 3, (:atan, Float32) => 3, (:cbrt, Float32) => 2,
    (:exp2, Float32) => 3, (:log2, Float32) => 2,
    (:sin, Float64) => 3, (:cos, Float64) => 3, (:exp, Float64) => 2, (:log, Float64) => 2,
    (:sqrt, Float64) => 1, (:tanh, Float64) => 3, (:atan, Float64) => 3, (:cbrt, Float64) => 2,
    (:exp2, Float64) => 2, (:log2, Float64) => 2)
const ULPS_EMU = Dict{Tuple{Symbol,DataType},Float64}(k => 2 for k in keys(ULPS_CUDA))

"""
    ulp_tolerance(fn::Symbol, T, device) -> Float64

Ulps allowed between CuMem's and Base's `fn(x)::T` on `device` ("host", "emu", "cuda").
"""
function ulp_tolerance(fn::Symbol, @nospecialize(T), device::String)
    device == "host" && return 0.0
    return get(device == "emu" ? ULPS_EMU : ULPS_CUDA, (fn, T), 4.0)
end
