# Formatted output and assertions (CUDA.jl's output.jl, assertion.jl): @cuprintf (C's
# printf, the device's `printf` on a GPU, whose output appears at the next
# synchronization), @cuprint/@cuprintln (values and string interpolation, the format made
# from the types), @cushow, @cuassert (an AssertionError through the kernel's error
# record, at the next synchronization). On the host device the output goes to Julia's
# `stdout`, each conversion formatted by the C library's snprintf.

# C's default argument promotions (as CUDA.jl's promote_c_argument)
@inline dv_promote_c(x::Union{Int8,Int16,UInt8,UInt16}) = Int32(x)
@inline dv_promote_c(x::Float32) = Float64(x)
@inline dv_promote_c(x::Float16) = Float64(x)
@inline dv_promote_c(x::Bool) = Int32(x)
@inline dv_promote_c(x) = x

# One conversion of a C format on the host: `spec` (e.g. "%5.2f") with argument x.
function host_format1(spec::String, x)
    buf = Vector{UInt8}(undef, 512)
    n = if x isa Float64
        ccall(:snprintf, Cint, (Ptr{UInt8}, Csize_t, Cstring, Float64...), buf, length(buf), spec, x)
    elseif x isa Ptr
        ccall(:snprintf, Cint, (Ptr{UInt8}, Csize_t, Cstring, Ptr{Cvoid}...), buf, length(buf), spec, x)
    elseif x isa Union{Int8,Int16,UInt8,UInt16}      # C's promotion to int
        ccall(:snprintf, Cint, (Ptr{UInt8}, Csize_t, Cstring, Int32...), buf, length(buf), spec, Int32(x))
    elseif x isa Union{Int32,UInt32}
        ccall(:snprintf, Cint, (Ptr{UInt8}, Csize_t, Cstring, Int32...), buf, length(buf), spec, reinterpret(Int32, x))
    elseif x isa Union{Int64,UInt64}
        ccall(:snprintf, Cint, (Ptr{UInt8}, Csize_t, Cstring, Int64...), buf, length(buf), spec, reinterpret(Int64, x))
    else
        throw(ArgumentError("@cuprintf cannot print a $(typeof(x))"))
    end
    return String(buf[1:min(Int(n), length(buf) - 1)])
end

# C's printf on the host: the format's conversions, one argument each.
function host_printf(fmt::String, args...)
    io = IOBuffer()
    k = 0
    i = firstindex(fmt)
    while i <= ncodeunits(fmt)
        c = fmt[i]
        if c == '%' && i < ncodeunits(fmt) && fmt[nextind(fmt, i)] == '%'
            print(io, '%')
            i = nextind(fmt, nextind(fmt, i))
        elseif c == '%'
            m = match(r"^%[-+ #0]*[0-9*]*(\.[0-9*]+)?(hh|h|ll|l|L|z|j|t)?[diouxXeEfFgGaAcsp]", SubString(fmt, i))
            m === nothing && throw(ArgumentError("@cuprintf: a bad conversion in $(repr(fmt))"))
            k += 1
            k <= length(args) || throw(ArgumentError("@cuprintf: more conversions than arguments in $(repr(fmt))"))
            print(io, host_format1(String(m.match), args[k]))
            i += ncodeunits(m.match)
        else
            print(io, c)
            i = nextind(fmt, i)
        end
    end
    print(stdout, String(take!(io)))
    return nothing
end

"""
    CuMem.cuprintf(Val(fmt::Symbol), args::Tuple)

C's `printf(fmt, args...)` from a kernel (used by [`@cuprintf`](@ref)).
"""
@noinline function cuprintf(::Val{fmt}, args::Tuple) where {fmt}
    th = host_thread()
    host_printf(String(fmt), args...)
    host_set_thread!(th)          # printing may have switched tasks
    return nothing
end
dv_register!(cuprintf) do fn, i, ts, args
    fmt = String(ts[1].parameters[1])
    io = IOBuffer()
    print(io, "printf(\"")
    for b in codeunits(fmt)
        if b == UInt8('"') || b == UInt8('\\')
            print(io, '\\', Char(b))
        elseif 0x20 <= b < 0x7f
            print(io, Char(b))
        else
            print(io, "\\", string(b, base = 8, pad = 3))
        end
    end
    print(io, "\"")
    TT = ts[2]
    for k in 1:fieldcount(TT)
        T = fieldtype(TT, k)
        dc_is_ghost(T) && continue
        ct = T === Float64 ? "double" : T <: Ptr ? "void*" : T === Int32 ? "int" : T === UInt32 ? "unsigned" :
             T === Int64 ? "long long" : T === UInt64 ? "unsigned long long" : dc_ct(fn, T)
        print(io, ", (", ct, ")((", dv_arg(fn, args, 2), ").", dc_field_name(k), ")")
    end
    print(io, ")")
    return String(take!(io))
