//! Running a job's container through the Docker API (bollard). [`container_body`] is the
//! sandbox, as a pure function of the [`RunPlan`]; [`Executor`] is the IO: image present or
//! pulled, create, attach, start, wait with a wall-clock limit, and remove, always.
//!
//! The sandbox: no network; read-only root file system with a tmpfs `/tmp`; inputs
//! read-only at `/inputs`; `/outputs` and `/checkpoints` the only writable mounts; memory
//! (no swap), CPU and process-count limits; every capability dropped and
//! `no-new-privileges`; the image's user when it names a non-root one, else 65534
//! (nobody); GPUs as a device request for exactly the devices assigned to the job.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::errors::Error as DockerError;
use bollard::models::{ContainerCreateBody, DeviceRequest, HostConfig};
use bollard::query_parameters::{
    AttachContainerOptions, CreateContainerOptions, CreateImageOptions, KillContainerOptions,
    ListContainersOptions, RemoveContainerOptions, WaitContainerOptions,
};
use futures::StreamExt;
use gantry_protocol::jobs::LogStream;
use gantry_protocol::spec::{CHECKPOINTS_DIR, INPUTS_DIR, OUTPUTS_DIR};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::fault::Failure;

/// Label on every container the worker creates: the node it ran for.
pub const NODE_LABEL: &str = "io.gantry.node";
/// Label with the job id.
pub const JOB_LABEL: &str = "io.gantry.job";
/// The user a job runs as when its image does not name a non-root one.
pub const NOBODY: &str = "65534:65534";
/// Longest log line forwarded, bytes; longer lines are cut.
pub const MAX_LINE: usize = 16 * 1024;

/// Everything that decides how one run's container is built.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPlan {
    pub name: String,
    pub image: String,
    pub command: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The image's configured user, if any.
    pub image_user: Option<String>,
    pub inputs_dir: PathBuf,
    pub outputs_dir: PathBuf,
    pub checkpoints_dir: PathBuf,
    pub memory_bytes: i64,
    pub cpu_threads: u16,
    pub pids_limit: i64,
    /// NVML UUIDs of the GPUs the job gets; empty for a CPU job.
    pub gpu_uuids: Vec<String>,
    pub labels: Vec<(String, String)>,
}

/// The user to run as: the image's, unless it is empty or root.
pub fn run_as(image_user: Option<&str>) -> String {
    match image_user.map(str::trim) {
        None | Some("") => NOBODY.into(),
        Some(user) => {
            let name = user.split(':').next().unwrap_or_default();
            if name == "root" || name == "0" {
                NOBODY.into()
            } else {
                user.into()
            }
        }
    }
}

