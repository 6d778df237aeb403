//! `cumem-bench`: placeholder until the benchmark tool lands.
fn main() {
    eprintln!("cumem-bench: not built yet");
    std::process::exit(2);
}
