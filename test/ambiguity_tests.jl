# No method CuMem adds to Base or LinearAlgebra functions is ambiguous.

@testset "method ambiguities" begin
    ours(m::Method) = m.module === CuMem
    amb = Test.detect_ambiguities(CuMem, Base, LinearAlgebra, Random, Statistics; recursive = false)
    mine = filter(p -> ours(p[1]) || ours(p[2]), amb)
    for (m1, m2) in mine
        @info "ambiguous" m1 m2
    end
    @test isempty(mine)
end
