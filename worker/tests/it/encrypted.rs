//! Design 19, §3: encrypted payloads on a real worker. The submitter's input is in the
//! store as ciphertext to the job key; the worker asks for the key after its assignment,
//! gets it from the submitter's key server (`gantry_runtime::keys::Submitter`, what
//! `gantry job watch` and `gantry keys serve` run) and runs the job on the plaintext; its
//! result is in the store as ciphertext to the submitter, the chain commits to the
//! plaintext's hash and the URI carries the ciphertext's. A submitter who never releases
//! the key (and a stranger who releases another) costs the node nothing: the job is
//! given back free within the reject grace. An encrypted job's checkpoints are
//! ciphertext too, and the next attempt's node restores them once the key is released to
//! it.

use std::collections::BTreeMap;

use alloy::primitives::B256;
use alloy::signers::SignerSync as _;
use futures::StreamExt as _;
use gantry_protocol::encryption::{self, AgeIdentity, Release, Request};
use gantry_protocol::names;
use gantry_protocol::spec::{Encryption, InputSpec, JobSpec};
use gantry_protocol::status::JobStatus;
use gantry_runtime::keys::{Released, Submitter};
use gantry_testkit::accounts::{NODES, OTHER, SUBMITTER};
use tokio_util::sync::CancellationToken;

use crate::harness::{Net, cpu_job, shell, tar_files};
use crate::resume::epoch_of;
use crate::scripts::checkpointing;

