Base.include(@__MODULE__, joinpath(@__DIR__, "..", "julia", "CuMem.jl"))  # the module lives in julia/
