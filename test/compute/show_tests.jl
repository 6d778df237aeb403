# show/display/print of CuArrays, views and wrappers: the same text as Base prints for
# the host array (the summary line names the device types), downloading rather than
# reading element by element: all under allowscalar(false).
#
#   CUMEM_DEVICE=host julia --project test/compute/show_tests.jl

using CuMem, Test, LinearAlgebra, Random

Random.seed!(13)
CuMem.allowscalar(false)

# text/plain output, without the first (summary) line
body(x) = join(split(sprint(show, MIME"text/plain"(), x; context = :limit => true), '\n')[2:end], '\n')
summary_line(x) = split(sprint(show, MIME"text/plain"(), x), '\n')[1]

@testset "show" begin
    v = rand(Float32, 5)
    A = rand(Float32, 4, 3)
    B = rand(Float32, 4, 4)
    C = rand(ComplexF64, 3, 3)
    dv, dA, dB, dC = CuArray(v), CuArray(A), CuArray(B), CuArray(C)
    cases = Any[
        (dA, A), (dv, v), (dC, C),
        (view(dA, :, 2), view(A, :, 2)), (view(dA, 2:3, [1, 3]), view(A, 2:3, [1, 3])),
        (view(dv, 5:-2:1), view(v, 5:-2:1)),
        (dA', A'), (transpose(dA), transpose(A)), (dC', C'), (dv', v'), (transpose(dv), transpose(v)),
        (PermutedDimsArray(dA, (2, 1)), PermutedDimsArray(A, (2, 1))),
        (reshape(view(dA, :, 1:2), 2, 4), reshape(view(A, :, 1:2), 2, 4)),
        (Diagonal(dv), Diagonal(v)), (cu(Diagonal(v)), Diagonal(v)),
        (Symmetric(dB), Symmetric(B)), (Symmetric(dB, :L), Symmetric(B, :L)),
        (Hermitian(dC), Hermitian(C)),
        (UpperTriangular(dB), UpperTriangular(B)), (LowerTriangular(dB), LowerTriangular(B)),
        (UnitUpperTriangular(dB), UnitUpperTriangular(B)), (UnitLowerTriangular(dB), UnitLowerTriangular(B)),
        (Bidiagonal(dv, dv[1:4], :U), Bidiagonal(v, v[1:4], :U)),
        (Tridiagonal(dv[1:4], dv, dv[2:5]), Tridiagonal(v[1:4], v, v[2:5])),
        (SymTridiagonal(dv, dv[1:4]), SymTridiagonal(v, v[1:4])),
        (UpperTriangular(dB)', UpperTriangular(B)'), (Diagonal(dv)', Diagonal(v)'),
        (UpperTriangular(view(dB, 1:3, 1:3)), UpperTriangular(view(B, 1:3, 1:3))),
        (CuArray{Float32}(undef, 0, 3), Array{Float32}(undef, 0, 3)), (CuArray(fill(7)), fill(7)),
    ]
    for (d, h) in cases
        @test body(d) == body(h)                    # display / the REPL
        @test sprint(show, d) == sprint(show, h)    # show, repr
        @test sprint(print, d) == sprint(print, h)  # print, string
        @test repr(d) == repr(h)
    end
    # display goes through the same path
    buf = IOBuffer()
    display(TextDisplay(buf), Diagonal(dv))
    @test String(take!(buf)) == sprint(show, MIME"text/plain"(), Diagonal(dv))
    # the summary names the device types
    @test occursin("Diagonal{Float32,CuArray{Float32,1}}", summary_line(Diagonal(dv))) ||
          occursin("Diagonal{Float32, CuArray{Float32, 1", summary_line(Diagonal(dv)))
    @test occursin("view(::CuArray{Float32", summary_line(view(dA, 2, :)))
    @test occursin("CuArray{Float32", summary_line(view(dA, :, 2)))    # contiguous: a CuArray
    @test occursin("CuArray", summary_line(dA'))
    # freed arrays say so
    x = CuArray(rand(3)); unsafe_free!(x)
    @test_throws AssertionError sprint(show, MIME"text/plain"(), x)
    @test_throws AssertionError sprint(show, MIME"text/plain"(), x')
end
