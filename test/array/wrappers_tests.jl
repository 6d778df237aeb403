# The wrapper sets of array/wrappers.jl (CUDA.jl's names): which arrays count as dense,
# strided and broadcastable in place. Included by pooltests.jl.

@testset "DenseCuArray, StridedCuArray, AnyCuArray" begin
    a = CuArray(reshape(Float32.(1:12), 3, 4))
    @test DenseCuArray === CuArray
    @test a isa DenseCuArray{Float32,2} && a isa DenseCuMatrix{Float32}
    @test !(view(a, 1:2, :) isa DenseCuArray)
    # strided: views, transposes, permutations, reshapes of views
    v = view(a, 1:2, 2:3)
    r = reshape(view(a, :, 2:3), 6)
    for x in (a, v, transpose(a), a', PermutedDimsArray(a, (2, 1)), view(transpose(a), 1:2, :), r)
        @test x isa StridedCuArray
    end
    @test r isa StridedCuVector{Float32}
    @test !(Array(a) isa StridedCuArray)
    # broadcastable in place: the same wrappers, two levels deep, but not a reshape of a view
    for x in (a, v, transpose(a), a', PermutedDimsArray(a, (2, 1)), view(transpose(a), 1:2, :))
        @test x isa AnyCuArray
    end
    @test !(r isa AnyCuArray)
    @test Array(v .+ 1) == Array(a)[1:2, 2:3] .+ 1
    @test Array(copy(r)) == vec(Array(a)[:, 2:3])
    # exported, as in CUDA.jl
    for n in (:DenseCuArray, :StridedCuArray, :AnyCuArray, :DenseCuVector, :StridedCuMatrix)
        @test Base.isexported(CuMem, n)
    end
end
