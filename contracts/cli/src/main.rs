//! `gantry`: parse the command line, run the command, turn the outcome into an exit code.

use std::process::ExitCode;

use clap::Parser;
use gantry_cli::config::Cli;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let json = cli.global.json;
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: starting the runtime: {e}");
            return ExitCode::from(gantry_cli::error::exit::ERROR);
        }
    };
    match runtime.block_on(gantry_cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let code = error.exit_code();
            if json {
                eprintln!(
                    "{}",
                    serde_json::json!({ "error": error.to_string(), "exitCode": code })
                );
            } else {
                eprintln!("error: {error}");
            }
            ExitCode::from(code)
        }
    }
}
