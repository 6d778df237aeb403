# CuIterator: uploads batches one at a time, freeing the previous one (CUDA.jl 2.x), and
# with `prefetch` stages the next ones on a copy stream while the caller computes.

"""
    CuIterator(batches; prefetch = 1)
    CuIterator(f, batches; prefetch = 1)

Iterates over `batches`, uploading each with `CuMem.adapt(CuArray, batch)` (element types
are kept): an array becomes a CuArray; a tuple, named tuple or vector of arrays has each
array uploaded; other values pass through unchanged. When the iterator advances, and when
it ends, the arrays it uploaded for the previous batch are freed with
[`unsafe_free!`](@ref), so a training loop holds one batch on the device at a time
(plus the `prefetch` batches being uploaded) without waiting for the GC. Keep no
reference to a batch beyond its iteration (copy what you need). CuArrays that were
already in the input are passed through and never freed.

With `prefetch = k ≥ 1` the next `k` batches are staged while the caller works on the
current one: each array is uploaded on a copy stream ([`CuStream`](@ref),
non-blocking, one for all iterators), so the upload overlaps the caller's kernels. The
upload reads a staging host buffer the array is first copied into (page-locked, from the
pinned host pool, `CuMem.pinned`), so it is a DMA that overlaps the caller's work. The
iterator reuses its staging buffers from batch to batch and returns them to the pinned
pool when it ends or is closed (`memory_stats(:host).allocated_bytes` goes back to what
it was; the pool caches them for the next epoch until `reclaim(:host)`). When a batch is taken, the current [`stream()`](@ref) is made to wait for its upload's event
and the arrays are recorded on it ([`record_stream`](@ref)), so their memory is reused
by later uploads only after the work using them is done. `prefetch = 0` uploads each
batch when it is taken, synchronously (CUDA.jl 2.x's `CuIterator`).

Leaving a `for` loop early (`break`, an exception) leaves the current and prefetched
batches allocated until `close(it)` or the GC. The do-block form,
`CuIterator(batches) do it ... end`, calls `f(it)` and closes the iterator however `f`
ends, returning what `f` returns; `close(it)` frees the batches it holds and waits for
its uploads (iterating again starts over).

`length`, `size`, `IteratorSize` and (for arrays, tuples and named tuples of arrays)
`eltype` follow `batches`.
```julia
for (x, y) in CuIterator(zip(xs, ys))   # xs, ys: vectors of host arrays
    loss = ...                          # x, y: CuArrays
end
CuIterator(zip(xs, ys)) do batches      # everything freed when the block ends
    for (x, y) in batches
        loss(x, y) < tol && break
    end
end
```
"""
mutable struct CuIterator{B}
    batches::B
    previous::Any       # the last batch handed out, freed on the next step
    keep::Any           # CuArrays of its input batch (never freed), or nothing
    prefetch::Int
    copy_stream::Union{Nothing,CuStream}
    ahead::Vector{Any}          # staged batches, oldest first: Staged
    state::Any                  # `batches`' iteration state, for staging ahead
    exhausted::Bool
    fence::Union{Nothing,CuEvent}   # recorded on the compute stream at each step
    taken::Vector{Any}          # batches handed out whose uploads may still read `held`
    staging::Vector{Any}        # this iterator's staging buffers: StagingBuffer
    function CuIterator(batches::B; prefetch::Integer = 1) where {B}
        prefetch >= 0 || throw(ArgumentError("prefetch must be 0 or more, got $prefetch"))
        c = new{B}(batches, nothing, nothing, Int(prefetch), nothing, Any[], nothing, false, nothing, Any[], Any[])
        # Uploads in flight read the staging buffers, which the GC may free with the
        # iterator: wait for them first (never throws).
        finalizer(c -> (cs = c.copy_stream; cs === nothing || c_stream_synchronize(cs.handle); nothing), c)
        return c
    end
end

