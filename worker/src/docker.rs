//! Running a job's container through the Docker API (bollard). [`crate::sandbox`] says
//! how the container is built, as a pure function of the [`RunPlan`]; [`Executor`] is the
//! IO: image present or pulled, create, attach, start, wait with a wall-clock limit, and
//! remove, always.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error as DockerError;
use bollard::query_parameters::{
    AttachContainerOptions, CreateContainerOptions, CreateImageOptions, KillContainerOptions,
    ListContainersOptions, RemoveContainerOptions, WaitContainerOptions,
};
use futures::StreamExt;
use gantry_protocol::jobs::LogStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::fault::Failure;
pub use crate::sandbox::{NOBODY, RunPlan, container_body, run_as};

/// Label on every container the worker creates: the node it ran for.
pub const NODE_LABEL: &str = "io.gantry.node";
/// Label with the job id.
pub const JOB_LABEL: &str = "io.gantry.job";
/// Longest log line forwarded, bytes; longer lines are cut.
pub const MAX_LINE: usize = 16 * 1024;

/// When a run is ended: killed after `timeout`, or when `stop` fires — then with SIGTERM
/// first and `grace()`, asked at that moment, to exit.
#[derive(Debug)]
pub struct Ending<G> {
    pub timeout: Duration,
    pub stop: CancellationToken,
    pub grace: G,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    pub exit_code: i64,
    pub oom_killed: bool,
    pub timed_out: bool,
    /// Stopped because the worker was told to (shutdown, job taken away).
    pub stopped: bool,
    /// Killed for printing more than this many bytes (its plan's `max_log_bytes`).
    pub flooded: Option<u64>,
    pub elapsed: Duration,
    /// Why it ended otherwise, as the engine tells it (a WASM trap, fuel run out).
    pub reason: Option<String>,
}

impl RunOutcome {
    /// The job-fault reason, when the run failed.
    pub fn failure(&self, memory_bytes: i64, timeout: Duration) -> Option<Failure> {
        if self.oom_killed {
            return Some(Failure::job(format!(
                "out of memory: killed at the {} MiB limit",
                memory_bytes >> 20
            )));
        }
        if self.timed_out {
            return Some(Failure::job(format!(
                "timeout: still running after {} s",
                timeout.as_secs()
            )));
        }
        if let Some(limit) = self.flooded {
            return Some(Failure::job(format!(
                "log limit: killed for printing more than {} MiB on stdout and stderr",
                limit >> 20
            )));
        }
        if let Some(reason) = &self.reason {
            return Some(Failure::job(reason.clone()));
        }
        match self.exit_code {
            0 => None,
            // 137 = SIGKILL, and the worker did not send it (not timed out, not stopped):
            // the kernel's OOM killer, almost always. The engine's `OOMKilled` comes from
            // an event that can trail the exit under load, so it is not waited for.
            137 => Some(Failure::job(format!(
                "out of memory, most likely: killed (SIGKILL, exit 137) at the {} MiB limit",
                memory_bytes >> 20
            ))),
            code => Some(Failure::job(format!("exited with code {code}"))),
        }
    }
}

/// How the wait for a container ended: the engine's answer, and whether the worker
/// killed it for its timeout or stopped it.
struct Ended {
    waited: Option<Result<bollard::models::ContainerWaitResponse, DockerError>>,
    timed_out: bool,
    stopped: bool,
    flooded: bool,
}

/// A line the container printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputLine {
    pub stream: LogStream,
    pub line: String,
}

/// The Docker engine, as the worker uses it.
#[derive(Debug, Clone)]
pub struct Executor {
    docker: Docker,
    node_label: String,
    /// Containers this executor is running now: never leftovers.
    running: Arc<Mutex<HashSet<String>>>,
}

/// A container's name in [`Executor::running`] while it lives.
struct Running<'a> {
    names: &'a Mutex<HashSet<String>>,
    name: &'a str,
}

impl<'a> Running<'a> {
    fn new(names: &'a Mutex<HashSet<String>>, name: &'a str) -> Self {
        names
            .lock()
            .expect("never poisoned")
            .insert(name.to_owned());
        Self { names, name }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.names.lock().expect("never poisoned").remove(self.name);
    }
}

impl Executor {
    /// Connects to the engine at `socket` and checks it answers.
    pub async fn connect(socket: &std::path::Path, node_id: u64) -> Result<Self, Failure> {
        let docker =
            Docker::connect_with_unix(&socket.to_string_lossy(), 120, bollard::API_DEFAULT_VERSION)
                .map_err(|e| Failure::node(format!("docker: {e}")))?;
        let docker = docker
            .negotiate_version()
            .await
            .map_err(|e| Failure::node(format!("docker: {e}")))?;
        let executor = Self {
            docker,
            node_label: node_id.to_string(),
            running: Arc::default(),
        };
        executor.ping().await?;
        Ok(executor)
    }

