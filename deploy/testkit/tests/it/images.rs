//! The busybox job image imports into a private engine and runs a job the way the worker
//! runs one: no network, an unprivileged user, a read-only rootfs with a tmpfs `/tmp`.

use std::collections::HashMap;

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{LogsOptionsBuilder, RemoveContainerOptionsBuilder};
use futures::TryStreamExt;
use gantry_testkit::{Dockerd, image_exists, import_busybox};

const TAG: &str = "gantry-test/busybox:it";

#[tokio::test]
async fn the_busybox_image_imports_once_and_runs_a_locked_down_job() {
    let dockerd = tokio::task::spawn_blocking(Dockerd::start)
        .await
        .expect("no panic")
        .expect("dockerd starts");
    let docker = dockerd.client().await.expect("bollard connects");

    assert!(!image_exists(&docker, TAG).await.expect("inspect"));
    let id = import_busybox(&docker, TAG).await.expect("import");
    assert!(image_exists(&docker, TAG).await.expect("inspect"));
    assert_eq!(
        import_busybox(&docker, TAG).await.expect("re-import"),
        id,
        "importing the same rootfs again keeps the image"
    );
    let config = docker
        .inspect_image(TAG)
        .await
        .expect("inspect")
        .config
        .expect("config");
    assert_eq!(config.cmd, Some(vec!["/bin/sh".to_owned()]));
    assert_eq!(config.env, Some(vec!["PATH=/bin".to_owned()]));

    let script = "echo hello; id -u; sha256sum /etc/passwd; \
                  touch /written 2>/dev/null || echo rootfs-read-only; \
                  echo scratch > /tmp/t && cat /tmp/t; \
                  wget -q -T 2 -O /tmp/w http://1.1.1.1/ 2>/dev/null || echo offline";
    let body = ContainerCreateBody {
        image: Some(TAG.to_owned()),
        cmd: Some(vec!["/bin/sh".into(), "-c".into(), script.into()]),
        user: Some("65534:65534".to_owned()),
        host_config: Some(HostConfig {
            network_mode: Some("none".to_owned()),
            readonly_rootfs: Some(true),
            tmpfs: Some(HashMap::from([(
                "/tmp".to_owned(),
                "rw,size=16m".to_owned(),
            )])),
            ..Default::default()
        }),
        ..Default::default()
    };
    let container = docker
        .create_container(
            None::<bollard::query_parameters::CreateContainerOptions>,
            body,
        )
        .await
        .expect("create")
        .id;
    docker
        .start_container(
            &container,
            None::<bollard::query_parameters::StartContainerOptions>,
        )
        .await
        .expect("start");
    // A non-zero exit comes back as an error from the wait stream.
    let exits: Vec<_> = docker
        .wait_container(
            &container,
            None::<bollard::query_parameters::WaitContainerOptions>,
        )
        .try_collect()
        .await
        .expect("the job exits 0");
    assert_eq!(exits.last().map(|e| e.status_code), Some(0));
    let logs: Vec<_> = docker
        .logs(
            &container,
            Some(LogsOptionsBuilder::new().stdout(true).stderr(true).build()),
        )
        .try_collect()
        .await
        .expect("logs");
    let output: String = logs.iter().map(ToString::to_string).collect();
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines.first(), Some(&"hello"), "{output}");
    assert_eq!(lines.get(1), Some(&"65534"), "{output}");
    assert!(
        lines.get(2).is_some_and(|l| {
            let (hash, path) = l.split_once("  ").unwrap_or_default();
            hash.len() == 64 && path == "/etc/passwd"
        }),
        "{output}"
    );
    assert_eq!(
        &lines[3..],
        ["rootfs-read-only", "scratch", "offline"],
        "{output}"
    );

    docker
        .remove_container(
            &container,
            Some(RemoveContainerOptionsBuilder::new().force(true).build()),
        )
        .await
        .expect("remove");
}