function CuIterator(f::Function, batches; prefetch::Integer = 1)
    it = CuIterator(batches; prefetch = prefetch)
    try
        return f(it)
    finally
        close(it)
    end
end

# The copy stream of all CuIterators on a device, made on first use and kept (as PyTorch
# keeps its streams): its pool then caches the batches' memory from one epoch to the
# next. One per device: a stream belongs to the device it was made on.
const COPY_STREAMS = Dict{Int,CuStream}()
const COPY_STREAM_LOCK = ReentrantLock()

function copy_stream()
    d = task_device()
    lock(COPY_STREAM_LOCK) do
        return get!(CuStream, COPY_STREAMS, d)
    end
end

# A batch uploaded (or being uploaded) on the copy stream.
struct Staged
    batch::Any          # the device batch
    keep::Any           # CuArrays of the input batch
    event::CuEvent      # recorded on the copy stream after its uploads
    held::Vector{Any}   # what the uploads read, alive until they are done
end

# A staging host buffer (pinned: from `CuMem.pinned`) and the upload event of the batch
# that last used it.
mutable struct StagingBuffer
    buf::Array
    pinned::Bool
    event::Union{Nothing,CuEvent}
    busy::Bool
end

# A staging buffer for `dims` elements of `T`: page-locked, from the pinned host pool
# (pinned.jl), so the upload is a DMA that overlaps everything. The one place that
# chooses the kind of host memory (`STAGING_PINNED` says which).
# When the pinned pool is full (CUMEM_PINNED_LIMIT), an ordinary Array: the upload is then
# staged by CUDA's driver, as any pageable copy.
function staging_array(::Type{T}, dims) where {T}
    try
        return StagingBuffer(pinned(T, dims), true, nothing, true)
    catch e
        e isa Union{OutOfGPUMemoryError,CuMemError} || rethrow()
        return StagingBuffer(Array{T}(undef, dims), false, nothing, true)
    end
end
const STAGING_PINNED = true

# Whether batches go through staging buffers: with page-locked ones (the copy then
# overlaps everything), and on the host device (whose copies run later, on the stream's
# thread: staging takes the data when the batch is staged, as a GPU's driver does). On a
# GPU without page-locked buffers the driver stages pageable memory itself, and a
# staging copy of ours would only add a copy: the upload reads the batch directly.
use_staging() = STAGING_PINNED || on_host()

# An iterator keeps at most STAGING_MAX staging buffers (enough for 4 batches of 4 arrays
# in flight) for reuse from batch to batch; one beyond is dropped once its upload is
# done, and so returns to the pinned pool when the GC collects it. The rest go back to
# the pool when the iterator closes; the pool's cache keeps them warm for the next epoch.
const STAGING_MAX = 16

# The adaptor that uploads on the copy stream; `held`: what the uploads read (staging
# buffers, or the batch's own arrays), kept until the event after them; `staging`: the
# iterator's staging buffers.
struct AsyncUpload
    held::Vector{Any}
    staging::Vector{Any}
end

adapt_storage(::AsyncUpload, xs::CuArray) = xs
function adapt_storage(to::AsyncUpload, xs::AbstractArray)
    T = eltype(xs)
    isbits_union(T) && throw_union_eltype(T)
    isbitstype(T) || return map(x -> adapt(to, x), xs)
    if use_staging()
        sb = staging_buffer!(to.staging, T, size(xs))
        push!(to.held, sb)
        src = sb.buf::Array{T}
        copyto!(src, xs)
    else
        src = xs isa Array ? xs : collect(xs)
        push!(to.held, src)
    end
    d = CuArray{T,ndims(xs)}(undef, size(xs))   # on the copy stream: the current one here
    return upload_async!(d, src, stream())
end

# A free staging buffer of this type and shape among `staging` (one whose last upload is
# done), or a new one.
function staging_buffer!(staging::Vector{Any}, ::Type{T}, dims) where {T}
    for sb in staging
        sb = sb::StagingBuffer
        b = sb.buf
        if !sb.busy && eltype(b) === T && size(b) == dims && (sb.event === nothing || isdone(sb.event))
            sb.busy = true
            return sb
        end
    end
    sb = staging_array(T, dims)
    length(staging) < STAGING_MAX && push!(staging, sb)
    return sb
