//! The executor on a private engine, without the chain: when the node recovers from a
//! fault, the clean-up removes the containers an outage left and never a running job's.
//! (Before, the recovery after one job's node fault killed every job running beside it.)

use std::time::Duration;

use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{CreateContainerOptions, ListContainersOptions};
use gantry_testkit::{Dockerd, import_busybox};
use gantry_worker::docker::{Ending, Executor, NODE_LABEL, RunPlan};
use tokio_util::sync::CancellationToken;

use crate::harness::IMAGE;

const NODE: u64 = 7;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clean_up_after_a_fault_never_removes_a_running_job_s_container() {
    let dockerd = tokio::task::spawn_blocking(Dockerd::start)
        .await
        .unwrap()
        .expect("dockerd starts");
    let docker = dockerd.client().await.unwrap();
    import_busybox(&docker, IMAGE).await.unwrap();
    let executor = Executor::connect(dockerd.socket(), NODE).await.unwrap();

    // What an outage left: a container of this node that nothing runs any more.
    let leftover = ContainerCreateBody {
        image: Some(IMAGE.into()),
        cmd: Some(vec!["sleep".into(), "600".into()]),
        labels: Some([(NODE_LABEL.to_string(), NODE.to_string())].into()),
        network_disabled: Some(true),
        ..Default::default()
    };
    docker
        .create_container(
            Some(CreateContainerOptions {
                name: Some("gantry-31337-1-1".into()),
                ..Default::default()
            }),
            leftover,
        )
        .await
        .unwrap();

    // A healthy job, running until the test lets it finish (a file in its inputs).
    let dir = tempfile::tempdir().unwrap();
    let plan = RunPlan {
        name: "gantry-31337-2-1".into(),
        image: IMAGE.into(),
        command: [
            "/bin/sh",
            "-c",
            "while [ ! -e /inputs/go ]; do sleep 0.1; done; echo done > /outputs/ok",
        ]
        .map(String::from)
        .to_vec(),
        env: vec![],
        image_user: None,
        inputs_dir: dir.path().join("inputs"),
        outputs_dir: dir.path().join("outputs"),
        checkpoints_dir: dir.path().join("checkpoints"),
        tmp_dir: dir.path().join("tmp"),
        memory_bytes: 64 << 20,
        cpu_threads: 1,
        pids_limit: 64,
        max_log_bytes: 1 << 20,
        gpu_uuids: vec![],
        labels: vec![(NODE_LABEL.into(), NODE.to_string())],
        deterministic: false,
    };
    for dir in [
        &plan.inputs_dir,
        &plan.outputs_dir,
        &plan.checkpoints_dir,
        &plan.tmp_dir,
    ] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    }
    let (lines, mut printed) = tokio::sync::mpsc::channel(16);
    tokio::spawn(async move { while printed.recv().await.is_some() {} });
    let (running_tx, running) = tokio::sync::oneshot::channel();
    let job = {
        let executor = executor.clone();
        let plan = plan.clone();
        tokio::spawn(async move {
            let ending = Ending {
                timeout: Duration::from_secs(300),
                stop: CancellationToken::new(),
                grace: || Duration::ZERO,
            };
            executor
                .run(&plan, ending, lines, |_| {
                    let _ = running_tx.send(());
                })
                .await
        })
    };
    running.await.expect("the job's container runs");

    // The node recovers from a fault: the leftover goes, the running job stays.
    assert_eq!(executor.remove_leftovers().await.unwrap(), 1);
    std::fs::write(plan.inputs_dir.join("go"), b"").unwrap();
    let outcome = job.await.unwrap().expect("the job ran");
    assert_eq!(outcome.exit_code, 0, "{outcome:?}");
    assert_eq!(
        std::fs::read_to_string(plan.outputs_dir.join("ok")).unwrap(),
        "done\n"
    );
    let left = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            ..Default::default()
        }))
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}
