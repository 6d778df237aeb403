# Dense linear algebra through cuSOLVER, CuMem side (issue 25): one JSON object per line.
#
#   CUMEM_DEVICE=cuda julia --project=. bench/julia/linalg_bench.jl [--quick] [--sizes 1024,4096] [--reps N]
#
#   {"impl":"cumem","bench":"solve","n":..,"ms":..}   A \ b, A n×n, b n (getrf + getrs)
#   "cholesky"     cholesky(Hermitian(P))            (potrf: the upper factor as the lower one of P')
#   "cholesky_lower" cholesky(Hermitian(P, :L))      (potrf 'L' directly; PyTorch's is always lower)
#   "qr"           F = qr(A); CuMatrix(F.Q), F.R     (geqrf + orgqr: torch.linalg.qr's reduced Q, R)
#   "svd"          svd(A)                            (gesvdj, thin U, S, Vt)
#   "svd_gesvd"    svd(A; alg = QRIteration())       (gesvd)
#   "eigh"         eigen(Symmetric(P))               (syevd with vectors)
#   "geqrf"        CuMem.geqrf!(copy(A), τ)           (qr's factorization alone: torch.geqrf)
#   "orgqr"        CuMem.orgqr!(copy(F.factors), F.τ) (qr's thin Q alone: torch.linalg.householder_product)
#   "qr_factor"    qr(A)                             (copy + geqrf: qr's first part)
#   "qr_q"         CuMatrix(F.Q)                     (copy of the reflectors + orgqr)
#   "qr_r"         F.R                               (the upper triangle copied)
#   "transpose"    CuMem.la_adjoint(A)               (the tiled transpose behind the upper cholesky)
#   "copy"         copy(A)                           (a device copy of the same bytes: the transpose's floor)
# --only a,b (or LINALG_ONLY=a,b) runs those operations only.
# (run operation by operation, the SVDs last; a failure prints {"error": ...} for its line)
#
# Float32, n×n with entries in [0, 1) (P = A'A/n + I for cholesky/eigh). Each figure is the
# median over `reps` calls of the wall time from a synchronize() to one after the call
# (the call includes copying A, as PyTorch's functions leave their input intact); results
# are freed inside the timing. bench/anchors/linalg_anchor.py measures PyTorch the same way.

using CuMem, LinearAlgebra, Random, Printf

const QUICK = "--quick" in ARGS
function option(name, default)
    i = findfirst(==(name), ARGS)
    return i === nothing ? default : ARGS[i+1]
end
const SIZES = parse.(Int, split(option("--sizes", QUICK ? "64" : "1024,4096"), ","))
const REPS = parse(Int, option("--reps", QUICK ? "2" : "5"))
const ONLY = split(option("--only", get(ENV, "LINALG_ONLY", "")), ",", keepempty = false)

free!(x::CuArray) = unsafe_free!(x)
free!(x::Union{Tuple,AbstractVector{<:Any}}) = foreach(free!, x)
free!(F::LU) = free!(F.factors)
free!(F::Cholesky) = free!(F.factors)
free!(F::SVD) = (free!(F.U); F.S isa CuArray && free!(F.S); free!(F.Vt))
free!(F::Eigen) = (free!(F.values); free!(F.vectors))
free!(x) = nothing

# the SVDs of n ≥ 4096 take seconds a call: at most 3 repeats there (the anchor does the same)
reps_for(name, n) = startswith(name, "svd") && n >= 4096 ? min(REPS, 3) : REPS

function timed(f, reps = REPS)
    f() |> free!; CuMem.synchronize()               # warm: compile, handles, pool
    ts = Float64[]
    for _ in 1:reps
        CuMem.synchronize()
        t = @elapsed begin
            r = f()
            CuMem.synchronize()
        end
        push!(ts, t)
        free!(r)
    end
    sort!(ts)
    return 1e3 * ts[cld(length(ts), 2)]
end

Random.seed!(1)
const DATA = Dict{Int,Any}()
for n in SIZES
    Ph = rand(Float32, n, n)
    A = CuArray(rand(Float32, n, n))
    F = qr(A)
    DATA[n] = (A = A, b = CuArray(rand(Float32, n)), P = CuArray(Ph' * Ph ./ n + I),
               τ = CuVector{Float32}(undef, n), F = F)
end
# operation-major, the SVDs last: a fault in one (it poisons the context) spares the others
const BENCHES = (
    "solve" => d -> d.A \ d.b,
    "cholesky" => d -> cholesky(Hermitian(d.P)),
    "cholesky_lower" => d -> cholesky(Hermitian(d.P, :L)),
    "qr" => d -> (F = qr(d.A); (CuMatrix(F.Q), F.R, F.factors, F.τ)),
    "eigh" => d -> eigen(Symmetric(d.P)),
    "svd_gesvd" => d -> svd(d.A; alg = LinearAlgebra.QRIteration()),
    "svd" => d -> svd(d.A),
    "qr_factor" => d -> (F = qr(d.A); (F.factors, F.τ)),
    "qr_q" => d -> CuMatrix(d.F.Q),
    "qr_r" => d -> d.F.R,
    "geqrf" => d -> CuMem.geqrf!(copy(d.A), d.τ)[1],
    "orgqr" => d -> CuMem.orgqr!(copy(d.F.factors), d.F.τ),
    "transpose" => d -> CuMem.la_adjoint(d.A),
    "copy" => d -> copy(d.A),
)
for (name, f) in BENCHES, n in SIZES
    isempty(ONLY) || name in ONLY || continue
    d = DATA[n]
    try
        reps = reps_for(name, n)
        ms = timed(() -> f(d), reps)
        @printf("{\"impl\":\"cumem\",\"bench\":\"%s\",\"n\":%d,\"ms\":%.3f,\"reps\":%d}\n", name, n, ms, reps)
    catch e
        msg = replace(replace(sprint(showerror, e), "\\" => "/"), "\"" => "'")
        @printf("{\"impl\":\"cumem\",\"bench\":\"%s\",\"n\":%d,\"error\":\"%s\"}\n", name, n,
                first(split(msg, '\n')))
    end
    flush(stdout)
end