    pub fn docker(&self) -> &Docker {
        &self.docker
    }

    /// Whether the engine answers (the node's health).
    pub async fn ping(&self) -> Result<(), Failure> {
        self.docker
            .ping()
            .await
            .map(drop)
            .map_err(|e| Failure::node(format!("docker engine unreachable: {e}")))
    }

    /// Makes sure `image` is present, pulling it when not; returns its configured user.
    pub async fn ensure_image(&self, image: &str) -> Result<Option<String>, Failure> {
        match self.docker.inspect_image(image).await {
            Ok(inspect) => return Ok(image_user(&inspect)),
            Err(e) if not_found(&e) => {}
            Err(e) => return Err(engine_failure(e)),
        }
        tracing::info!(image, "pulling the image");
        let options = CreateImageOptions {
            from_image: Some(image.to_owned()),
            ..Default::default()
        };
        let mut pull = self.docker.create_image(Some(options), None, None);
        while let Some(progress) = pull.next().await {
            if let Err(e) = progress {
                return Err(match e {
                    DockerError::DockerResponseServerError { message, .. }
                    | DockerError::DockerStreamError { error: message } => {
                        Failure::job(format!("image {image} could not be pulled: {message}"))
                    }
                    other => engine_failure(other),
                });
            }
        }
        let inspect = self
            .docker
            .inspect_image(image)
            .await
            .map_err(|e| Failure::job(format!("image {image} is not available: {e}")))?;
        Ok(image_user(&inspect))
    }

    /// Runs `plan` to its end, forwarding its output lines to `lines`, until `ending`.
    /// `on_running` is called once the container runs, with the time since `run` began.
    /// The container is removed before this returns, whatever happened.
    pub async fn run(
        &self,
        plan: &RunPlan,
        ending: Ending<impl FnOnce() -> Duration>,
        lines: mpsc::Sender<OutputLine>,
        on_running: impl FnOnce(Duration),
    ) -> Result<RunOutcome, Failure> {
        let began = Instant::now();
        let _running = Running::new(&self.running, &plan.name);
        let options = CreateContainerOptions {
            name: Some(plan.name.clone()),
            ..Default::default()
        };
        let mut created = self
            .docker
            .create_container(Some(options.clone()), container_body(plan))
            .await;
        if let Err(DockerError::DockerResponseServerError {
            status_code: 409, ..
        }) = created
        {
            // A container of that name left by a crashed run of this job goes first.
            self.remove(&plan.name).await;
            created = self
                .docker
                .create_container(Some(options), container_body(plan))
                .await;
        }
        if let Err(e) = created {
            return Err(match e {
                DockerError::DockerResponseServerError {
                    status_code: 400 | 404,
                    message,
                } => Failure::job(format!("container refused: {message}")),
                other => engine_failure(other),
            });
        }
        let outcome = self
            .attach_start_wait(plan, ending, lines, || {
                on_running(began.elapsed());
            })
            .await;
        self.remove(&plan.name).await;
        outcome
    }

