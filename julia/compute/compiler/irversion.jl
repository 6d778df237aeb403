# The one place that knows how Julia spells its typed IR in each version. The
# compiler (compute/compiler/*.jl) asks these functions instead of matching IR nodes
# itself, so a new Julia version is a new row here, not a rewrite.
#
# | concept              | 1.5                                  | 1.6 and later                      |
# |----------------------|--------------------------------------|------------------------------------|
# | return x             | Expr(:return, x)                     | Core.ReturnNode(x)                 |
# | unreachable          | Expr(:unreachable)                   | Core.ReturnNode() (no value)       |
# | conditional goto     | Expr(:gotoifnot, cond, dest)         | Core.GotoIfNot(cond, dest)         |
# | argument n           | Core.SlotNumber(n)                   | Core.Argument(n)                   |
# | constant lattice     | Core.Compiler.Const                  | Core.Const                         |
# | typed code of a sig  | typeinf_code(m, sig, sp, true, Params(world)) | typeinf_code(NativeInterpreter(world), m, sig, sp, true) |
# | method of a sig      | _methods_by_ftype -> svec(sig, sp, m) | -> Core.MethodMatch                 |
# | phi edge             | Int (statement index)                | Int32                              |
# | mutable type         | T.mutable                            | ismutabletype(T) (1.7)             |

const IR_HAS_RETURNNODE = isdefined(Core, :ReturnNode)
const IR_CONST = isdefined(Core, :Const) ? Core.Const : Core.Compiler.Const

# `return x`: (true, x); `unreachable` counts as no return here.
@static if IR_HAS_RETURNNODE
    ir_is_return(@nospecialize(st)) = st isa Core.ReturnNode && isdefined(st, :val)
    ir_return_value(@nospecialize(st)) = st.val
    ir_is_unreachable(@nospecialize(st)) = (st isa Core.ReturnNode && !isdefined(st, :val)) ||
                                           (st isa Expr && st.head === :unreachable)
    ir_is_gotoifnot(@nospecialize(st)) = st isa Core.GotoIfNot
    ir_gotoifnot(@nospecialize(st)) = (st.cond, st.dest)
else
    ir_is_return(@nospecialize(st)) = st isa Expr && st.head === :return
    ir_return_value(@nospecialize(st)) = st.args[1]
    ir_is_unreachable(@nospecialize(st)) = st isa Expr && st.head === :unreachable
    ir_is_gotoifnot(@nospecialize(st)) = st isa Expr && st.head === :gotoifnot
    ir_gotoifnot(@nospecialize(st)) = (st.args[1], st.args[2]::Int)
end

# Whether a DataType is mutable (`T.mutable` until 1.6, `ismutabletype` from 1.7).
ir_ismutable(T::DataType) = isdefined(Base, :ismutabletype) ? getfield(Base, :ismutabletype)(T) : T.mutable

# An argument reference: its index (1 = the function itself), or 0 for anything else.
ir_argument_index(@nospecialize(x)) =
    (isdefined(Core, :Argument) && x isa getfield(Core, :Argument)) ? (x.n)::Int :
    x isa Core.SlotNumber ? x.id : x isa Core.TypedSlot ? x.id : 0

# Whether an inferred type is a constant, and its value.
ir_is_const(@nospecialize(t)) = t isa IR_CONST
ir_const_value(@nospecialize(t)) = t.val
ir_widen(@nospecialize(t)) = Core.Compiler.widenconst(t)

# The typed, optimized code of a method specialisation: (CodeInfo, return type), or nothing.
function ir_typed_code(m::Method, @nospecialize(sig), sparams::Core.SimpleVector, world::UInt)
    @static if isdefined(Core.Compiler, :NativeInterpreter)
        interp = Core.Compiler.NativeInterpreter(world)
        r = Core.Compiler.typeinf_code(interp, m, sig, sparams, true)
    else
        r = Core.Compiler.typeinf_code(m, sig, sparams, true, Core.Compiler.Params(world))
    end
    r isa Tuple || return nothing
    ci, rt = r[1], r[2]
    ci === nothing && return nothing
    return (ci::Core.CodeInfo, rt)
end

# The arguments' types of a CodeInfo (from its slot types; 1.6+ keeps them there too).
ir_argtypes(ci::Core.CodeInfo, nargs::Int) = Any[ir_widen(ci.slottypes[i]) for i in 1:nargs]

# (method name, file, line) of statement i (its innermost inlined frame).
function ir_location(ci::Core.CodeInfo, i::Int)
    loc = 0 < i <= length(ci.codelocs) ? ci.codelocs[i] : 0
    (loc == 0 || loc > length(ci.linetable)) && return (Symbol(""), Symbol(""), 0)
    li = ci.linetable[loc]
    m = li.method
    name = m isa Core.MethodInstance ? m.def.name : m isa Method ? m.name : m
    return (Symbol(name), Symbol(li.file), Int(li.line))
end

# The phi node's incoming edges (statement index of the predecessor's last statement) and
# values; an undefined edge has no value.
ir_phi_edges(p::Core.PhiNode) = p.edges
ir_phi_defined(p::Core.PhiNode, k::Int) = isassigned(p.values, k)

# The method a call signature dispatches to in `world` and its static parameters, or nothing.
function ir_method_for(@nospecialize(sig), world::UInt)
    ms = Base._methods_by_ftype(sig, -1, world)
    (ms isa Vector && length(ms) == 1) || return nothing
    m = ms[1]
    @static if isdefined(Core, :MethodMatch)
        return (m.method, m.sparams)
    else
        return (m[3], m[2])
    end
end
