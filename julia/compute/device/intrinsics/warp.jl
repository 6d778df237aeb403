# Warp shuffles and votes (CUDA.jl's warp_shuffle.jl, warp_vote.jl) and sync_warp. Any
# isbits value shuffles (split into 32-bit words, as CUDA.jl). On the host device the
# lanes of the mask that exist and have not returned meet at a rendezvous per warp: each
# deposits its value, the last to arrive releases them, each reads its source lane's value.

"""
    FULL_MASK

The mask of all 32 lanes of a warp (`0xffffffff`), for the `*_sync` intrinsics.
"""
const FULL_MASK = 0xffffffff

# The warp rendezvous on the host device: deposits `v`, returns the values of the lanes
# (a vector of 64: the current generation's half) and the base index into it.
function host_warp_meet!(mask::UInt32, @nospecialize(v))
    th = host_thread()
    b = th.block
    w = b.warps[th.linear ÷ 32 + 1]
    lane = th.linear % 32
    g = w.gen
    base = 32 * (g & 1)
    @inbounds w.vals[base+lane+1] = v
    w.arrived |= UInt32(1) << lane
    w.mask = mask
    if (w.arrived & mask & w.live) == (mask & w.live)
        host_warp_release!(w)
    else
        while w.gen == g
            wait(w.cond)
        end
    end
    host_set_thread!(th)
    return w.vals, base, lane
end

# shuffle on the host: mode 0 idx (s 0-based lane), 1 up, 2 down, 3 xor
function host_shfl(mode::Int, mask::UInt32, v::T, s::Int, width::Int) where {T}
    vals, base, lane = host_warp_meet!(mask, v)
    seg = (lane ÷ width) * width
    src = mode == 0 ? seg + mod(s, width) : mode == 1 ? lane - s : mode == 2 ? lane + s : lane ⊻ s
    ok = mode == 0 ? true : mode == 1 ? src >= seg : src < seg + width
    (ok && 0 <= src < 32) || return v
    x = vals[base+src+1]
    return x isa T ? x : v        # a lane that did not take part: the own value
end

"""
    CuMem.shfl_prim(Val(mode), mask::UInt32, val, s::Int, width::Int)

The shuffle of any isbits `val` (mode 0: from lane `s` 0-based, 1: up by `s`, 2: down by
`s`, 3: xor `s`); used by [`shfl_sync`](@ref) and its relatives.
"""
@noinline shfl_prim(::Val{mode}, mask::UInt32, val::T, s::Int, width::Int) where {mode,T} =
    host_shfl(mode, mask, val, s, width)
dv_register!(shfl_prim) do fn, i, ts, args
    T = ts[3]
    dc_is_ghost(T) && return "jl_ghost_t{}"
    mode = ts[1].parameters[1]
    string("jl_shfl<", dc_ct(fn, T), ">(", mode, ", (uint32_t)(", dv_arg(fn, args, 2), "), ", dv_arg(fn, args, 3),
           ", (int32_t)(", dv_arg(fn, args, 4), "), (int32_t)(", dv_arg(fn, args, 5), "))")
end

"""
    shfl_sync(mask::UInt32, val, lane::Integer, width::Integer = 32)

The value `val` of lane `lane` (1-based) of the calling thread's group of `width` lanes,
for the lanes in `mask` (which must all call it), as CUDA.jl (`__shfl_sync`). `val` may be
any isbits value.
"""
@inline shfl_sync(mask, val, lane::Integer, width::Integer = 32) =
    shfl_prim(Val(0), UInt32(mask), val, Int(lane) - 1, Int(width))

"""
    shfl_up_sync(mask::UInt32, val, delta::Integer, width::Integer = 32)

The `val` of the lane `delta` below the caller (its own `val` where that is outside its
group of `width` lanes), as `__shfl_up_sync`.
"""
@inline shfl_up_sync(mask, val, delta::Integer, width::Integer = 32) =
    shfl_prim(Val(1), UInt32(mask), val, Int(delta), Int(width))

"""
    shfl_down_sync(mask::UInt32, val, delta::Integer, width::Integer = 32)

The `val` of the lane `delta` above the caller (its own `val` past the end of its group
of `width` lanes), as `__shfl_down_sync`.
"""
@inline shfl_down_sync(mask, val, delta::Integer, width::Integer = 32) =
    shfl_prim(Val(2), UInt32(mask), val, Int(delta), Int(width))