/// The container for `plan`: the sandbox described in the module docs.
pub fn container_body(plan: &RunPlan) -> ContainerCreateBody {
    let bind = |host: &PathBuf, container: &str, mode: &str| {
        format!("{}:{container}:{mode}", host.display())
    };
    let device_requests = (!plan.gpu_uuids.is_empty()).then(|| {
        vec![DeviceRequest {
            driver: Some("nvidia".into()),
            device_ids: Some(plan.gpu_uuids.clone()),
            capabilities: Some(vec![vec!["gpu".into()]]),
            ..Default::default()
        }]
    });
    let host_config = HostConfig {
        binds: Some(vec![
            bind(&plan.inputs_dir, INPUTS_DIR, "ro"),
            bind(&plan.outputs_dir, OUTPUTS_DIR, "rw"),
            bind(&plan.checkpoints_dir, CHECKPOINTS_DIR, "rw"),
        ]),
        network_mode: Some("none".into()),
        readonly_rootfs: Some(true),
        tmpfs: Some(HashMap::from([(
            "/tmp".into(),
            "rw,nosuid,nodev,size=1g".into(),
        )])),
        cap_drop: Some(vec!["ALL".into()]),
        security_opt: Some(vec!["no-new-privileges".into()]),
        memory: Some(plan.memory_bytes),
        memory_swap: Some(plan.memory_bytes),
        nano_cpus: Some(i64::from(plan.cpu_threads) * 1_000_000_000),
        pids_limit: Some(plan.pids_limit),
        device_requests,
        ..Default::default()
    };
    ContainerCreateBody {
        image: Some(plan.image.clone()),
        cmd: (!plan.command.is_empty()).then(|| plan.command.clone()),
        env: Some(plan.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
        user: Some(run_as(plan.image_user.as_deref())),
        working_dir: Some(OUTPUTS_DIR.into()),
        labels: Some(plan.labels.iter().cloned().collect()),
        network_disabled: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        host_config: Some(host_config),
        ..Default::default()
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutcome {
    pub exit_code: i64,
    pub oom_killed: bool,
    pub timed_out: bool,
    /// Stopped because the worker was told to (shutdown, job taken away).
    pub stopped: bool,
    pub elapsed: Duration,
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
        match self.exit_code {
            0 => None,
            // 137 = SIGKILL: the kernel's OOM killer also sends it inside the cgroup.
            code => Some(Failure::job(format!("exited with code {code}"))),
        }
    }
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

    /// Runs `plan` to its end, forwarding its output lines to `lines`. Killed after
    /// `timeout`, or when `stop` fires (then with SIGTERM first and `stop_grace()`, asked
    /// at that moment, to exit).
    /// `on_running` is called once the container runs, with the time since `run` began.
    /// The container is removed before this returns, whatever happened.
    pub async fn run(
        &self,
        plan: &RunPlan,
        timeout: Duration,
        stop: CancellationToken,
        stop_grace: impl FnOnce() -> Duration,
        lines: mpsc::Sender<OutputLine>,
        on_running: impl FnOnce(Duration),
    ) -> Result<RunOutcome, Failure> {
        let began = Instant::now();
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
            .attach_start_wait(plan, timeout, stop, stop_grace, lines, || {
                on_running(began.elapsed());
            })
            .await;
        self.remove(&plan.name).await;
        outcome
    }

    async fn attach_start_wait(
        &self,
        plan: &RunPlan,
        timeout: Duration,
        stop: CancellationToken,
        stop_grace: impl FnOnce() -> Duration,
        lines: mpsc::Sender<OutputLine>,
        on_running: impl FnOnce(),
    ) -> Result<RunOutcome, Failure> {
        let name = plan.name.as_str();
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
        let pump = tokio::spawn(pump_lines(attached.output, lines));
        let started = Instant::now();
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
            })?;
        on_running();
        let mut wait = self
            .docker
            .wait_container(name, None::<WaitContainerOptions>);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let (mut timed_out, mut stopped) = (false, false);
        let waited = tokio::select! {
            waited = wait.next() => waited,
            () = &mut deadline => {
                timed_out = true;
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
        let elapsed = started.elapsed();
        let mut exit_code = match waited {
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
            timed_out,
            stopped,
            elapsed,
        })
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

    /// Removes containers a previous run of this worker left (after a crash).
    pub async fn remove_leftovers(&self) -> Result<usize, Failure> {
        let names = self.containers().await?;
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
pub async fn reap_when_orphaned(socket: &std::path::Path, node_id: u64) -> anyhow::Result<()> {
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

/// Splits the multiplexed output into lines, cut at [`MAX_LINE`].
async fn pump_lines(
    mut output: std::pin::Pin<
        Box<dyn futures::Stream<Item = Result<LogOutput, DockerError>> + Send>,
    >,
    lines: mpsc::Sender<OutputLine>,
) {
    let mut buffers = [Vec::new(), Vec::new()];
    let mut open = true;
    while let Some(chunk) = output.next().await {
        let (stream, bytes) = match chunk {
            Ok(LogOutput::StdOut { message }) | Ok(LogOutput::Console { message }) => {
                (LogStream::Stdout, message)
            }
            Ok(LogOutput::StdErr { message }) => (LogStream::Stderr, message),
            Ok(LogOutput::StdIn { .. }) => continue,
            Err(_) => break,
        };
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

    fn plan() -> RunPlan {
        RunPlan {
            name: "gantry-31337-7-1".into(),
            image: "acme/train:1".into(),
            command: vec!["python".into(), "train.py".into()],
            env: vec![("SEED".into(), "42".into())],
            image_user: None,
            inputs_dir: "/w/7/inputs".into(),
            outputs_dir: "/w/7/outputs".into(),
            checkpoints_dir: "/w/7/checkpoints".into(),
            memory_bytes: 2 << 30,
            cpu_threads: 4,
            pids_limit: 512,
            gpu_uuids: vec![],
            labels: vec![(NODE_LABEL.into(), "3".into())],
        }
    }

    #[test]
    fn the_sandbox_is_closed() {
        let body = container_body(&plan());
        let host = body.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        assert_eq!(body.network_disabled, Some(true));
        assert_eq!(host.readonly_rootfs, Some(true));
        assert!(host.tmpfs.unwrap().contains_key("/tmp"));
        assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(
            host.security_opt,
            Some(vec!["no-new-privileges".to_string()])
        );
        assert_eq!(host.memory, Some(2 << 30));
        assert_eq!(host.memory_swap, host.memory, "no swap beyond the limit");
        assert_eq!(host.nano_cpus, Some(4_000_000_000));
        assert_eq!(host.pids_limit, Some(512));
        assert_eq!(host.device_requests, None, "a CPU job sees no GPU");
        assert_eq!(
            host.binds.unwrap(),
            [
                "/w/7/inputs:/inputs:ro",
                "/w/7/outputs:/outputs:rw",
                "/w/7/checkpoints:/checkpoints:rw"
            ]
        );
        assert_eq!(body.user.as_deref(), Some(NOBODY));
        assert_eq!(body.env, Some(vec!["SEED=42".to_string()]));
    }

    #[test]
    fn gpus_are_requested_by_uuid_exactly() {
        let mut plan = plan();
        plan.gpu_uuids = vec!["GPU-aaa".into(), "GPU-bbb".into()];
        let requests = container_body(&plan)
            .host_config
            .unwrap()
            .device_requests
            .unwrap();
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].driver.as_deref(), Some("nvidia"));
        assert_eq!(
            requests[0].device_ids,
            Some(vec!["GPU-aaa".to_string(), "GPU-bbb".to_string()])
        );
        assert_eq!(requests[0].count, None, "ids, not a count");
        assert_eq!(
            requests[0].capabilities,
            Some(vec![vec!["gpu".to_string()]])
        );
    }

    #[test]
    fn root_images_run_as_nobody() {
        assert_eq!(run_as(None), NOBODY);
        assert_eq!(run_as(Some("")), NOBODY);
        assert_eq!(run_as(Some("root")), NOBODY);
        assert_eq!(run_as(Some("0:0")), NOBODY);
        assert_eq!(run_as(Some("1000:1000")), "1000:1000");
        assert_eq!(run_as(Some("trainer")), "trainer");
    }

    #[test]
    fn failures_name_their_cause() {
        let outcome = |exit_code, oom_killed, timed_out| RunOutcome {
            exit_code,
            oom_killed,
            timed_out,
            stopped: false,
            elapsed: Duration::ZERO,
        };
        let timeout = Duration::from_secs(5);
        assert_eq!(outcome(0, false, false).failure(1 << 30, timeout), None);
        let reason = |o: RunOutcome| o.failure(256 << 20, timeout).unwrap().reason;
        assert!(reason(outcome(137, true, false)).starts_with("out of memory"));
        assert!(reason(outcome(137, false, true)).starts_with("timeout"));
        assert_eq!(reason(outcome(3, false, false)), "exited with code 3");
    }
}
