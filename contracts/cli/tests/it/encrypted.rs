//! Encrypted payloads (design 19, §3) as far as this harness goes (a chain, NATS, the
//! indexer and the API; no worker: the test does the node's part as the worker does it,
//! through `gantry_runtime::keys::obtain` signed with the node's agent key, and uploads the
//! node's encrypted result itself).
//!
//! `job submit --secret-input` encrypts the file to the job key and uploads only its
//! ciphertext; the spec on chain has the user's wallet-derived recipient, the job key
//! derived from it and the salt, and the input marked encrypted; `job watch` refuses a
//! request not signed by the node's agent and releases the key to the node that holds the
//! attempt; `job result` checks the ciphertext's hash (the URI's), decrypts with the
//! identity and checks the plaintext's (the chain's), refuses a tampered ciphertext (exit
//! 6) and another identity (exit 2); `keys serve` releases on request until SIGTERM,
//! another account's request silent; refusals and the identity commands send nothing.

use std::time::Duration;

use alloy::primitives::B256;
use alloy::signers::SignerSync as _;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::encryption::{self, AgeIdentity, Request};
use gantry_protocol::names;
use gantry_protocol::spec::JobSpec;
use gantry_runtime::keys::{self, Attempt};
use gantry_testkit::accounts::{MATCHER, NODES, OTHER, SUBMITTER};
use gantry_testkit::scenario;
use tokio::io::AsyncReadExt as _;

use crate::harness::Net;

/// The spec job `id` was posted with, as the chain has it.
async fn posted_spec(net: &Net, id: u64) -> JobSpec {
    let logs = net
        .devnet
        .job_events::<JobMarket::JobPosted>(id)
        .await
        .unwrap();
    let (posted, _) = logs.into_iter().next().expect("job posted");
    JobSpec::from_slice(&posted.spec).expect("a valid spec")
}

/// Object `key` of bucket `bucket`, whole.
async fn object(net: &Net, bucket: &str, key: &str) -> Vec<u8> {
    let js = net.jetstream().await;
    let store = js.get_object_store(bucket).await.unwrap();
    let mut object = store.get(key).await.unwrap();
    let mut bytes = Vec::new();
    object.read_to_end(&mut bytes).await.unwrap();
    bytes
}

/// The identity `account`'s wallet derives for the market, as documented:
/// `wallet_identity` of its EIP-191 signature of `wallet_message`.
fn wallet_identity(net: &Net, account: usize) -> AgeIdentity {
    let message = encryption::wallet_message(net.chain_id(), net.devnet.deployment.market);
    let signature = net
        .devnet
        .signer(account)
        .sign_message_sync(message.as_bytes())
        .unwrap();
    encryption::wallet_identity(&signature)
}

/// A result tar as a worker packs one.
fn result_tar() -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let data = b"the secret model";
    let mut header = tar::Header::new_gnu();
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    builder
        .append_data(&mut header, "model.bin", &data[..])
        .unwrap();
    builder.into_inner().unwrap()
}

