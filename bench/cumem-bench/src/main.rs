//! The `cumem-bench` binary: see the library's documentation for the subcommands.

fn main() {
    cumem_bench::main();
}