end

# Stages the next batch of `batches`, if any: uploads on the copy stream, then one event.
function stage_next!(c::CuIterator)
    item = c.state === nothing ? iterate(c.batches) : iterate(c.batches, c.state[])
    if item === nothing
        c.exhausted = true
        return nothing
    end
    batch, st = item
    c.state = Ref{Any}(st)
    if c.copy_stream === nothing
        c.copy_stream = copy_stream()
    end
    cs = c.copy_stream::CuStream
    ev = CuEvent(timing = false)
    up = AsyncUpload(Any[], c.staging)
    local cub
    try
        cub = stream!(() -> adapt(up, batch), cs)
    finally
        record(ev, cs)
        for sb in up.held
            sb isa StagingBuffer && (sb.busy = false; sb.event = ev)
        end
    end
    push!(c.ahead, Staged(cub, input_cuarrays(batch), ev, up.held))
    return nothing
end

function Base.iterate(c::CuIterator, state...)
    CAPTURES[] == 0 || refuse_in_capture("a CuIterator upload")
    c.prefetch == 0 && return iterate_now(c, state...)
    isempty(state) && restart!(c)
    free_previous!(c)
    s = stream()
    # The caller may queue work faster than the device runs it: wait until the work it
    # queued two steps ago is done, so at most a few batches are on the device (their
    # frees wait for that work) while the device still has the last step's work to do.
    if c.fence === nothing
        c.fence = CuEvent(timing = false)
    else
        synchronize(c.fence::CuEvent)
    end
    record(c.fence::CuEvent, s)
    isempty(c.ahead) && !c.exhausted && stage_next!(c)
    if isempty(c.ahead)
        close(c)
        return nothing
    end
    item = popfirst!(c.ahead)::Staged
    filter!(t -> !isdone((t::Staged).event), c.taken)
    push!(c.taken, item)    # what its uploads read stays alive until they are done
    wait(item.event, s)                     # the compute stream waits for the upload
    record_arrays(item.batch, item.keep, s)  # and its use defers reuse by the copy stream
    c.previous = item.batch
    c.keep = item.keep
    while length(c.ahead) < c.prefetch && !c.exhausted
        stage_next!(c)
    end
    return item.batch, (isempty(state) ? 1 : state[1] + 1)
end

# prefetch = 0: CUDA.jl 2.x's CuIterator.
function iterate_now(c::CuIterator, state...)
    item = iterate(c.batches, state...)
    free_previous!(c)
    item === nothing && return nothing
    batch, next = item
    cubatch = adapt(CuArray, batch)
    c.previous = cubatch
    c.keep = input_cuarrays(batch)
    return cubatch, next
end

# Starts over: whatever a previous pass left is released first.
function restart!(c::CuIterator)
    close(c)
    c.state = nothing
    c.exhausted = false
    return nothing
end

"""
    close(it::CuIterator)

Frees the batch `it` handed out last and the batches it staged ahead, waits for its
uploads and returns its staging buffers to the pinned host pool. Iterating `it` again
starts over. Called when the iteration ends and by the do-block form
`CuIterator(f, batches)`.
"""
function Base.close(c::CuIterator)
    free_previous!(c)
    for item in c.ahead
        free_batch(item.batch, item.keep)
    end
    empty!(c.ahead)
    cs = c.copy_stream
    if cs !== nothing
        c.copy_stream = nothing
        synchronize(cs)         # the uploads read the staging buffers and batches
    end
    empty!(c.taken)
    for sb in c.staging
        sb = sb::StagingBuffer
        sb.pinned && unsafe_free!(sb.buf)
    end
    empty!(c.staging)
    return nothing
end

