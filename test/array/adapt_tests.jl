# cu and CuMem.adapt.

@testset "cu" begin
    x = cu([1.0, 2.0])
    @test x isa CuVector{Float32} && Array(x) == Float32[1, 2]
    # CUDA.jl v2.6: floating-point arrays become Float32, Float16 and other types are kept
    @test cu(Float16[1, 2]) isa CuVector{Float16}
    @test cu([1, 2]) isa CuVector{Int}
    @test Array(cu([1, 2])) == [1, 2]
    @test cu([true, false]) isa CuVector{Bool}
    @test cu(BigFloat[1]) isa CuVector{Float32}
    @test cu(ComplexF64[1 + 2im]) isa CuVector{ComplexF32}
    @test cu(rand(2, 3)) isa CuMatrix{Float32}
    @test cu(x) === x                                  # already on the device: no copy
    @test cu(CuArray([1.0])) isa CuVector{Float32}
    @test cu(1.0) === 1.0                              # scalars pass through
    @test cu("label") == "label"
    # wrappers are kept
    d = cu(Diagonal([1.0, 2.0]))
    @test d isa Diagonal{Float32,<:CuArray{Float32,1}}
    @test Array(d.diag) == Float32[1, 2]
    @test cu(Diagonal([1, 2])) isa Diagonal{Int,<:CuArray{Int,1}}
    a = cu(adjoint([1.0 2.0; 3.0 4.0]))
    @test a isa Adjoint{Float32,<:CuArray{Float32,2}}
    @test Array(parent(a)) == Float32[1 2; 3 4]
    t = cu(transpose([1.0, 2.0]))
    @test t isa Transpose{Float32,<:CuArray{Float32,1}}
    @test cu(UpperTriangular(rand(2, 2))) isa UpperTriangular{Float32,<:CuMatrix{Float32}}
    @test cu(LowerTriangular(rand(2, 2))) isa LowerTriangular{Float32,<:CuMatrix{Float32}}
    @test cu(Symmetric(rand(2, 2), :L)).uplo == 'L'
    @test cu(Hermitian(rand(ComplexF64, 2, 2))) isa Hermitian{ComplexF32,<:CuMatrix{ComplexF32}}
    @test cu(Bidiagonal([1.0, 2.0], [3.0], :U)) isa Bidiagonal{Float32,<:CuVector{Float32}}
    @test cu(Tridiagonal([1.0], [2.0, 3.0], [4.0])) isa Tridiagonal{Float32,<:CuVector{Float32}}
    @test cu(SymTridiagonal([1.0, 2.0], [3.0])) isa SymTridiagonal{Float32,<:CuVector{Float32}}
    v = cu(view(rand(4, 4), :, 2))
    @test v isa SubArray{Float32,1,<:CuMatrix{Float32}}
    p = cu(PermutedDimsArray(rand(2, 3), (2, 1)))
    @test p isa PermutedDimsArray{Float32,2,(2, 1),(2, 1),<:CuMatrix{Float32}}
    r = cu(reshape(view(rand(6), 1:6), 2, 3))
    @test r isa Base.ReshapedArray{Float32,2,<:SubArray{Float32,1,<:CuVector{Float32}}}
    # containers
    tup = cu(([1.0], [1], 3, "s"))
    @test tup isa Tuple{CuVector{Float32},CuVector{Int},Int,String}
    nt = cu((a = [1.0, 2.0], b = (c = [1f0],), n = 2))
    @test nt.a isa CuVector{Float32} && nt.b.c isa CuVector{Float32} && nt.n === 2
    vv = cu([[1.0], [2.0, 3.0]])
    @test vv isa Vector{<:CuVector{Float32}}
end

@testset "adapt" begin
    x = CuMem.adapt(CuArray, [1.0, 2.0])
    @test x isa CuVector{Float64}                       # CuArray keeps the element type
    @test CuMem.adapt(CuArray, x) === x
    @test CuMem.adapt(CuArray{Float32}, [1.0]) isa CuVector{Float32}
    @test CuMem.adapt(Array, x) isa Vector{Float64} && CuMem.adapt(Array, x) == [1.0, 2.0]
    h = CuMem.adapt(Array, (Diagonal(x), adjoint(x)))
    @test h[1] isa Diagonal{Float64,Vector{Float64}}
    @test h[2] isa Adjoint{Float64,Vector{Float64}}
    @test CuMem.adapt(Array, [1, 2]) == [1, 2]
    @test CuMem.adapt(CuArray, :sym) === :sym
    # extending it for a wrapper of one's own
    @eval struct MyWrap{A}
        data::A
    end
    @eval CuMem.adapt_structure(to, w::MyWrap) = MyWrap(CuMem.adapt(to, w.data))
    w = cu(MyWrap([1.0, 2.0]))
    @test w isa MyWrap{<:CuVector{Float32}}
end
