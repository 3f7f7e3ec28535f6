//! The sandbox a job runs in, as a pure function of its [`RunPlan`]: no network;
//! read-only root file system; inputs read-only at `/inputs`; `/outputs`, `/checkpoints`
//! and `/tmp` the only writable mounts, all three in the job's fixed-size space
//! ([`crate::space`]); Docker keeps no log of the output; memory (no swap), CPU and
//! process-count limits; every capability dropped and `no-new-privileges`; the image's
//! user when it names a non-root one, else 65534 (nobody); GPUs as a device request for
//! exactly the devices assigned to the job. [`crate::docker::Executor`] runs it.

use std::path::PathBuf;

use bollard::models::{ContainerCreateBody, DeviceRequest, HostConfig, HostConfigLogConfig};
use gantry_protocol::spec::{CHECKPOINTS_DIR, INPUTS_DIR, OUTPUTS_DIR};

/// The user a job runs as when its image does not name a non-root one.
pub const NOBODY: &str = "65534:65534";

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
    pub tmp_dir: PathBuf,
    pub memory_bytes: i64,
    pub cpu_threads: u16,
    pub pids_limit: i64,
    /// Output (stdout and stderr) the job may print before it is killed, bytes.
    pub max_log_bytes: u64,
    /// NVML UUIDs of the GPUs the job gets; empty for a CPU job.
    pub gpu_uuids: Vec<String>,
    pub labels: Vec<(String, String)>,
    /// A verified seat's run (design 18, §1): a fixed host name (Docker's default is the
    /// container's random id) and one fixed CPU, so that what a deterministic program
    /// sees of its machine is the same on every node.
    pub deterministic: bool,
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
            bind(&plan.tmp_dir, "/tmp", "rw"),
        ]),
        network_mode: Some("none".into()),
        readonly_rootfs: Some(true),
        cap_drop: Some(vec!["ALL".into()]),
        security_opt: Some(vec!["no-new-privileges".into()]),
        memory: Some(plan.memory_bytes),
        memory_swap: Some(plan.memory_bytes),
        nano_cpus: Some(i64::from(plan.cpu_threads) * 1_000_000_000),
        cpuset_cpus: plan.deterministic.then(|| "0".into()),
        pids_limit: Some(plan.pids_limit),
        device_requests,
        // Docker keeps no log of its own: the worker reads the output through the attach
        // stream (bounded, rate-limited), and a job flooding stdout cannot fill the
        // engine's disk with a log file.
        log_config: Some(HostConfigLogConfig {
            typ: Some("none".into()),
            config: None,
        }),
        ..Default::default()
    };
    ContainerCreateBody {
        image: Some(plan.image.clone()),
        cmd: (!plan.command.is_empty()).then(|| plan.command.clone()),
        env: Some(plan.env.iter().map(|(k, v)| format!("{k}={v}")).collect()),
        user: Some(run_as(plan.image_user.as_deref())),
        hostname: plan.deterministic.then(|| "gantry".into()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::NODE_LABEL;

    fn plan() -> RunPlan {
        RunPlan {
            name: "gantry-31337-7-1".into(),
            image: "acme/train:1".into(),
            command: vec!["python".into(), "train.py".into()],
            env: vec![("SEED".into(), "42".into())],
            image_user: None,
            inputs_dir: "/w/7/inputs".into(),
            outputs_dir: "/w/7/space/outputs".into(),
            checkpoints_dir: "/w/7/space/checkpoints".into(),
            tmp_dir: "/w/7/space/tmp".into(),
            memory_bytes: 2 << 30,
            cpu_threads: 4,
            pids_limit: 512,
            max_log_bytes: 1 << 20,
            gpu_uuids: vec![],
            labels: vec![(NODE_LABEL.into(), "3".into())],
            deterministic: false,
        }
    }

    #[test]
    fn the_sandbox_is_closed() {
        let body = container_body(&plan());
        let host = body.host_config.unwrap();
        assert_eq!(host.network_mode.as_deref(), Some("none"));
        assert_eq!(body.network_disabled, Some(true));
        assert_eq!(host.readonly_rootfs, Some(true));
        assert_eq!(
            host.tmpfs, None,
            "/tmp is in the job's space, not in memory"
        );
        assert_eq!(
            host.log_config.and_then(|log| log.typ).as_deref(),
            Some("none"),
            "Docker keeps no log of the job's output"
        );
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
                "/w/7/space/outputs:/outputs:rw",
                "/w/7/space/checkpoints:/checkpoints:rw",
                "/w/7/space/tmp:/tmp:rw"
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
}
