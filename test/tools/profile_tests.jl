# Memory profiles (@profile_memory, profile_memory, peak_memory, memory_summary(p),
# memory_events(p), show) and timeline files (save_memory_timeline) under the pool of
# the process (included by pooltests.jl; clean! comes from there).

# A tiny JSON reader, enough to check that the timeline files parse and to read them:
# objects as Dicts, arrays as Vectors, numbers as Float64, null as nothing.
function tiny_json(s::String)
    i = Ref(1)
    peek() = (skip(); i[] <= ncodeunits(s) ? s[i[]] : '\0')
    skip() = while i[] <= ncodeunits(s) && s[i[]] in (' ', '\n', '\r', '\t'); i[] += 1; end
    function expect(c)
        peek() == c || error("JSON: expected $(repr(c)) at byte $(i[]), found $(repr(peek()))")
        i[] += 1
    end
    function str()
        expect('"')
        io = IOBuffer()
        while true
            c = s[i[]]
            i[] = nextind(s, i[])
            c == '"' && break
            if c == '\\'
                e = s[i[]]
                i[] += 1
                if e == 'u'
                    write(io, Char(parse(UInt16, s[i[]:i[]+3]; base = 16)))
                    i[] += 4
                else
                    write(io, Dict('n' => '\n', 't' => '\t', 'r' => '\r', '"' => '"', '\\' => '\\', '/' => '/',
                                   'b' => '\b', 'f' => '\f')[e])
                end
            else
                write(io, c)
            end
        end
        return String(take!(io))
    end
    function value()
        c = peek()
        if c == '{'
            i[] += 1
            d = Dict{String,Any}()
            peek() == '}' && (i[] += 1; return d)
            while true
                k = str()
                expect(':')
                d[k] = value()
                peek() == ',' ? (i[] += 1) : (expect('}'); return d)
            end
        elseif c == '['
            i[] += 1
            v = Any[]
            peek() == ']' && (i[] += 1; return v)
            while true
                push!(v, value())
                peek() == ',' ? (i[] += 1) : (expect(']'); return v)
            end
        elseif c == '"'
            return str()
        elseif startswith(SubString(s, i[]), "null")
            i[] += 4; return nothing
        elseif startswith(SubString(s, i[]), "true")
            i[] += 4; return true
        elseif startswith(SubString(s, i[]), "false")
            i[] += 5; return false
        else
            m = match(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?", s, i[])
            (m === nothing || m.offset != i[]) && error("JSON: bad value at byte $(i[])")
            i[] += ncodeunits(m.match)
            return parse(Float64, m.match)
        end
    end
    v = value()
    skip()
    i[] > ncodeunits(s) || error("JSON: trailing text at byte $(i[])")
    return v
end

# Runs `f` with the garbage collector off, so no finalizer frees inside a window.
function without_gc(f)
    GC.enable(false)
    try
        return f()
    finally
        GC.enable(true)
    end
end

@testset "memory profiles" begin
    @test tiny_json("{\"a\":[1,2.5,null,\"x\\n\\u003c\"],\"b\":{}}") ==
          Dict("a" => Any[1.0, 2.5, nothing, "x\n<"], "b" => Dict{String,Any}())
    clean!()
    @test !CuMem.RECORDING[]
    outside = CuArray{UInt8}(undef, 4096)            # before the window
    p = without_gc() do
        @profile_memory begin
            a = CuArray{UInt8}(undef, 1 << 20)
            b = CuArray{Float32}(undef, 1000)
            unsafe_free!(a)
            unsafe_free!(b)
            42
        end
    end
    @test p isa MemoryProfile
    @test p.value == 42
    @test !CuMem.RECORDING[]                          # the history was off: off again
    ev = memory_events(p)
    allocs = filter(e -> e.kind === :alloc, ev)
    @test [e.requested_bytes for e in allocs] == [1 << 20, 4000]
    @test count(e -> e.kind === :free, ev) == 2
    @test all(e -> e.addr != UInt64(pointer(outside)), ev)   # only the window's events
    @test all(e -> e.size_bytes >= e.requested_bytes, allocs)
    # The peak is what was live before plus what the window had live at once: both
    # blocks (b was allocated before a was freed).
    @test peak_memory(p) == p.before.allocated_bytes + sum(e -> e.size_bytes, allocs)
    @test p.after.allocated_bytes == p.before.allocated_bytes
    @test p.peak_reserved_bytes >= peak_memory(p)
    @test p.peak_requested_bytes == p.before.requested_bytes + (1 << 20) + 4000
    @test !p.truncated
    # show: the short form and the report
    @test sprint(show, p) == "MemoryProfile(2 allocations, peak $(Base.format_bytes(peak_memory(p))))"
    r = sprint(show, MIME"text/plain"(), p)
    @test startswith(r, "MemoryProfile of ")
    @test occursin("2 allocations (", r) && occursin("2 frees", r)
    @test occursin("cache hit rate", r)
    @test occursin("peak allocated $(Base.format_bytes(peak_memory(p)))", r)
    @test occursin("largest allocations:", r)
    # the largest first
    @test occursin(Regex("largest allocations:\\n\\s+$(Base.format_bytes(allocs[1].size_bytes)) × 1 "), r)
    # the summary of the window: its counters, not the process's
    s = sprint(memory_summary, p)
    @test occursin("profile of", s)
    @test occursin(r"Allocations / frees\s+\|\s+2 / 2 \|", s)
    @test occursin("Peak", s)
    # an exception propagates and the history is restored
    @test_throws ErrorException profile_memory(() -> error("boom"))
    @test !CuMem.RECORDING[]
    # with the history on, the window is what comes after the call starts
    record_memory_history(true)
    before = CuArray{UInt8}(undef, 2048)
    p2 = without_gc() do
        @profile_memory (c = CuArray{Int16}(undef, 300); unsafe_free!(c))
    end
    @test CuMem.RECORDING[]                           # left on
    @test [e.requested_bytes for e in memory_events(p2) if e.kind === :alloc] == [600]
    @test any(e -> e.kind === :alloc && e.requested_bytes == 2048, memory_events())   # still in the history
    record_memory_history(false)
    unsafe_free!(before)
    unsafe_free!(outside)
    @test_throws ArgumentError profile_memory(() -> 1; max_entries = 0)
end

@testset "memory timelines" begin
    clean!()
    dir = mktempdir()
    p = without_gc() do
        @profile_memory begin
            xs = [CuArray{Float32}(undef, 1000 * k) for k in 1:6]
            foreach(unsafe_free!, xs[1:2:end])
            ys = [CuArray{UInt8}(undef, 1 << 16) for _ in 1:3]
            foreach(unsafe_free!, ys)
            foreach(unsafe_free!, xs[2:2:end])
        end
    end
    nalloc = count(e -> e.kind === :alloc, memory_events(p))
    @test nalloc == 9
    for (fmt, name) in ((:svg, "t.svg"), (:html, "t.html"), (:json, "t.json"), (:chrome, "t.trace.json"))
        path = joinpath(dir, name)
        @test save_memory_timeline(path, p) == path                 # format from the name
        text = read(path, String)
        @test occursin("CuMem memory timeline: $(CuMem.pool_name()) pool", text)
        if fmt === :svg
            @test startswith(text, "<svg xmlns=\"http://www.w3.org/2000/svg\"")
            @test length(collect(eachmatch(r"<polygon data-a=\"\d+\"", text))) == nalloc   # a band each
            @test occursin("<polyline id=\"allocated\"", text) && occursin("<polyline id=\"reserved\"", text)
        elseif fmt === :html
            @test startswith(text, "<!DOCTYPE html>")
            @test occursin("<svg xmlns", text) && occursin("var ALLOCS = [", text)
            @test occursin("cumem-timeline-loaded", text)
        elseif fmt === :json
            j = tiny_json(text)
            @test j["format"] == "cumem-memory-timeline"
            @test length(j["allocations"]) == nalloc
            @test j["events"] == length(memory_events(p))
            @test j["peak_allocated_bytes"] - j["allocated_start_bytes"] ==
                  maximum(j["series"]["allocated_bytes"]) - j["allocated_start_bytes"]
            @test sort([a["size_bytes"] for a in j["allocations"]]) ==
                  sort([e.size_bytes for e in memory_events(p) if e.kind === :alloc])
        else
            j = tiny_json(text)
            evs = j["traceEvents"]
            @test count(e -> e["ph"] == "b", evs) == nalloc == count(e -> e["ph"] == "e", evs)
            @test count(e -> e["ph"] == "C", evs) == length(memory_events(p))
        end
        # the same with the format given
        other = joinpath(dir, "other.$fmt")
        save_memory_timeline(other, p; format = fmt)
        @test filesize(other) > 0
    end
    # from the whole history
    record_memory_history(true)
    z = CuArray{Float64}(undef, 512)
    unsafe_free!(z)
    record_memory_history(false)
    h = joinpath(dir, "history.json")
    save_memory_timeline(h)
    @test length(tiny_json(read(h, String))["allocations"]) >= 1
    # bad input: nothing written
    @test_throws ArgumentError save_memory_timeline(joinpath(dir, "t.png"), p)
    @test_throws ArgumentError save_memory_timeline(joinpath(dir, "t.svg"), p; format = :png)
    @test_throws CuMemError save_memory_timeline(joinpath(dir, "no-such-dir", "t.svg"), p)
    @test !isfile(joinpath(dir, "t.png"))
end
