//! `gantry-liveness`: the liveness service (see the library docs).

fn main() -> std::process::ExitCode {
    eprintln!(
        "gantry-liveness is not built yet: this release has the contracts and the protocol crate only"
    );
    std::process::ExitCode::FAILURE
}
