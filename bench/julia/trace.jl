# Allocation traces (format: data/README.md) replayed through
# CuArrays: `CuArray{UInt8}(undef, n)` for each allocation, `unsafe_free!` for each free.
# Shared by bench/julia/replay_demo.jl and bench/julia/julia_bench.jl.

struct Trace
    name::String
    alloc::Vector{Bool}        # event i allocates (true) or frees (false) ...
    id::Vector{Int32}          # ... block id[i] (0-based in the file)
    bytes::Vector{Int}         # size of the allocation (0 for frees)
    nblocks::Int
    peak_live::Int             # the most bytes live at once
    events_at_peak::Int
end

function read_trace(path)
    alloc, id, bytes = Bool[], Int32[], Int[]
    sizes = Dict{Int32,Int}()
    live = peak = at_peak = 0
    nblocks = 0
    for line in eachline(path)
        (isempty(line) || startswith(line, '#')) && continue
        f = split(line)
        i = parse(Int32, f[2])
        if f[1] == "a"
            n = parse(Int, f[3])
            push!(alloc, true); push!(id, i); push!(bytes, n)
            sizes[i] = n
            live += n
            nblocks = max(nblocks, i + 1)
            if live > peak
                peak, at_peak = live, length(alloc)
            end
        elseif f[1] == "f"
            push!(alloc, false); push!(id, i); push!(bytes, 0)
            live -= pop!(sizes, i)
        else
            error("$path: bad line $(repr(line))")
        end
    end
    name = replace(basename(path), r"\.trace$" => "")
    return Trace(name, alloc, id, bytes, nblocks, peak, at_peak)
end

const Slot = Union{Nothing,CuVector{UInt8}}

# Plays the events; blocks alive at the end stay in `live` (freed after measuring).
function replay!(live::Vector{Slot}, tr::Trace)
    alloc, id, bytes = tr.alloc, tr.id, tr.bytes
    @inbounds for i in eachindex(alloc)
        k = id[i] + 1
        if alloc[i]
            live[k] = CuArray{UInt8}(undef, bytes[i])
        else
            x = live[k]
            x === nothing || unsafe_free!(x)
            live[k] = nothing
        end
    end
    return live
end

function free_all!(live::Vector{Slot})
    for (k, x) in enumerate(live)
        x === nothing || unsafe_free!(x)
        live[k] = nothing
    end
end