/// A key request for `attempt` of `job` on `node`, for a fresh identity, signed by `by`.
fn request(net: &Net, (job, attempt, node): (u64, u8, u64), by: usize) -> Vec<u8> {
    let request = Request::unsigned(job, attempt, node, &AgeIdentity::generate().to_public());
    let digest = request.digest(net.chain_id(), net.devnet.deployment.market);
    let signature = net.devnet.signer(by).sign_hash_sync(&digest).unwrap();
    request.signed(&signature).encode()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encrypted_job_inputs_key_release_and_result_from_submit_to_download() {
    let (net, api) = Net::start_with_api().await;
    let chain_id = net.chain_id();
    let market = net.devnet.deployment.market;
    let agent = net.devnet.signer(NODES[1]);
    // The nodes first (the kit's mints and the matcher's sends share the admin's nonces):
    // the one that runs the job, and one that never holds it.
    let node = net.register_own_node(NODES[1], scenario::h100_node()).await;
    let stranger = net.register_own_node(NODES[2], scenario::h100_node()).await;
    net.mint(SUBMITTER, 100).await;
    let gantry = net.gantry(SUBMITTER);
    let me = wallet_identity(&net, SUBMITTER);

    // The identity: derived from the signing key, or a file `keys new` writes.
    let shown = gantry.run(&["keys", "show", "--json"]).await.ok().json();
    assert_eq!(shown["recipient"], me.to_public().to_string());
    assert_eq!(shown["source"], "wallet");
    let text = gantry.run(&["keys", "show"]).await.ok().stdout;
    assert!(
        text.contains("sign the gantry key message only in the gantry CLI"),
        "{text}"
    );
    net.gantry_without_key()
        .run(&["keys", "show"])
        .await
        .failed(2, "no identity: pass --identity FILE");
    let file = net.dir().join("other.age");
    let file_text = file.display().to_string();
    let made = net
        .gantry_without_key()
        .run(&["keys", "new", &file_text, "--json"])
        .await
        .ok()
        .json();
    net.gantry_without_key()
        .run(&["keys", "new", &file_text])
        .await
        .failed(2, "refusing to overwrite");
    let other = net
        .gantry_without_key()
        .run(&["keys", "show", "--identity", &file_text, "--json"])
        .await
        .ok()
        .json();
    assert_eq!(other["recipient"], made["recipient"]);
    assert_ne!(other["recipient"], shown["recipient"]);

    // Refused before anything is sent.
    let plain = b"rows of a private data set\n".repeat(1000);
    let data = net.dir().join("data.csv");
    std::fs::write(&data, &plain).unwrap();
    let secret = format!("data.csv={}", data.display());
    let nonce = net.nonce(SUBMITTER).await;
    for (flags, message) in [
        (
            vec!["--secret-input", &secret, "--duration", "1m"],
            "--secret-input: a job with encrypted inputs needs a maxRuntime of at least 5m",
        ),
        (
            vec!["--encrypt", "--verify", "refereed:3"],
            "--encrypt: a verified job cannot be encrypted",
        ),
        (
            vec!["--recipient", "age1notarecipient"],
            "--recipient: not an age X25519 recipient",
        ),
        (
            vec!["--secret-input", "data.csv=/no/such/file"],
            "--secret-input data.csv=/no/such/file",
        ),
    ] {
        let mut args = vec!["job", "submit", "--image", "busybox", "--bounty", "1"];
        args.extend(flags);
        gantry.run(&args).await.failed(2, message);
    }
    assert_eq!(net.nonce(SUBMITTER).await, nonce, "nothing was sent");
    // --recipient encrypts the result to someone else; the job key is still ours.
    let recipient = made["recipient"].as_str().unwrap();
    let dry = gantry
        .run(&[
            "job",
            "submit",
            "--image",
            "busybox",
            "--bounty",
            "1",
            "--recipient",
            recipient,
            "--dry-run",
            "--json",
        ])
        .await
        .ok()
        .json();
    assert_eq!(dry["spec"]["version"], 3);
    assert_eq!(dry["spec"]["encryption"]["recipient"], recipient);
    let salt = alloy::hex::decode(dry["spec"]["encryption"]["keySalt"].as_str().unwrap()).unwrap();
    assert_eq!(
        dry["spec"]["encryption"]["jobKey"],
        encryption::job_identity(&me, &salt).to_public().to_string()
    );

    // Posted: the input's ciphertext uploaded, the spec naming it.
    let posted = gantry
        .run(&[
            "job",
            "submit",
            "--image",
            "busybox",
            "--bounty",
            "1",
            "--secret-input",
            &secret,
            "--json",
            "--",
            "cat",
            "/inputs/data.csv",
        ])
        .await
        .ok()
        .json();
    let job = posted["jobId"].as_u64().unwrap();
    assert_eq!(posted["encryption"]["needsKeyRelease"], true);
    let spec = posted_spec(&net, job).await;
    assert_eq!(spec.version, 3);
    let encryption_spec = spec.encryption.clone().expect("encrypted");
    let salt = alloy::hex::decode(encryption_spec.key_salt.as_deref().unwrap()).unwrap();
    assert_eq!(salt.len(), 16);
    // The result goes to the job's own result key (derived, never released to a node),
    // not to the user's long-term identity.
    assert_eq!(
        encryption_spec.recipient,
        encryption::result_identity(&me, &salt)
            .to_public()
            .to_string()
    );
    let job_key = encryption::job_identity(&me, &salt);
    assert_eq!(
        encryption_spec.job_key.as_deref(),
        Some(job_key.to_public().to_string().as_str())
    );
    let input = &spec.inputs[0];
    assert!(input.encrypted);
    assert_eq!(input.path, "/inputs/data.csv");
    let inputs_bucket = names::inputs_bucket(chain_id);
    let key = input
        .uri
        .strip_prefix(&format!("nats://{inputs_bucket}/"))
        .expect("in the chain's inputs bucket");
    let stored = object(&net, &inputs_bucket, key).await;
    assert_ne!(stored, plain, "the ciphertext, not the file");
    assert!(!stored.windows(32).any(|w| w == &plain[..32]));
    assert_eq!(
        input.sha256.as_deref(),
        Some(alloy::hex::encode(encryption::sha256(&stored)).as_str())
    );
    let mut opened = Vec::new();
    encryption::decrypt(&job_key, &stored[..], &mut opened).unwrap();
    assert_eq!(opened, plain);
    assert!(
        encryption::decrypt(&me, &stored[..], &mut Vec::new()).is_err(),
        "only the job key reads the inputs"
    );

    // Watched and assigned: the key goes to the node that holds the attempt, asked for
    // by its agent, and to nobody else.
    let js = net.jetstream().await;
    let store = keys::open(&js, chain_id, 1).await.unwrap();
    api.caught_up(&net, 0).await;
    let id = job.to_string();
    let mut watch = gantry.spawn(&["job", "watch", &id, "--json", "--submitted"]);
    assert_eq!(watch.until(|_| true).await["status"], "open");
    net.assign(MATCHER, job, node).await;
    watch.until(|v| v["status"] == "assigned").await;
    let attempt = (job, 1, node);
    store
        .put(
            names::key_request(node, job, 1),
            request(&net, attempt, OTHER).into(),
        )
        .await
        .unwrap();
    let refused = watch.until(|v| v.get("released").is_some()).await;
    assert_eq!(refused["released"], false, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("not signed by"),
        "{refused}"
    );
    assert!(
        store
            .get(names::key_release(node, job, 1))
            .await
            .unwrap()
            .is_none(),
        "nothing released to a request the agent did not sign"
    );
    let at = Attempt {
        chain_id,
        market,
        job,
        attempt: 1,
        node,
        submitter: net.address(SUBMITTER),
    };
    let released = keys::obtain(
        &store,
        &at,
        |digest: &B256| agent.sign_hash_sync(digest),
        Duration::from_secs(30),
    )
    .await
    .expect("the watch releases the key to the node's agent");
    assert_eq!(released.to_public(), job_key.to_public());
    let line = watch.until(|v| v.get("released").is_some()).await;
    assert_eq!(
        line,
        serde_json::json!({"jobId": job, "attempt": 1, "nodeId": node, "released": true})
    );
    let mut opened = Vec::new();
    encryption::decrypt(&released, &stored[..], &mut opened).unwrap();
    assert_eq!(opened, plain, "the node reads its input");

    // The node's result: the tar encrypted to the submitter, its hash on chain, the
    // ciphertext's in the URI.
    let tar = result_tar();
    let mut sealed = Vec::new();
    encryption::encrypt(&encryption_spec.recipients(), &tar[..], &mut sealed).unwrap();
    let results = names::results_bucket(chain_id);
    gantry_runtime::objects::open(&js, &results, 1)
        .await
        .unwrap();
    let result_key = format!("{job}-1");
    gantry_runtime::objects::put(
        &js,
        &results,
        node,
        &result_key,
        Default::default(),
        &sealed[..],
    )
    .await
    .unwrap();
    let (plain_hash, sealed_hash) = (encryption::sha256(&tar), encryption::sha256(&sealed));
    let uri =
        encryption::with_ciphertext(&names::result_uri(chain_id, node, &result_key), sealed_hash);
    net.submit_result(NODES[1], job, plain_hash, &uri).await;
    let (code, rest) = watch.finished().await;
    assert_eq!(code, 0, "{rest:?}");
    assert_ne!(sealed, tar, "the stored result is not the plaintext tar");

    let out = net.dir().join("result");
    let fetched = gantry
        .run(&[
            "job",
            "result",
            &id,
            "-o",
            &out.display().to_string(),
            "--json",
        ])
        .await
        .ok()
        .json();
    assert_eq!(fetched["encrypted"], true);
    assert_eq!(fetched["sha256"], plain_hash.to_string());
    assert_eq!(fetched["bytes"], tar.len());
    assert_eq!(fetched["ciphertextSha256"], sealed_hash.to_string());
    assert_eq!(fetched["ciphertextChecked"], true);
    assert_eq!(
        std::fs::read(out.join("model.bin")).unwrap(),
        b"the secret model"
    );
    let again = net.dir().join("again");
    let text = gantry
        .run(&["job", "result", &id, "-o", &again.display().to_string()])
        .await
        .ok()
        .stdout;
    assert!(
        text.contains(&format!(
            "ciphertext sha256 {sealed_hash} (matches the result URI)"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("sha256 {plain_hash} (matches the chain)")),
        "{text}"
    );
    // Another identity is refused before the download; a tampered ciphertext after it.
    gantry
        .run(&[
            "job",
            "result",
            &id,
            "-o",
            &net.dir().join("x").display().to_string(),
            "--identity",
            &file_text,
        ])
        .await
        .failed(
            2,
            &format!(
                "job {job}'s result is encrypted to {}",
                encryption_spec.recipient
            ),
        );
    let mut tampered = sealed.clone();
    let middle = tampered.len() / 2;
    tampered[middle] ^= 1;
    gantry_runtime::objects::put(
        &js,
        &results,
        node,
        &result_key,
        Default::default(),
        &tampered[..],
    )
    .await
    .unwrap();
    let elsewhere = net.dir().join("tampered");
    gantry
        .run(&["job", "result", &id, "-o", &elsewhere.display().to_string()])
        .await
        .failed(
            6,
            &format!("the result URI's ciphertext-sha256 is {sealed_hash}: refusing it"),
        );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

    // `keys serve`: the node's request (kept in the bucket) is not answered again now that
    // the job is no longer assigned (its result is in), another account's job is silent,
    // a node that does not hold the attempt is refused; SIGTERM ends it.
    store
        .put(
            names::key_request(node, 999, 1),
            request(&net, (999, 1, node), NODES[1]).into(),
        )
        .await
        .unwrap();
    store
        .put(
            names::key_request(stranger, job, 1),
            request(&net, (job, 1, stranger), NODES[2]).into(),
        )
        .await
        .unwrap();
    let mut serve = gantry.spawn(&["keys", "serve", "--json"]);
    for who in [node, stranger] {
        let refused = serve.until(|_| true).await;
        assert_eq!(refused["released"], false, "{refused}");
        assert!(
            refused["error"].as_str().unwrap().contains(&format!(
                "node {who} does not hold attempt 1 of job {job} now"
            )),
            "job 999's request is silent: {refused}"
        );
    }
    serve.terminate().await;
    let (code, rest) = serve.finished().await;
    assert_eq!((code, rest.len()), (0, 0), "{rest:?}");
}
