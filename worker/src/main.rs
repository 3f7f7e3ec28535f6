//! `gantry-worker`: the provider agent (see the library docs).

fn main() -> std::process::ExitCode {
    eprintln!(
        "gantry-worker is not built yet: this release has the contracts and the protocol crate only"
    );
    std::process::ExitCode::FAILURE
}
