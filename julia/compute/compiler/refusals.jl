# Refusals of the typed-IR compiler (issue 23): what cannot run on a GPU is a
# KernelCompileError (compute/kernels.jl) naming the construct, the function and its
# file:line, and the call chain from the kernel's element function. (Julia's exceptions
# thrown BY compiled kernels: memory/kernel_errors.jl.)

# The refusal of a construct: KernelCompileError naming the construct, the function and
# file:line, and the call chain from the kernel's element function.
function dc_refuse(st, msg::AbstractString; line = nothing)
    io = IOBuffer()
    print(io, "cannot compile for the GPU: ", msg)
    if line !== nothing && line[3] != 0
        print(io, "\n  at ", line[1], " (", line[2], ":", line[3], ")")
    end
    if !isempty(st.chain)
        print(io, "\n  call chain: ", join(st.chain, " -> "))
    end
    throw(KernelCompileError(String(take!(io))))
end