    async fn attach_start_wait(
        &self,
        plan: &RunPlan,
        ending: Ending<impl FnOnce() -> Duration>,
        lines: mpsc::Sender<OutputLine>,
        on_running: impl FnOnce(),
    ) -> Result<RunOutcome, Failure> {
        let name = plan.name.as_str();
        let flooded = CancellationToken::new();
        let pump = self
            .attach(name, lines, plan.max_log_bytes, flooded.clone())
            .await?;
        let started = Instant::now();
        self.start(name).await?;
        on_running();
        let ended = self.wait(name, ending, flooded).await;
        let elapsed = started.elapsed();
        let mut exit_code = match ended.waited {
            Some(Ok(response)) => response.status_code,
            Some(Err(DockerError::DockerContainerWaitError { code, .. })) => code,
            Some(Err(e)) => return Err(engine_failure(e)),
            None => -1,
        };
        let inspect = self
            .docker
            .inspect_container(
                name,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
            .map_err(engine_failure)?;
        let state = inspect.state.unwrap_or_default();
        if let Some(code) = state.exit_code {
            exit_code = code;
        }
        // The output ends when the container does; what is left is forwarded first.
        let _ = pump.await;
        Ok(RunOutcome {
            exit_code,
            oom_killed: state.oom_killed.unwrap_or(false),
            timed_out: ended.timed_out,
            stopped: ended.stopped,
            flooded: ended.flooded.then_some(plan.max_log_bytes),
            elapsed,
            reason: None,
        })
    }

    /// Attaches to the container's output and forwards it to `lines` until it ends, or
    /// until it passes `limit` bytes: then `flooded` fires.
    async fn attach(
        &self,
        name: &str,
        lines: mpsc::Sender<OutputLine>,
        limit: u64,
        flooded: CancellationToken,
    ) -> Result<tokio::task::JoinHandle<()>, Failure> {
        let attached = self
            .docker
            .attach_container(
                name,
                Some(AttachContainerOptions {
                    stream: true,
                    stdout: true,
                    stderr: true,
                    ..Default::default()
                }),
            )
            .await
            .map_err(engine_failure)?;
        Ok(tokio::spawn(pump_lines(
            attached.output,
            lines,
            limit,
            flooded,
        )))
    }

    async fn start(&self, name: &str) -> Result<(), Failure> {
        self.docker
            .start_container(
                name,
                None::<bollard::query_parameters::StartContainerOptions>,
            )
            .await
            .map_err(|e| match e {
                DockerError::DockerResponseServerError {
                    status_code: 400 | 404,
                    message,
                } => Failure::job(format!("container did not start: {message}")),
                other => engine_failure(other),
            })
    }

    /// Waits for the container to exit: killed at `timeout` or when it `flooded` its
    /// output, or, when `stop` fires, sent SIGTERM and killed after `stop_grace()`.
    async fn wait(
        &self,
        name: &str,
        ending: Ending<impl FnOnce() -> Duration>,
        flooded: CancellationToken,
    ) -> Ended {
        let Ending {
            timeout,
            stop,
            grace: stop_grace,
        } = ending;
        let mut wait = self
            .docker
            .wait_container(name, None::<WaitContainerOptions>);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let (mut timed_out, mut stopped, mut flood) = (false, false, false);
        let waited = tokio::select! {
            waited = wait.next() => waited,
            () = &mut deadline => {
                timed_out = true;
                self.kill(name, "SIGKILL").await;
                wait.next().await
            }
            () = flooded.cancelled() => {
                flood = true;
                self.kill(name, "SIGKILL").await;
                wait.next().await
            }
            () = stop.cancelled() => {
                stopped = true;
                self.kill(name, "SIGTERM").await;
                match tokio::time::timeout(stop_grace(), wait.next()).await {
                    Ok(waited) => waited,
                    Err(_) => {
                        self.kill(name, "SIGKILL").await;
                        wait.next().await
                    }
                }
            }
        };
        Ended {
            waited,
            timed_out,
            stopped,
            flooded: flood,
        }
    }

    async fn kill(&self, name: &str, signal: &str) {
        let options = KillContainerOptions {
            signal: signal.into(),
        };
        if let Err(e) = self.docker.kill_container(name, Some(options)).await {
            tracing::debug!(container = name, error = %e, "kill");
        }
    }

    /// Removes a container and its anonymous volumes; missing is fine.
    pub async fn remove(&self, name: &str) {
        let options = RemoveContainerOptions {
            force: true,
            v: true,
            ..Default::default()
        };
        match self.docker.remove_container(name, Some(options)).await {
            Ok(()) => {}
            Err(e) if not_found(&e) => {}
            Err(e) => tracing::warn!(container = name, error = %e, "could not remove a container"),
        }
    }

    /// Names of this node's containers, running or not.
    pub async fn containers(&self) -> Result<Vec<String>, Failure> {
        let filters = HashMap::from([(
            "label".to_owned(),
            vec![format!("{NODE_LABEL}={}", self.node_label)],
        )]);
        let listed = self
            .docker
            .list_containers(Some(ListContainersOptions {
                all: true,
                filters: Some(filters),
                ..Default::default()
            }))
            .await
            .map_err(engine_failure)?;
        Ok(listed
            .into_iter()
            .filter_map(|c| c.names?.into_iter().next())
            .map(|n| n.trim_start_matches('/').to_owned())
            .collect())
    }

    /// Removes this node's containers that this executor is not running: those a previous
    /// run of the worker left (after a crash), or whose removal an engine outage stopped.
    /// A running job's container is never one of them.
    pub async fn remove_leftovers(&self) -> Result<usize, Failure> {
        let mut names = self.containers().await?;
        {
            let running = self.running.lock().expect("never poisoned");
            names.retain(|name| !running.contains(name));
        }
        for name in &names {
            tracing::warn!(
                container = name,
                "removing a container left by a previous run"
            );
            self.remove(name).await;
        }
        Ok(names.len())
    }
}

/// The reaper: waits until stdin closes (the worker that started it exited, however it
/// died), then removes every container of node `node_id`. SIGINT is ignored so that a
/// Ctrl-C to the process group leaves the cleanup to the worker's own shutdown.
pub async fn reap_when_orphaned(
    socket: &std::path::Path,
    node_id: u64,
    work_dir: &std::path::Path,
) -> anyhow::Result<()> {
    use tokio::io::AsyncReadExt;
    let mut interrupts = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    let mut stdin = tokio::io::stdin();
    let mut buffer = [0u8; 64];
    loop {
        tokio::select! {
            read = stdin.read(&mut buffer) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            },
            _ = interrupts.recv() => {}
        }
    }
    // The jobs' disk spaces first (lazily: a container still holding one keeps its view
    // until it is removed), so that none outlives its worker holding a loop device and
    // the image's disk.
    crate::space::unmount_all(work_dir).await;
    let executor = Executor::connect(socket, node_id).await?;
    executor.remove_leftovers().await?;
    Ok(())
}