const SALT: [u8; 16] = [7; 16];

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn encrypted_input_and_result_are_ciphertext_in_the_store_and_the_submitter_reads_both() {
    let net = Net::start(|p| p).await;
    net.fund_submitter().await;
    let worker = net.spawn_worker(NODES[0], "").await;
    let submitter = AgeIdentity::generate();
    let plaintext = b"the submitter's private training data\n".repeat(1000);
    let (spec, input_uri) = secret_input_job(&net, &submitter, &plaintext).await;
    let job = net.post(cpu_job(64), &spec).await;
    let (released, server) = serve_keys(&net, &submitter, job).await;

    net.wait_for_status(job, JobStatus::Submitted).await;
    assert_eq!(
        released.await.expect("a key released"),
        Released {
            job,
            attempt: 1,
            node: worker.node_id
        },
        "the key went to the node of the attempt, once"
    );
    server.cancel();
    // The input in the store is ciphertext, to the job key only.
    let stored_input = net.download(&input_uri).await;
    assert!(!contains(&stored_input, &plaintext[..64]));
    assert!(encryption::decrypt(&submitter, &stored_input[..], &mut Vec::new()).is_err());

    let files = decrypted_result(&net, job, &submitter).await;
    assert_eq!(files["copy.bin"], plaintext, "the job ran on the plaintext");
    // What it printed stayed on the node (logs are public in the API); none was sent.
    let logs = gantry_protocol::names::logs_subject(net.chain_id(), worker.node_id, job);
    let jobs = js_stream(&net).await;
    assert!(
        jobs.get_last_raw_message_by_subject(&logs).await.is_err(),
        "no log line of an encrypted job leaves the node"
    );
    let submitted = net.submitted_result(job).await;
    let (result_uri, _) = encryption::split_ciphertext(&submitted.resultURI).unwrap();
    let stored_result = net.download(result_uri).await;
    assert!(
        !contains(&stored_result, &plaintext[..64]),
        "the stored result is ciphertext"
    );
    // Plaintext and key were the job's directory's: gone with it.
    net.wait_for_no_containers().await;
    let left = files_named(
        &net.dir().join(format!("worker-{}", NODES[0])),
        "secret.bin",
    );
    assert!(left.is_empty(), "plaintext left on the node: {left:?}");
    assert!(worker.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn encrypted_a_key_never_released_is_not_the_providers_fault() {
    let net = Net::start(|p| p).await;
    net.fund_submitter().await;
    let worker = net.spawn_worker(NODES[0], "").await;
    let stake = net.node(worker.node_id).await.stake;
    let submitter = AgeIdentity::generate();
    let (spec, _) = secret_input_job(&net, &submitter, b"never to be read").await;
    let job = net.post(cpu_job(64), &spec).await;

    // A stranger answers the node's request with a key of its own, signed by itself.
    let js = net.jetstream().await;
    let keys = gantry_runtime::keys::open(&js, net.chain_id(), 1)
        .await
        .unwrap();
    let mut requests = keys
        .watch_with_history(format!("request.*.{job}.*"))
        .await
        .unwrap();
    let entry = requests.next().await.unwrap().unwrap();
    let request = Request::decode(&entry.value).unwrap();
    let to = encryption::recipient(&request.recipient).unwrap();
    let forged = Release::wrap(&request, &to, &AgeIdentity::generate()).unwrap();
    let stranger = net.devnet.signer(OTHER);
    let signature = stranger
        .sign_hash_sync(&forged.digest(net.chain_id(), net.deployment().market))
        .unwrap();
    keys.put(
        names::key_release(request.node, job, request.attempt),
        forged.signed(&signature).encode().into(),
    )
    .await
    .unwrap();

    // The submitter never answers: the job is given back, free, within the grace.
    let rejection = net.given_back(job, worker.node_id).await;
    assert!(
        rejection.reason.contains("did not release the job key"),
        "{rejection:?}"
    );
    assert_eq!(rejection.charge, 0, "{rejection:?}");
    rejection.assert_at_once(30);
    assert!(net.slashes(worker.node_id).await.is_empty());
    assert_eq!(net.node(worker.node_id).await.stake, stake);
    assert_eq!(
        worker
            .metric("gantry_keys_refused_total{reason=\"not_signed\"}")
            .await,
        Some(1.0),
        "the stranger's key was skipped"
    );
    assert!(worker.stop().success());
}

/// An input whose ciphertext matches its hash but does not open with the job key, on an
/// input server slow enough that its download ends after the free reject grace: the job
/// is the submitter's fault, answered with its failure report (paid), never a reject the
/// node would pay for.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn encrypted_an_input_that_does_not_decrypt_past_the_grace_is_answered_and_paid() {
    let net = Net::start(|p| p).await;
    net.fund_submitter().await;
    let worker = net.spawn_worker(NODES[0], "").await;
    let stake = net.node(worker.node_id).await.stake;
    let submitter = AgeIdentity::generate();
    // Sealed to another key than the job's.
    let mut sealed = Vec::new();
    encryption::encrypt(
        &[AgeIdentity::generate().to_public()],
        &[7u8; 64][..],
        &mut sealed,
    )
    .unwrap();
    let sha256 = alloy::hex::encode(encryption::sha256(&sealed));
    let server = slow_server(sealed).await;
    let mut spec = shell("cp /inputs/secret.bin /outputs/copy.bin", 120);
    spec.version = 3;
    spec.inputs.push(InputSpec {
        uri: format!("http://{server}/sealed"),
        sha256: Some(sha256),
        path: "/inputs/secret.bin".into(),
        max_bytes: None,
        encrypted: true,
    });
    spec.encryption = Some(encryption_to(&submitter));
    let job = net.post(cpu_job(64), &spec).await;
    let (released, keys) = serve_keys(&net, &submitter, job).await;

    net.wait_for_status(job, JobStatus::Submitted).await;
    released.await.expect("the key was released");
    keys.cancel();
    let files = decrypted_result(&net, job, &submitter).await;
    let report: serde_json::Value =
        serde_json::from_slice(&files[gantry_worker::job::FAILURE_FILE]).unwrap();
    assert!(
        report["reason"]
            .as_str()
            .unwrap()
            .contains("does not decrypt with the job key"),
        "{report}"
    );
    assert!(
        net.rejections().await.is_empty(),
        "answered, not given back"
    );
    assert!(net.slashes(worker.node_id).await.is_empty());
    assert_eq!(net.node(worker.node_id).await.stake, stake);
    net.wait_for_no_containers().await;
    assert!(worker.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn encrypted_checkpoints_are_ciphertext_and_resume_on_the_next_node_with_the_key() {
    let net = Net::start(|p| p).await;
    net.fund_submitter().await;
    let first = net
        .spawn_worker(NODES[0], "shutdown_grace = \"300ms\"")
        .await;
    let submitter = AgeIdentity::generate();
    let mut spec = shell(&checkpointing(50, true), 120);
    spec.version = 3;
    spec.encryption = Some(encryption_to(&submitter));
    let job = net.post(cpu_job(64), &spec).await;
    // The first attempt has nothing encrypted to read: it needs no key.
    net.wait_for_status(job, JobStatus::Assigned).await;
    let sealed = checkpoint_at(&net, first.node_id, job, &submitter, 3).await;
    assert!(
        epoch_of(&sealed).is_none(),
        "the stored checkpoint is no tar"
    );
    assert!(first.stop().success());
    net.wait_for_no_containers().await;

    let (released, server) = serve_keys(&net, &submitter, job).await;
    let second = net.spawn_worker(NODES[1], "").await;
    net.wait_for_status(job, JobStatus::Submitted).await;
    assert_eq!(
        released.await.expect("a key released"),
        Released {
            job,
            attempt: 2,
            node: second.node_id
        }
    );
    server.cancel();
    let files = decrypted_result(&net, job, &submitter).await;
    let started_at: u32 = String::from_utf8_lossy(&files["started_at"])
        .trim()
        .parse()
        .unwrap();
    assert!(
        started_at >= 3,
        "resumed from the encrypted checkpoint: {started_at}"
    );
    net.wait_for_no_containers().await;
    assert!(second.stop().success());
}

/// The spec's encryption: results to `submitter`, the job key derived from it.
fn encryption_to(submitter: &AgeIdentity) -> Encryption {
    Encryption {
        recipient: submitter.to_public().to_string(),
        job_key: Some(
            encryption::job_identity(submitter, &SALT)
                .to_public()
                .to_string(),
        ),
        key_salt: Some(alloy::hex::encode(SALT)),
    }
}

/// A job that copies its encrypted input `/inputs/secret.bin` to `/outputs/copy.bin`, and
/// the input's URI (its ciphertext, to the job key, in the inputs bucket).
async fn secret_input_job(
    net: &Net,
    submitter: &AgeIdentity,
    plaintext: &[u8],
) -> (JobSpec, String) {
    let job_key = encryption::job_identity(submitter, &SALT);
    let mut sealed = Vec::new();
    encryption::encrypt(&[job_key.to_public()], plaintext, &mut sealed).unwrap();
    let sha256 = encryption::sha256(&sealed);
    let sha256 = alloy::hex::encode(sha256);
    let uri = net.put_input(&format!("secret-{sha256}"), &sealed).await;
    let mut spec = shell(
        "cp /inputs/secret.bin /outputs/copy.bin && echo the secret is $(head -c 16 /inputs/secret.bin)",
        120,
    );
    spec.version = 3;
    spec.inputs.push(InputSpec {
        uri: uri.clone(),
        sha256: Some(sha256),
        path: "/inputs/secret.bin".into(),
        max_bytes: None,
        encrypted: true,
    });
    spec.encryption = Some(encryption_to(submitter));
    (spec, uri)
}

/// Serves job `job`'s key requests as its submitter; the first key released, and the
/// token that stops the server.
async fn serve_keys(
    net: &Net,
    identity: &AgeIdentity,
    job: u64,
) -> (tokio::sync::oneshot::Receiver<Released>, CancellationToken) {
    let deployment = net.deployment();
    let wallet = net.devnet.signer(SUBMITTER);
    let submitter = Submitter {
        provider: net.devnet.admin.clone(),
        chain_id: net.chain_id(),
        market: deployment.market,
        registry: deployment.registry,
        from_block: deployment.start_block,
        account: wallet.address(),
        identity: identity.clone(),
        sign: Box::new(move |digest: &B256| {
            wallet.sign_hash_sync(digest).map_err(|e| e.to_string())
        }),
    };
    let store = gantry_runtime::keys::open(&net.jetstream().await, net.chain_id(), 1)
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let serving = stop.clone();
    tokio::spawn(async move {
        let mut tx = Some(tx);
        submitter
            .serve(&store, Some(job), serving, |answered| match answered {
                Ok(released) => {
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(released);
                    }
                }
                Err(e) => eprintln!("a key request of job {job} refused: {e}"),
            })
            .await
            .unwrap();
    });
    (rx, stop)
}

/// Job `job`'s result: its ciphertext's hash is the URI's, it decrypts with `submitter`'s
/// identity, and the plaintext's hash is the chain's; its files by path.
async fn decrypted_result(
    net: &Net,
    job: u64,
    submitter: &AgeIdentity,
) -> BTreeMap<String, Vec<u8>> {
    let event = net.submitted_result(job).await;
    let (uri, ciphertext_hash) = encryption::split_ciphertext(&event.resultURI).unwrap();
    let sealed = net.download(uri).await;
    assert_eq!(
        Some(encryption::sha256(&sealed)),
        ciphertext_hash,
        "the URI's hash"
    );
    let mut tar = Vec::new();
    encryption::decrypt(submitter, &sealed[..], &mut tar).expect("the submitter decrypts it");
    assert_eq!(
        encryption::sha256(&tar),
        event.resultHash,
        "the chain's hash"
    );
    tar_files(&tar)
}

/// Node `node`'s checkpoint of `job` once it decrypts (with the submitter's identity) to
/// a tar at `epoch` or later; the stored bytes.
async fn checkpoint_at(
    net: &Net,
    node: u64,
    job: u64,
    submitter: &AgeIdentity,
    epoch: u32,
) -> Vec<u8> {
    let found = std::sync::Mutex::new(Vec::new());
    net.wait_until("an encrypted checkpoint at the epoch", || async {
        let Some(sealed) = net.checkpoint_of(node, job).await else {
            return false;
        };
        let mut tar = Vec::new();
        if encryption::decrypt(submitter, &sealed[..], &mut tar).is_err() {
            return false;
        }
        *found.lock().unwrap() = sealed;
        epoch_of(&tar).is_some_and(|at| at >= epoch)
    })
    .await;
    found.into_inner().unwrap()
}

/// An HTTP server whose `/sealed` sends `bytes` ten to a second: a download that ends
/// past the reject grace (the submitter's pace, not a test's wait).
async fn slow_server(bytes: Vec<u8>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let chunks: Vec<bytes::Bytes> = bytes
        .chunks(bytes.len().div_ceil(25))
        .map(bytes::Bytes::copy_from_slice)
        .collect();
    let app = axum::Router::new().route(
        "/sealed",
        axum::routing::get(move || {
            let chunks = chunks.clone();
            async move {
                let paced = futures::stream::iter(chunks).then(|chunk| async move {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    Ok::<_, std::convert::Infallible>(chunk)
                });
                axum::body::Body::from_stream(paced)
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// The workers' jobs stream (reports).
async fn js_stream(net: &Net) -> async_nats::jetstream::stream::Stream {
    net.jetstream()
        .await
        .get_stream(gantry_protocol::names::jobs_stream_name(net.chain_id()))
        .await
        .unwrap()
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Every file named `name` below `dir`.
fn files_named(dir: &std::path::Path, name: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => found.extend(files_named(&path, name)),
            Ok(_) if entry.file_name() == name => found.push(path),
            _ => {}
        }
    }
    found
}
