//! `gantry-worker`: the provider's agent (see the library docs and the README's provider
//! guide).
//!
//! ```text
//! gantry-worker --config /etc/gantry/worker.toml      # GANTRY_AGENT_KEY or agent_key_file
//! gantry-worker inventory [--sample-secs 10]         # what this machine would register
//! ```

use std::path::PathBuf;
use std::process::{ExitCode, Stdio};

use clap::{Parser, Subcommand};
use gantry_runtime::tasks::Supervisor;
use gantry_worker::config::Config;
use gantry_worker::service::{self, Hooks};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Gantry's provider agent: runs assigned jobs in containers"
)]
struct Cli {
    /// The worker's TOML config file.
    #[arg(long, short, env = "GANTRY_WORKER_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Prints, as JSON, what the worker finds on this machine and would register as the
    /// node's hardware (GPUs through NVML, CPU cores, RAM, free disk), the device request
    /// a job on all its GPUs would get, then `--sample-secs` of GPU telemetry (one line
    /// every half second, as a running job's reports sample it). Needs no config, chain or
    /// Docker.
    Inventory {
        /// The directory whose file system's free space counts.
        #[arg(long, default_value = ".")]
        work_dir: PathBuf,
        #[arg(long, default_value_t = 0)]
        sample_secs: u64,
    },
    /// Internal: started by the worker; when the worker's end of stdin closes (it exited,
    /// even by SIGKILL) unmounts the jobs' disk spaces and removes the node's containers,
    /// so none outlives its worker.
    #[command(hide = true)]
    Reap {
        #[arg(long)]
        docker_socket: PathBuf,
        #[arg(long)]
        node: u64,
        #[arg(long)]
        work_dir: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    match runtime.block_on(async_main(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gantry-worker: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn async_main(cli: Cli) -> anyhow::Result<()> {
    if let Some(Command::Reap {
        docker_socket,
        node,
        work_dir,
    }) = cli.command
    {
        return gantry_worker::docker::reap_when_orphaned(&docker_socket, node, &work_dir).await;
    }
    if let Some(Command::Inventory {
        work_dir,
        sample_secs,
    }) = cli.command
    {
        return gantry_worker::inventory::print(&work_dir, sample_secs).await;
    }
    let Some(path) = cli.config else {
        anyhow::bail!("--config <file> (or GANTRY_WORKER_CONFIG) is required");
    };
    let config = Config::load(&path)?;
    let signer = config.agent_signer(std::env::var("GANTRY_AGENT_KEY").ok().as_deref())?;
    let tasks = Supervisor::new(gantry_runtime::shutdown_on_signal());
    gantry_runtime::install(config.metrics_addr, &tasks)?;
    let shutdown = tasks.shutdown().clone();

    // Once the node is known, a reaper child watches this process.
    let (node_tx, node_rx) = tokio::sync::oneshot::channel();
    let socket = config.docker_socket.clone();
    let work_dir = config.work_dir.clone();
    let reaper = tokio::spawn(async move {
        let node: u64 = node_rx.await.ok()?;
        let exe = std::env::current_exe().ok()?;
        let child = tokio::process::Command::new(exe)
            .args(["reap", "--docker-socket"])
            .arg(&socket)
            .args(["--node", &node.to_string()])
            .arg("--work-dir")
            .arg(&work_dir)
            .stdin(Stdio::piped())
            .spawn();
        match child {
            Ok(child) => Some(child),
            Err(e) => {
                tracing::warn!(error = %e, "no reaper: containers may outlive a crashed worker");
                None
            }
        }
    });
    let hooks = Hooks {
        node_id: Some(node_tx),
        ..Hooks::default()
    };
    tasks.spawn_critical("worker", service::run(config, signer, shutdown, hooks));
    let result = tasks.wait().await;
    // Closing its stdin tells the reaper we are gone (nothing is left after a clean stop).
    if let Ok(Some(mut child)) = reaper.await {
        drop(child.stdin.take());
        let _ = child.wait().await;
    }
    result
}
