# The C functions of stream capture, CUDA graphs and graph-private pools
# (src/ffi/graphs.rs): the calls that make something act on the task's device (A, as in
# libcumem.jl); those taking a graph, executable or pool handle find its device (they run
# in finalizers).

c_graph_pool_create(out::Base.RefValue{UInt64}) =
    (activate(); ccall((:cumem_graph_pool_create, libcumem), Int32, (Ptr{UInt64},), out))
c_graph_pool_release(p::UInt64) = ccall((:cumem_graph_pool_release, libcumem), Int32, (UInt64,), p)
c_stream_begin_capture(s::UInt64, pool::UInt64, out::Base.RefValue{UInt64}) =
    (activate(); ccall((:cumem_stream_begin_capture, libcumem), Int32, (UInt64, UInt64, Ptr{UInt64}), s, pool, out))
c_stream_end_capture(s::UInt64, out::Base.RefValue{UInt64}) =
    (activate(); ccall((:cumem_stream_end_capture, libcumem), Int32, (UInt64, Ptr{UInt64}), s, out))
c_graph_instantiate(g::UInt64, out::Base.RefValue{UInt64}) =
    (activate(); ccall((:cumem_graph_instantiate, libcumem), Int32, (UInt64, Ptr{UInt64}), g, out))
c_graph_launch_async(e::UInt64, s::UInt64) =
    (activate(); ccall((:cumem_graph_launch_async, libcumem), Int32, (UInt64, UInt64), e, s))
c_graph_exec_update(e::UInt64, g::UInt64) =
    (activate(); ccall((:cumem_graph_exec_update, libcumem), Int32, (UInt64, UInt64), e, g))
c_graph_destroy(g::UInt64) = ccall((:cumem_graph_destroy, libcumem), Int32, (UInt64,), g)
c_graph_exec_destroy(e::UInt64) = ccall((:cumem_graph_exec_destroy, libcumem), Int32, (UInt64,), e)
c_graph_pools(out::Vector{CGraphPool}, count::Base.RefValue{UInt64}) =
    (activate(); ccall((:cumem_graph_pools, libcumem), Int32, (Ptr{CGraphPool}, UInt64, Ptr{UInt64}),
                       out, UInt64(length(out)), count))
c_capture_dependencies(s::UInt64, out::Vector{UInt64}, count::Base.RefValue{UInt64}) =
    (activate(); ccall((:cumem_stream_capture_dependencies, libcumem), Int32, (UInt64, Ptr{UInt64}, UInt64, Ptr{UInt64}),
                       s, out, UInt64(length(out)), count))
c_capture_set_dependencies(s::UInt64, nodes::Vector{UInt64}) =
    (activate(); ccall((:cumem_stream_set_capture_dependencies, libcumem), Int32, (UInt64, Ptr{UInt64}, UInt64),
                       s, nodes, UInt64(length(nodes))))
c_graph_info(g::UInt64, out::Base.RefValue{CGraphInfo}) =
    ccall((:cumem_graph_info, libcumem), Int32, (UInt64, Ptr{CGraphInfo}), g, out)
# programmatic dependent launch (src/ffi/compute.rs): process-wide, and a kernel handle
c_set_pdl(on::Int32, was::Base.RefValue{Int32}) = ccall((:cumem_set_pdl, libcumem), Int32, (Int32, Ptr{Int32}), on, was)
c_kernel_uses_pdl(k::UInt64, out::Base.RefValue{Int32}) =
    ccall((:cumem_kernel_uses_pdl, libcumem), Int32, (UInt64, Ptr{Int32}), k, out)
