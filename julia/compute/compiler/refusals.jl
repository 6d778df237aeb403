# Refusals of the typed-IR compiler: what cannot run on a GPU is a
# KernelCompileError naming the construct, the function and its file:line, and the call
# chain from the kernel's element function. NVRTC's rejections of generated C use the same
# type (compute/runtime/kernels.jl). (Julia's exceptions thrown BY compiled kernels:
# memory/kernel_errors.jl.)

"""
    KernelCompileError(msg)

A function cannot become a GPU kernel: the typed-IR compiler refused a construct (`msg`
names it, the function and its file:line, and the call chain: dynamic dispatch,
non-constant globals, allocation, non-isbits values, recursion, try/catch, `rand()`,
`ccall`, ...), or NVRTC rejected the generated CUDA C (`msg` holds NVRTC's log followed
by the source with line numbers).
"""
struct KernelCompileError <: Exception
    msg::String
end

Base.showerror(io::IO, e::KernelCompileError) = print(io, "KernelCompileError: ", e.msg)

# The refusal of a construct: KernelCompileError naming the construct, the function and
# file:line, and the call chain from the kernel's element function.
function dc_refuse(st, msg::AbstractString; line = nothing)
    io = IOBuffer()
    print(io, "cannot compile for the GPU: ", msg)
    if line !== nothing && line[3] != 0
        print(io, "\n  at ", line[1], " (", line[2], ":", line[3], ")")
    end
    if !isempty(st.chain)
        chain = String[]
        for c in st.chain
            (isempty(chain) || chain[end] != c) && push!(chain, c)
        end
        print(io, "\n  call chain: ", join(chain, " -> "))
    end
    throw(KernelCompileError(String(take!(io))))
end