"""
    shfl_xor_sync(mask::UInt32, val, lanemask::Integer, width::Integer = 32)

The `val` of the lane whose 0-based id is the caller's xor `lanemask`, as
`__shfl_xor_sync` (butterfly reductions).
"""
@inline shfl_xor_sync(mask, val, lanemask::Integer, width::Integer = 32) =
    shfl_prim(Val(3), UInt32(mask), val, Int(lanemask), Int(width))

# votes: 0 all, 1 any, 2 ballot; `active` uses the active lanes (2.x's forms)
function host_vote(kind::Int, mask::UInt32, pred::Bool)
    vals, base, _ = host_warp_meet!(mask, pred)
    ballot = UInt32(0)
    for l in 0:31
        x = vals[base+l+1]
        (mask >> l) & 1 == 1 && x === true && (ballot |= UInt32(1) << l)
    end
    n = 0
    for l in 0:31
        (mask >> l) & 1 == 1 && vals[base+l+1] isa Bool && (n += 1)
    end
    return kind == 2 ? ballot : kind == 0 ? UInt32(count_ones(ballot) == n) : UInt32(ballot != 0)
end

"""
    CuMem.vote_prim(Val(kind), mask::UInt32, pred::Bool) -> UInt32

Warp votes (kind 0: all, 1: any, 2: ballot) over the lanes of `mask`.
"""
@noinline vote_prim(::Val{kind}, mask::UInt32, pred::Bool) where {kind} = host_vote(kind, mask, pred)
dv_register!(vote_prim) do fn, i, ts, args
    kind = ts[1].parameters[1]
    f = kind == 0 ? "__all_sync" : kind == 1 ? "__any_sync" : "__ballot_sync"
    string("((uint32_t)", f, "((uint32_t)(", dv_arg(fn, args, 2), "), (int)(", dv_arg(fn, args, 3), ")))")
end

"""
    vote_all_sync(mask::UInt32, predicate::Bool) -> Bool

Whether `predicate` is true on every lane of `mask` (`__all_sync`).
"""
@inline vote_all_sync(mask, pred) = vote_prim(Val(0), UInt32(mask), Bool(pred)) != 0

"""
    vote_any_sync(mask::UInt32, predicate::Bool) -> Bool

Whether `predicate` is true on any lane of `mask` (`__any_sync`).
"""
@inline vote_any_sync(mask, pred) = vote_prim(Val(1), UInt32(mask), Bool(pred)) != 0

"""
    vote_ballot_sync(mask::UInt32, predicate::Bool) -> UInt32

The lanes of `mask` whose `predicate` is true, one bit each (lane 1 is bit 0;
`__ballot_sync`).
"""
@inline vote_ballot_sync(mask, pred) = vote_prim(Val(2), UInt32(mask), Bool(pred))

"""
    vote_all(predicate::Bool) -> Bool

CUDA.jl 2.x: [`vote_all_sync`](@ref) over every lane of the warp.
"""
@inline vote_all(pred) = vote_all_sync(FULL_MASK, pred)

"""
    vote_any(predicate::Bool) -> Bool

CUDA.jl 2.x: [`vote_any_sync`](@ref) over every lane of the warp.
"""
@inline vote_any(pred) = vote_any_sync(FULL_MASK, pred)

"""
    vote_ballot(predicate::Bool) -> UInt32

CUDA.jl 2.x: [`vote_ballot_sync`](@ref) over every lane of the warp.
"""
@inline vote_ballot(pred) = vote_ballot_sync(FULL_MASK, pred)

"""
    sync_warp(mask::Integer = FULL_MASK)

Waits until every lane of `mask` has reached it, and orders their memory accesses
(`__syncwarp`).
"""
@inline sync_warp(mask::Integer = FULL_MASK) = sync_warp_prim(UInt32(mask))
@noinline sync_warp_prim(mask::UInt32) = (host_warp_meet!(mask, nothing); nothing)
dv_register!((fn, i, ts, args) -> string("__syncwarp((uint32_t)(", dv_arg(fn, args, 1), "))"), sync_warp_prim)