# record_stream for every uploaded array of a batch (not those of the input).
record_arrays(x::CuArray, keep, s) = (keep !== nothing && x in keep) ? nothing : record_stream(x, s)
record_arrays(x::Union{Tuple,NamedTuple}, keep, s) = foreach(y -> record_arrays(y, keep, s), x)
function record_arrays(x::AbstractArray, keep, s)
    if !isbitstype(eltype(x)) && x isa Array
        foreach(y -> record_arrays(y, keep, s), x)
    else
        foreach(v -> record_arrays(v, keep, s), array_fields(x))
    end
    return nothing
end
record_arrays(x, keep, s) = nothing

function free_previous!(c::CuIterator)
    prev, keep = c.previous, c.keep
    c.previous = nothing
    c.keep = nothing
    prev === nothing || free_batch(prev, keep)
    return nothing
end

# Frees the CuArrays inside an uploaded batch, except those in `keep`.
free_batch(x::CuArray, keep) = (keep !== nothing && x in keep) ? nothing : unsafe_free!(x)
free_batch(x::Union{Tuple,NamedTuple}, keep) = foreach(y -> free_batch(y, keep), x)
function free_batch(x::AbstractArray, keep)
    if !isbitstype(eltype(x)) && x isa Array
        foreach(y -> free_batch(y, keep), x)
    else    # wrappers: Adjoint, Diagonal, SubArray, Tridiagonal, ... hold their arrays in fields
        foreach(v -> free_batch(v, keep), array_fields(x))
    end
    return nothing
end
free_batch(x, keep) = nothing

# The fields of a (wrapper) array that are arrays themselves.
function array_fields(x)
    T = typeof(x)
    return Any[getfield(x, i) for i in 1:fieldcount(T) if isdefined(x, i) && getfield(x, i) isa AbstractArray]
end

# The CuArrays already present in an input batch (an IdSet), or nothing if none.
function input_cuarrays(batch)
    set = Base.IdSet{Any}()
    collect_cuarrays!(set, batch)
    return isempty(set) ? nothing : set
end
collect_cuarrays!(set, x::CuArray) = push!(set, x)
collect_cuarrays!(set, x::Union{Tuple,NamedTuple}) = foreach(y -> collect_cuarrays!(set, y), x)
function collect_cuarrays!(set, x::AbstractArray)
    if !isbitstype(eltype(x)) && x isa Array
        foreach(y -> collect_cuarrays!(set, y), x)
    else
        foreach(v -> collect_cuarrays!(set, v), array_fields(x))
    end
    return set
end
collect_cuarrays!(set, x) = set

Base.length(c::CuIterator) = length(c.batches)
Base.size(c::CuIterator, dims...) = size(c.batches, dims...)
Base.axes(c::CuIterator, dims...) = axes(c.batches, dims...)
Base.IteratorSize(::Type{CuIterator{B}}) where {B} = Base.IteratorSize(B)
Base.IteratorEltype(::Type{CuIterator{B}}) where {B} = Base.IteratorEltype(B)
Base.eltype(::Type{CuIterator{B}}) where {B} = device_type(eltype(B))

# The type `adapt(CuArray, x)` gives for an `x::T`, or `Any` where that is not simple.
function device_type(T::Type)
    if T <: CuArray
        return T
    elseif T <: Union{Array,AbstractRange}
        return T isa DataType && isbitstype(eltype(T)) ? CuArray{eltype(T),ndims(T)} : Any
    elseif T <: AbstractArray
        return Any
    elseif T <: Tuple
        (T isa DataType && !any(Base.isvarargtype, T.parameters)) || return Any
        return Tuple{map(device_type, T.parameters)...}
    elseif T <: NamedTuple
        (T isa DataType && length(T.parameters) == 2 && T.parameters[2] isa DataType) || return Any
        inner = device_type(T.parameters[2])
        return inner === Any ? Any : NamedTuple{T.parameters[1],inner}
    elseif isconcretetype(T)
        return T
    else
        return Any
    end
end
