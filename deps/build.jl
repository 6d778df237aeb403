# Pkg.build("CuMem"): compiles the Rust engine (target/release/libcumem.so) with cargo.
#
# Skipped when CUMEM_LIBRARY is set (the package then loads that library instead).
# Extra cargo flags can be given in CUMEM_CARGO_FLAGS (e.g. "--offline").

const ROOT = normpath(joinpath(@__DIR__, ".."))

function find_cargo()
    c = Sys.which("cargo")
    c === nothing || return c
    home = get(ENV, "CARGO_HOME", joinpath(homedir(), ".cargo"))
    c = joinpath(home, "bin", Sys.iswindows() ? "cargo.exe" : "cargo")
    return isfile(c) ? c : nothing
end

function build()
    lib = strip(get(ENV, "CUMEM_LIBRARY", ""))
    if !isempty(lib)
        @info "CuMem: CUMEM_LIBRARY is set; not building the engine" lib
        isfile(lib) || @warn "CuMem: CUMEM_LIBRARY points at a file that does not exist" lib
        return
    end
    cargo = find_cargo()
    if cargo === nothing
        error("CuMem: `cargo` was not found (neither on PATH nor in ~/.cargo/bin). The " *
              "engine is a Rust library: install Rust (https://rustup.rs), then run " *
              "`import Pkg; Pkg.build(\"CuMem\")` again, or build it yourself with " *
              "`cargo build --release` in $ROOT, or set CUMEM_LIBRARY to a built libcumem.so.")
    end
    flags = split(get(ENV, "CUMEM_CARGO_FLAGS", ""))
    cmd = Cmd(`$cargo build --release $flags`, dir = ROOT)
    @info "CuMem: building the engine" cmd
    run(cmd)
    libpath = joinpath(ROOT, "target", "release", "libcumem.so")
    isfile(libpath) || error("CuMem: cargo finished but $libpath does not exist")
    @info "CuMem: built $libpath"
end

build()
