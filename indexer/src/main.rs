//! `gantry-indexer`: the chain indexer (see the library docs).

fn main() -> std::process::ExitCode {
    eprintln!(
        "gantry-indexer is not built yet: this release has the contracts and the protocol crate only"
    );
    std::process::ExitCode::FAILURE
}