end

"""
    @cuprintf("%Fmt", args...)

Prints a formatted string from a kernel, as C's `printf` (the device's on a GPU; shown
on the host's standard output at the next synchronization). Arguments are passed with C's
default promotions (`Float32` as `double`, small integers as `int`); the format's
conversions must match the types (`%ld` for `Int64`, `%f` for floats). As CUDA.jl.
"""
macro cuprintf(fmt::String, args...)
    return :(cuprintf($(Val(Symbol(fmt))), ($(map(a -> :(dv_promote_c($(esc(a)))), args)...),)))
end

const DV_PRINT_SPECS = Dict{Type,String}(Int16 => "%hd", Int32 => "%d", Int64 => "%ld", UInt16 => "%hu",
                                         UInt32 => "%u", UInt64 => "%lu", Float64 => "%f", Ptr{Cvoid} => "%p")

@generated function dv_cuprint(parts::Tuple)
    fmt = ""
    args = Any[]
    for i in 1:length(parts.parameters)
        T = parts.parameters[i]
        ex = :(parts[$i])
        if T <: Val
            fmt *= replace(string(T.parameters[1]), "%" => "%%")
            continue
        end
        if T === Float32 || T === Float16
            ex, T = :(Float64($ex)), Float64
        elseif T === Bool || T === UInt8
            ex, T = :(Int32($ex)), Int32
        elseif T <: Ptr
            ex, T = :(convert(Ptr{Cvoid}, $ex)), Ptr{Cvoid}
        elseif T === Char || T === Int8    # Cchar prints as a character, as CUDA.jl
            fmt *= "%c"
            push!(args, :(Int32($ex)))
            continue
        end
        haskey(DV_PRINT_SPECS, T) || return :(throw(ArgumentError($("@cuprint cannot print a value of type $T"))))
        fmt *= DV_PRINT_SPECS[T]
        push!(args, ex)
    end
    return quote
        Base.@_inline_meta
        cuprintf($(Val(Symbol(fmt))), ($(args...),))
    end
end

# the parts of @cuprint's arguments: literals as Val(Symbol(text)), the rest as values
function dv_print_parts(parts)
    out = Any[]
    for p in parts
        if p isa String
            push!(out, Val(Symbol(p)))
        elseif Meta.isexpr(p, :string)
            append!(out, dv_print_parts(p.args))
        elseif p isa Char
            push!(out, Val(Symbol(string(p))))
        elseif p isa QuoteNode && p.value isa Symbol      # @cuprint(:name) prints `name`
            push!(out, Val(p.value))
        else
            push!(out, esc(p))
        end
    end
    return out
end

"""
    @cuprint(xs...)
    @cuprintln(xs...)

Prints `xs` from a kernel (string and symbol literals, interpolation `"i = \$i"`, integers
of 16 to 64 bits, floats, `Bool`, `Char` and `Cchar` (`Int8`, as a character), pointers), `@cuprintln` with a newline; built on
[`@cuprintf`](@ref), as CUDA.jl.
"""
macro cuprint(parts...)
    return :(dv_cuprint(($(dv_print_parts(parts)...),)))
end

@doc (@doc @cuprint)
macro cuprintln(parts...)
    return :(dv_cuprint(($(dv_print_parts(parts)...), $(Val(Symbol("\n"))))))
end

"""
    @cushow(ex)

Prints `ex = value` from a kernel and returns the value, as CUDA.jl.
"""
macro cushow(ex)
    v = gensym("v")
    return quote
        local $v = $(esc(ex))
        dv_cuprint(($(Val(Symbol(string(ex) * " = "))), $v, $(Val(Symbol("\n")))))
        $v
    end
end

"""
    CuMem.throw_cuassert(Val(msg::Symbol))

Throws `AssertionError(msg)` (a kernel's failed [`@cuassert`](@ref)).
"""
@noinline throw_cuassert(::Val{msg}) where {msg} = throw(AssertionError(String(msg)))

"""
    @cuassert cond [text]

Throws `AssertionError(text)` from a kernel when `cond` is false (`text` defaults to the
condition's source); it surfaces at the next synchronization, as other exceptions of
kernels. As CUDA.jl (whose kernel then stops; here the other threads go on).
"""
macro cuassert(ex, msgs...)
    msg = isempty(msgs) ? string(ex) : string(msgs[1])
    return :($(esc(ex)) ? nothing : throw_cuassert($(Val(Symbol(msg)))))
end