fn image_user(inspect: &bollard::models::ImageInspect) -> Option<String> {
    inspect
        .config
        .as_ref()
        .and_then(|c| c.user.clone())
        .filter(|u| !u.is_empty())
}

fn not_found(error: &DockerError) -> bool {
    matches!(
        error,
        DockerError::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// An engine that fails is the node's problem, not the job's.
fn engine_failure(error: DockerError) -> Failure {
    Failure::node(format!("docker: {error}"))
}

/// Splits the multiplexed output into lines, cut at [`MAX_LINE`]; stops reading and fires
/// `flooded` once more than `limit` bytes came.
async fn pump_lines(
    mut output: std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<LogOutput, DockerError>> + Send>,
    >,
    lines: mpsc::Sender<OutputLine>,
    limit: u64,
    flooded: CancellationToken,
) {
    let mut buffers = [Vec::new(), Vec::new()];
    let mut open = true;
    let mut read = 0u64;
    while let Some(chunk) = output.next().await {
        let (stream, bytes) = match chunk {
            Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => {
                (LogStream::Stdout, message)
            }
            Ok(LogOutput::StdErr { message }) => (LogStream::Stderr, message),
            Ok(LogOutput::StdIn { .. }) => continue,
            Err(_) => break,
        };
        read = read.saturating_add(bytes.len() as u64);
        if read > limit {
            flooded.cancel();
            break;
        }
        let buffer = &mut buffers[stream as usize];
        for &byte in bytes.iter() {
            if byte == b'\n' {
                open &= emit(&lines, stream, buffer).await;
            } else if buffer.len() < MAX_LINE {
                buffer.push(byte);
            }
        }
    }
    for (index, stream) in [LogStream::Stdout, LogStream::Stderr]
        .into_iter()
        .enumerate()
    {
        if !buffers[index].is_empty() && open {
            open &= emit(&lines, stream, &mut buffers[index]).await;
        }
    }
}

async fn emit(lines: &mpsc::Sender<OutputLine>, stream: LogStream, buffer: &mut Vec<u8>) -> bool {
    let line = String::from_utf8_lossy(buffer).into_owned();
    buffer.clear();
    lines.send(OutputLine { stream, line }).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_name_their_cause() {
        let outcome = |exit_code, oom_killed, timed_out| RunOutcome {
            exit_code,
            oom_killed,
            timed_out,
            stopped: false,
            flooded: None,
            elapsed: Duration::ZERO,
            reason: None,
        };
        let timeout = Duration::from_secs(5);
        assert_eq!(outcome(0, false, false).failure(1 << 30, timeout), None);
        let reason = |o: RunOutcome| o.failure(256 << 20, timeout).unwrap().reason;
        assert!(reason(outcome(137, true, false)).starts_with("out of memory"));
        assert!(reason(outcome(137, false, true)).starts_with("timeout"));
        assert_eq!(reason(outcome(3, false, false)), "exited with code 3");
        // A SIGKILL the worker did not send, the engine's OOM flag not yet set.
        assert!(reason(outcome(137, false, false)).starts_with("out of memory, most likely"));
        let flooded = RunOutcome {
            flooded: Some(64 << 20),
            ..outcome(137, false, false)
        };
        assert_eq!(
            reason(flooded),
            "log limit: killed for printing more than 64 MiB on stdout and stderr"
        );
        let trapped = RunOutcome {
            reason: Some("trapped: wasm `unreachable` instruction executed".into()),
            ..outcome(-1, false, false)
        };
        assert_eq!(
            reason(trapped),
            "trapped: wasm `unreachable` instruction executed"
        );
    }
}
