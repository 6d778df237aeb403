# Scalar indexing: works, warns once, allowscalar(false) errors, @allowscalar allows.

@testset "scalar indexing" begin
    x = CuArray([10, 20, 30, 40])
    CuMem.SCALAR_WARNED[] = false               # this process may have warned already
    @test_logs (:warn, r"^Performing scalar operations on GPU arrays: This is very slow") x[2]
    @test_logs x[3]                             # only once
    @test x[2] == 20
    x[1] = 11
    @test Array(x) == [11, 20, 30, 40]
    m = CuArray([1 2; 3 4])
    @test m[2, 1] == 3
    m[1, 2] = 5
    @test Array(m) == [1 5; 3 4]
    @test_throws BoundsError x[5]
    @test_throws BoundsError (x[0] = 1)
    @test collect(Iterators.take(x, 2)) == [11, 20]
    z = CuArray(fill(1.5))
    @test z[] == 1.5
    allowscalar(false)
    try
        @test_throws ErrorException x[1]
        @test_throws ErrorException (x[1] = 3)
        err = try x[1]; nothing; catch e; e; end
        @test occursin("scalar getindex is disallowed", sprint(showerror, err))
        @test (@allowscalar x[4]) == 40
        @allowscalar x[4] = 41
        @test (@allowscalar x[4]) == 41
        @test_throws ErrorException x[4]        # the macro only covers its expression
        @test Array(x) == [11, 20, 30, 41]      # bulk operations are never scalar
        # nested and throwing @allowscalar restore the state
        @test_throws DomainError @allowscalar (x[1]; throw(DomainError(1)))
        @test_throws ErrorException x[1]
        @test (@allowscalar (@allowscalar x[1]) + x[2]) == 31
        @test_throws ErrorException x[1]
    finally
        allowscalar(true, false)                # allowed, without the warning (CUDA.jl 2.x's allowscalar(allow, warn))
    end
    @test_logs x[1]
end
