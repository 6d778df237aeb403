# In a process writing an image (julia --output-o), only `using CuMem` (its __init__ compiled
# and run), then _exit before Julia compiles and writes the image.
Base.reinit_stdio()
Base.init_depot_path()
Base.init_load_path()
Core.eval(Main, :(using CuMem))
println("INIT_OK"); flush(stdout)
ccall(:_exit, Cvoid, (Cint,), 0)
