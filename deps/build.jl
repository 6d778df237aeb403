# Pkg.build("CuMem"): compiles the Rust engine with `cargo build --release --lib` and
# leaves it where the package looks for it, `target/release/libcumem.so` in the package.
#
# - Skipped when CUMEM_LIBRARY is set (the package then loads that library instead).
# - `cargo` is the first one on PATH, run by that path (see `find_cargo`), else
#   $CARGO_HOME/bin/cargo (default ~/.cargo/bin/cargo).
# - CARGO_TARGET_DIR is honoured: cargo then writes the library there, and it is copied
#   into the package's target/release/.
# - Extra cargo flags can be given in CUMEM_CARGO_FLAGS (e.g. "--offline").

const ROOT = normpath(joinpath(@__DIR__, ".."))
const LIBNAME = "libcumem.so"

exe(name) = Sys.iswindows() ? name * ".exe" : name

# The first `cargo` on PATH, as the path of the PATH entry itself. Never resolve it:
# rustup installs `cargo` as a symlink to the `rustup` binary, which decides what to run
# from the name it was started as (`Sys.which` returns the symlink's target, and running
# that is `rustup build --release`, an error).
function find_cargo()
    for dir in split(get(ENV, "PATH", ""), Sys.iswindows() ? ';' : ':')
        isempty(dir) && continue
        c = joinpath(dir, exe("cargo"))
        isfile(c) && Sys.isexecutable(c) && return c
    end
    home = get(ENV, "CARGO_HOME", joinpath(homedir(), ".cargo"))
    c = joinpath(home, "bin", exe("cargo"))
    return isfile(c) ? c : nothing
end

# Where cargo puts the release build: $CARGO_TARGET_DIR/release (relative to the package
# when relative), else the package's target/release.
function cargo_release_dir()
    t = strip(get(ENV, "CARGO_TARGET_DIR", ""))
    isempty(t) && return joinpath(ROOT, "target", "release")
    return joinpath(isabspath(t) ? String(t) : joinpath(ROOT, t), "release")
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
    cmd = Cmd(`$cargo build --release --lib $flags`, dir = ROOT)
    @info "CuMem: building the engine" cmd
    run(cmd)
    built = joinpath(cargo_release_dir(), LIBNAME)
    isfile(built) || error("CuMem: cargo finished but $built does not exist")
    dest = joinpath(ROOT, "target", "release", LIBNAME)
    if realpath(dirname(built)) != realpath(mkpath(dirname(dest)))
        # Copy, then rename over the old file: a process that has the old one loaded
        # keeps its mapping.
        tmp = dest * ".tmp"
        cp(built, tmp, force = true)
        mv(tmp, dest, force = true)
        @info "CuMem: copied $built to $dest"
    end
    @info "CuMem: built $dest"
end

build()
