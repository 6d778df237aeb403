# The wrapper sets of array/wrappers.jl (CUDA.jl's names): which arrays count as dense,
# strided and broadcastable in place. Included by pooltests.jl.

@testset "DenseCuArray, StridedCuArray, AnyCuArray" begin
    a = CuArray(reshape(Float32.(1:12), 3, 4))
    @test a isa DenseCuArray{Float32,2} && a isa DenseCuMatrix{Float32}
    @test !(view(a, 1:2, :) isa DenseCuArray)
    # contiguous views are dense: CuArrays at the first element's address, as in CUDA.jl
    b = CuArray(reshape(Int64.(1:60), 5, 4, 3))
    for (I, N, first) in (((:, 1, 2), 1, 21), ((1:4, 1, 2), 1, 21), ((:, 1:4, 3), 2, 41),
                          ((:, :, 1), 2, 1), ((:,), 1, 1), ((3:5,), 1, 3), ((1, 2, 1), 0, 6))
        v = view(b, I...)
        @test v isa DenseCuArray{Int64,N} && v isa CuArray{Int64,N}
        @test pointer(v) == pointer(b, first)
    end
    # a contiguous SubArray made without `view` is dense too
    @test Base.unsafe_view(b, Base.Slice(Base.OneTo(5)), 1, 2) isa DenseCuArray{Int64,1}
    for v in (view(b, 1:3, 1:3, 3), view(b, 1, :, 3), view(b, :, 1:2:4, 1), view(b, 1:2:5, 1, 1))
        @test !(v isa DenseCuArray)
    end
    @test view(reshape(b, 6, 10), :, 1) isa DenseCuVector{Int64}
    # strided: views, transposes, permutations, reshapes of views
    v = view(a, 1:2, 2:3)
    r = reshape(view(a, :, 2:3), 6)
    for x in (a, v, transpose(a), a', PermutedDimsArray(a, (2, 1)), view(transpose(a), 1:2, :), r)
        @test x isa StridedCuArray
    end
    @test r isa StridedCuVector{Float32} && r isa CuVector{Float32}   # a reshape of a contiguous view
    @test !(Array(a) isa StridedCuArray)
    # broadcastable in place: the same wrappers, two levels deep, but not a reshape of a view
    for x in (a, v, transpose(a), a', PermutedDimsArray(a, (2, 1)), view(transpose(a), 1:2, :))
        @test x isa AnyCuArray
    end
    r2 = reshape(view(a, 1:2, 2:3), 4)
    @test !(r2 isa AnyCuArray)
    @test Array(v .+ 1) == Array(a)[1:2, 2:3] .+ 1
    @test Array(copy(r)) == vec(Array(a)[:, 2:3])
    @test Array(copy(r2)) == vec(Array(a)[1:2, 2:3])
    # exported, as in CUDA.jl
    for n in (:DenseCuArray, :StridedCuArray, :AnyCuArray, :DenseCuVector, :StridedCuMatrix)
        @test Base.isexported(CuMem, n)
    end
end
