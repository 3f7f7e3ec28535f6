//! `cargo bench -p gantry-api --bench http` (being written).
fn main() {}
