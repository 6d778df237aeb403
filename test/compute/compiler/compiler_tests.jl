# The typed-IR compiler's cases (compiler_cases.jl) on the current device: on a GPU
# (CUMEM_DEVICE=cuda) the compiled kernels against Base, exceptions included; on the host
# device Base itself (the compiler still runs, and NVRTC checks each kernel when found).
#   CUMEM_DEVICE=cuda julia --project=. test/compute/compiler/compiler_tests.jl
using CuMem, Test
CuMem.allowscalar(false)

function same(r, e)
    r = r isa CuArray ? Array(r) : r
    eltype(r) === eltype(e) || (println("eltype ", eltype(r), " vs ", eltype(e)); return false)
    size(r) == size(e) || return false
    T = eltype(e)
    T <: Union{AbstractFloat,Complex{<:AbstractFloat}} || return isequal(r, e) || (println(r, "\n", e); false)
    h = real(T) === Float16
    ok = all(isapprox.(r, e; rtol = h ? 1e-2 : sqrt(eps(real(T))), atol = h ? 3e-2 : 1e-5, nans = true))
    ok || println(r, "\n", e)
    return ok
end

println("compiler tests on ", CuMem.on_host() ? "the host device (Base)" : "the GPU")
include(joinpath(@__DIR__, "compiler_cases.jl"))

# translation time of a new function (no NVRTC): one new closure type per sample
@testset "translation" begin
    ts = Float64[]
    for k in 1:5
        f = eval(:(v -> v > 0f0 ? v * $(Float32(k)) : sin(v) - $(Float32(k))))
        t = @elapsed Base.invokelatest(CuMem.device_function, f, (Float32,))
        push!(ts, t)
    end
    println("translation of a new function: first ", round(1000ts[1], digits = 1), " ms, then ",
            join(round.(1000 .* ts[2:end], digits = 1), ", "), " ms")
    @test all(isfinite, ts)
end
