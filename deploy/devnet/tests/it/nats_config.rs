//! The production NATS configuration in `deploy/nats/`, run by a real nats-server: each
//! service's user can make the JetStream calls that service makes (the same async-nats
//! calls with the same names and configs) and is refused, with a permissions violation,
//! what belongs to another; and the three-node cluster config keeps an R3 stream whole
//! through the loss of a node.

use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer, kv, object_store, stream};
use async_nats::{Client, Event, HeaderMap, ServerError};
use bytes::Bytes;
use futures::StreamExt;
use gantry_protocol::nats::NatsAddress;
use gantry_protocol::{names, storage};
use gantry_testkit::nats_cluster::{ConfiguredNats, NatsCluster, NatsConfig};
use tokio::io::AsyncReadExt;
use tokio::sync::{Mutex, mpsc};

const CHAIN: u64 = 31337;
/// How long a server-side refusal may take to reach the client.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(10);
/// The API timeout of the context used for calls that are expected to be refused: the
/// server drops a refused request without an answer, so the call ends by timing out.
const REFUSED_CALL_TIMEOUT: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_reaches_its_own_assignments_and_reports_and_nothing_of_other_nodes() {
    let config = NatsConfig::render("nats-server.conf", CHAIN, &[1, 2]).expect("render");
    let server = ConfiguredNats::start(&config).expect("nats-server starts with the config");

    // The indexer writes the chain: two jobs, one assigned to each node.
    let indexer = Session::open(&server, &config, "indexer").await;
    let chain = open_chain_stream(&indexer.js, 1).await;
    for (subject, payload) in [
        (names::event(CHAIN, "JobPosted", "7"), "spec of job 7"),
        (names::event(CHAIN, "JobPosted", "8"), "spec of job 8"),
        (names::assignments_of(CHAIN, 1), "job 7 to node 1"),
        (names::assignments_of(CHAIN, 2), "job 8 to node 2"),
    ] {
        publish_acked(&indexer.js, subject, payload).await;
    }
    let chain_last = stream_last(&chain).await;
    assert_eq!(chain_last, 4);

    // An operator puts a job input where workers may read nats:// inputs from.
    let admin = Session::open(&server, &config, "admin").await;
    let input = vec![7u8; 300_000];
    admin
        .js
        .create_object_store(object_store::Config {
            bucket: inputs_bucket(),
            ..Default::default()
        })
        .await
        .expect("admin creates the inputs bucket")
        .put("data.bin", &mut input.as_slice())
        .await
        .expect("admin puts an input");

    // The auth service makes what every worker writes, with the network's settings.
    let auth = Session::open(&server, &config, "auth").await;
    auth.js
        .get_or_create_stream(storage::jobs_stream(CHAIN, 1))
        .await
        .expect("the auth service makes the jobs stream");
    let (results, checkpoints) = (
        names::results_bucket(CHAIN),
        names::checkpoints_bucket(CHAIN),
    );
    for bucket in [&results, &checkpoints] {
        gantry_runtime::objects::open(&auth.js, bucket, 1)
            .await
            .expect("the auth service makes the bucket");
    }
    auth.assert_no_refusals("making the shared streams").await;

    // Worker 1 does what gantry-worker's start-up and one job do.
    let worker = Session::open(&server, &config, "worker-1").await;
    let chain_stream = worker
        .js
        .get_stream(names::stream_name(CHAIN))
        .await
        .expect("worker reads the chain stream's info");
    worker
        .js
        .get_or_create_stream(storage::jobs_stream(CHAIN, 1))
        .await
        .expect("worker opens the jobs stream");
    for bucket in [&results, &checkpoints] {
        gantry_runtime::objects::open(&worker.js, bucket, 1)
            .await
            .expect("worker opens the bucket");
    }

    let own = names::worker_consumer(CHAIN, 1);
    let assignments = chain_stream
        .get_or_create_consumer(&own, storage::assignment_consumer(CHAIN, 1))
        .await
        .expect("worker creates its own assignment consumer");
    let mut messages = assignments.messages().await.expect("pull");
    let assigned = next_message(&mut messages, "an assignment").await;
    assert_eq!(assigned.subject.as_str(), names::assignments_of(CHAIN, 1));
    assert_eq!(assigned.payload, "job 7 to node 1");
    assigned
        .ack_with(AckKind::Progress)
        .await
        .expect("in-progress ack");

    let spec = chain_stream
        .get_last_raw_message_by_subject(&names::event(CHAIN, "JobPosted", "7"))
        .await
        .expect("worker reads the spec by subject");
    assert_eq!(spec.payload, "spec of job 7");

    // Claim mode: its two consumers, one per event, read every posted job.
    for event in names::CLAIM_EVENTS {
        let name = names::claim_consumer(CHAIN, 1, event);
        let claims = chain_stream
            .get_or_create_consumer(&name, storage::claim_consumer(CHAIN, 1, event))
            .await
            .unwrap_or_else(|e| panic!("worker creates its claim consumer {name}: {e}"));
        if event == "JobPosted" {
            let mut posted = claims.messages().await.expect("pull");
            for expected in ["spec of job 7", "spec of job 8"] {
                let message = next_message(&mut posted, "a posted job").await;
                assert_eq!(message.payload, expected);
                message.ack().await.expect("acked");
            }
        }
    }

    let from_inputs = read_object(&worker.js, &inputs_bucket(), "data.bin").await;
    assert!(from_inputs == input, "the input read back whole");

    // Checkpoints under its own id (design 19, §2.1); a later one is the one read.
    let checkpoint_v1 = vec![1u8; 200_000];
    let checkpoint_v2 = vec![2u8; 250_000];
    for version in [&checkpoint_v1, &checkpoint_v2] {
        gantry_runtime::objects::put(
            &worker.js,
            &checkpoints,
            1,
            "7",
            Default::default(),
            version.as_slice(),
        )
        .await
        .expect("a checkpoint");
    }
    let restored = scoped_object(&worker.js, &checkpoints, 1, "7").await;
    assert!(
        restored == checkpoint_v2,
        "the latest checkpoint is restored"
    );
    // Not under node 2's id, nor where async-nats's own put writes, nor a purge or a
    // rollup of the bucket.
    worker
        .refused_call_prefix(
            gantry_runtime::objects::put(
                &worker.refusing_js,
                &checkpoints,
                2,
                "8",
                Default::default(),
                [0u8; 3].as_slice(),
            ),
            format!("$O.{checkpoints}.C.2."),
        )
        .await;
    worker
        .refused_stream_publish(&format!("$O.{checkpoints}.M.Nw=="))
        .await;
    worker
        .refused_publish(&format!("$JS.API.STREAM.PURGE.OBJ_{checkpoints}"), "{}")
        .await;

    // Large enough for the server to ask the reader for flow control.
    let result: Vec<u8> = (0..16_000_000u32).map(|i| (i % 251) as u8).collect();
    gantry_runtime::objects::put(
        &worker.js,
        &results,
        1,
        "7-1",
        Default::default(),
        result.as_slice(),
    )
    .await
    .expect("result uploaded");
    let downloaded = scoped_object(&worker.js, &results, 1, "7-1").await;
    assert!(downloaded == result, "the result downloads whole");
    // Not under another node's id, nor purged, nor rolled up.
    worker
        .refused_call_prefix(
            gantry_runtime::objects::put(
                &worker.refusing_js,
                &results,
                2,
                "8-1",
                Default::default(),
                [0u8; 3].as_slice(),
            ),
            format!("$O.{results}.C.2."),
        )
        .await;
    worker
        .refused_publish(&format!("$JS.API.STREAM.PURGE.OBJ_{results}"), "{}")
        .await;

    // Progress and log lines go out as plain publishes, the completion report through
    // JetStream (as job.rs sends them).
    for subject in [
        names::progress_subject(CHAIN, 1, 7),
        names::logs_subject(CHAIN, 1, 7),
    ] {
        worker
            .client
            .publish(subject, "line".into())
            .await
            .expect("publish");
    }
    publish_acked(&worker.js, names::completion_subject(CHAIN, 1, 7), "done").await;
    assigned
        .double_ack()
        .await
        .expect("the assignment acknowledged");
    worker.client.flush().await.expect("flush");
    worker.assert_no_refusals("a worker's own work").await;
    // Design 19, §2: not on another node's report subjects (the API would take a
    // report on node 2's subject as node 2's).
    for subject in [
        names::progress_subject(CHAIN, 2, 8),
        names::logs_subject(CHAIN, 2, 8),
    ] {
        worker.refused_publish(&subject, "{}").await;
    }
    worker
        .refused_stream_publish(&names::completion_subject(CHAIN, 2, 8))
        .await;

    // A submitter downloads the result, and can write nothing.
    let reader = Session::open(&server, &config, "reader").await;
    let fetched = scoped_object(&reader.js, &results, 1, "7-1").await;
    assert!(fetched == result, "the submitter reads the result");
    reader.assert_no_refusals("downloading a result").await;
    reader
        .refused_call_prefix(
            gantry_runtime::objects::put(
                &reader.refusing_js,
                &results,
                1,
                "7-1",
                Default::default(),
                [0u8; 3].as_slice(),
            ),
            format!("$O.{results}.C.1."),
        )
        .await;

    // What the API reads of the jobs stream is what the worker sent.
    let api = Session::open(&server, &config, "api").await;
    let reports = read_all(&api.js, &names::jobs_stream_name(CHAIN), 3).await;
    assert_eq!(
        reports,
        vec![
            names::progress_subject(CHAIN, 1, 7),
            names::logs_subject(CHAIN, 1, 7),
            names::completion_subject(CHAIN, 1, 7)
        ]
    );

    // Node 2's worker sets up its own consumer; worker 1 can neither create, read, ack nor
    // delete it, nor make a consumer of its own over node 2's assignments.
    let worker_2 = Session::open(&server, &config, "worker-2").await;
    let other = names::worker_consumer(CHAIN, 2);
    let node_2_consumer = worker_2
        .js
        .get_stream(names::stream_name(CHAIN))
        .await
        .expect("worker 2 reads the chain stream's info")
        .get_or_create_consumer(&other, storage::assignment_consumer(CHAIN, 2))
        .await
        .expect("worker 2 creates its own consumer");
    worker_2.assert_no_refusals("worker 2's own consumer").await;

    let refusing = worker.refusing_stream(&names::stream_name(CHAIN)).await;
    let stream_name = names::stream_name(CHAIN);
    let mut own_name_other_node = storage::assignment_consumer(CHAIN, 2);
    own_name_other_node.durable_name = Some(own.clone());
    let node_2_claims = names::claim_consumer(CHAIN, 2, "JobPosted");
    let own_claims = names::claim_consumer(CHAIN, 1, "JobPosted");
    let mut own_claims_other_event = storage::claim_consumer(CHAIN, 1, "JobPosted");
    own_claims_other_event.filter_subject = names::event_filter(CHAIN, "JobAssigned");
    // (the consumer asked for, the tail of its create subject): not node 2's consumer, nor
    // its own name over node 2's assignments; claim consumers: not node 2's, and not its
    // own over another event; nor one that reads everything.
    for (refused_consumer, subject_tail) in [
        (
            storage::assignment_consumer(CHAIN, 2),
            format!("{other}.{}", names::assignments_of(CHAIN, 2)),
        ),
        (
            own_name_other_node,
            format!("{own}.{}", names::assignments_of(CHAIN, 2)),
        ),
        (
            storage::claim_consumer(CHAIN, 2, "JobPosted"),
            format!(
                "{node_2_claims}.{}",
                names::event_filter(CHAIN, "JobPosted")
            ),
        ),
        (
            own_claims_other_event,
            format!("{own_claims}.{}", names::event_filter(CHAIN, "JobAssigned")),
        ),
        (
            consumer::pull::Config {
                name: Some("reads-everything".into()),
                ..Default::default()
            },
            "reads-everything".to_string(),
        ),
    ] {
        worker
            .refused_call(
                refusing.create_consumer(refused_consumer),
                format!("$JS.API.CONSUMER.CREATE.{stream_name}.{subject_tail}"),
            )
            .await;
    }
    worker
        .refused_call(
            refusing.delete_consumer(&other),
            format!("$JS.API.CONSUMER.DELETE.{stream_name}.{other}"),
        )
        .await;
    let next = format!("$JS.API.CONSUMER.MSG.NEXT.{stream_name}.{other}");
    worker
        .client
        .publish_with_reply(next.clone(), worker.client.new_inbox(), "1".into())
        .await
        .expect("publish");
    worker.refused("Publish", &next).await;
    let forged_ack = format!("$JS.ACK.{stream_name}.{other}.1.4.1.1700000000000000000.0");
    worker.refused_publish(&forged_ack, "+ACK").await;

    // The one create subject it may use names its own filter; a request through it that
    // asks for node 2's assignments is refused by nats-server itself.
    let own_create = format!(
        "$JS.API.CONSUMER.CREATE.{stream_name}.{own}.{}",
        names::assignments_of(CHAIN, 1)
    );
    let other_assignments = names::assignments_of(CHAIN, 2);
    // (what the body asks for, nats-server's refusal)
    for (smuggled, refusal) in [
        // JSConsumerCreateFilterSubjectMismatchErr
        (
            serde_json::json!({ "filter_subject": other_assignments }),
            10131,
        ),
        // JSConsumerMultipleFiltersNotAllowed
        (
            serde_json::json!({
                "filter_subjects": [names::assignments_of(CHAIN, 1), other_assignments]
            }),
            10137,
        ),
    ] {
        let mut config = serde_json::json!({
            "durable_name": own,
            "ack_policy": "explicit",
            "deliver_policy": "all",
        });
        config
            .as_object_mut()
            .unwrap()
            .extend(smuggled.as_object().unwrap().clone());
        let request = serde_json::json!({ "stream_name": stream_name, "config": config });
        let answer = worker
            .client
            .request(
                own_create.clone(),
                serde_json::to_vec(&request).unwrap().into(),
            )
            .await
            .expect("the server answers the create request");
        let answer: serde_json::Value = serde_json::from_slice(&answer.payload).expect("json");
        assert_eq!(
            answer["error"]["err_code"].as_u64(),
            Some(refusal),
            "a create asking for {smuggled} is refused: {answer}"
        );
    }
    let mut own_consumer = assignments.clone();
    let own_filter = own_consumer
        .info()
        .await
        .expect("consumer info")
        .config
        .filter_subject
        .clone();
    assert_eq!(
        own_filter,
        names::assignments_of(CHAIN, 1),
        "the consumer is unchanged"
    );

    // Nor write the chain, nor listen to it directly, nor write the inputs bucket.
    worker
        .refused_publish(&names::assignments_of(CHAIN, 1), "job 8 to node 1")
        .await;
    worker
        .refused_stream_publish(&names::block_commit(CHAIN, 99))
        .await;
    let chain_subjects = names::stream_subjects(CHAIN);
    let _subscription = worker
        .client
        .subscribe(chain_subjects.clone())
        .await
        .expect("subscribe");
    worker.refused("Subscription", &chain_subjects).await;
    // Replies are per user: not the shared inbox, nor another user's.
    for inbox in [
        "_INBOX.>".to_string(),
        format!("{}.>", gantry_protocol::nats::inbox_prefix("worker-2")),
        format!("{}.>", gantry_protocol::nats::inbox_prefix("api")),
    ] {
        let _subscription = worker
            .client
            .subscribe(inbox.clone())
            .await
            .expect("subscribe");
        worker.refused("Subscription", &inbox).await;
    }
    let refusing_inputs = worker
        .refusing_js
        .get_object_store(inputs_bucket())
        .await
        .expect("the inputs bucket is readable");
    worker
        .refused_call_prefix(
            refusing_inputs.put("planted.bin", &mut [1u8, 2, 3].as_slice()),
            format!("$O.{}.C.", inputs_bucket()),
        )
        .await;

    // Nothing reached the chain, and node 2's assignment waits for node 2.
    assert_eq!(
        stream_last(&chain).await,
        chain_last,
        "the chain stream is unchanged"
    );
    let mut node_2_messages = node_2_consumer.messages().await.expect("pull");
    let node_2_assigned = next_message(&mut node_2_messages, "node 2's assignment").await;
    assert_eq!(
        node_2_assigned.subject.as_str(),
        names::assignments_of(CHAIN, 2)
    );
    assert_eq!(
        node_2_assigned
            .info()
            .expect("a JetStream message")
            .delivered,
        1,
        "node 2's assignment was never delivered to anyone else"
    );
    node_2_assigned.double_ack().await.expect("ack");
    worker_2
        .assert_no_refusals("worker 2 consuming its assignment")
        .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn indexer_alone_writes_the_chain_and_each_service_keeps_to_its_own_state() {
    let config = NatsConfig::render("nats-server.conf", CHAIN, &[1]).expect("render");
    let server = ConfiguredNats::start(&config).expect("nats-server starts with the config");

    // The indexer: its writer lease, the stream, exactly-once appends, the tail reads.
    let indexer = Session::open(&server, &config, "indexer").await;
    let lease = lease_bucket(&indexer, names::INDEXER_LEASE_BUCKET, 1, "the indexer").await;
    let lease_key = format!("chain-{CHAIN}");
    take_and_renew(&lease, &lease_key, "indexer-a").await;
    let chain = open_chain_stream(&indexer.js, 1).await;
    let events = [
        names::event(CHAIN, "JobPosted", "7"),
        names::event(CHAIN, "JobRequeued", "7"),
        names::block_commit(CHAIN, 10),
        names::retraction(CHAIN),
        names::event(CHAIN, "JobPosted", "8"),
        names::block_commit(CHAIN, 11),
        names::finality(CHAIN),
    ];
    for (i, subject) in events.iter().enumerate() {
        let sequence = i as u64 + 1;
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", names::message_id(CHAIN, sequence).as_str());
        headers.insert(
            "Nats-Expected-Last-Sequence",
            (sequence - 1).to_string().as_str(),
        );
        indexer
            .js
            .publish_with_headers(subject.clone(), headers, "{}".into())
            .await
            .expect("publish")
            .await
            .expect("the indexer's append is acknowledged");
    }
    let commit = chain
        .get_last_raw_message_by_subject(&names::block_commits(CHAIN))
        .await
        .expect("the last commit");
    assert_eq!(commit.sequence, 6);
    chain
        .get_raw_message(5)
        .await
        .expect("a message by sequence");
    lease
        .delete_expect_revision(&lease_key, None)
        .await
        .expect("lease released");
    // A standby takes the released lease (over the delete marker, which it reads first).
    lease
        .create(&lease_key, "indexer-b".into())
        .await
        .expect("the standby takes the released lease");
    indexer.assert_no_refusals("the indexer's work").await;

    // The matcher: its feed, the shared claims consumer, the explanations bucket.
    let matcher = Session::open(&server, &config, "matcher").await;
    let feed = read_all_filtered(&matcher.js, &names::stream_name(CHAIN), events.len()).await;
    assert_eq!(feed, events);
    let claims = matcher
        .js
        .get_stream(names::stream_name(CHAIN))
        .await
        .expect("chain stream info")
        .get_or_create_consumer(
            &names::matcher_consumer(CHAIN),
            consumer::pull::Config {
                durable_name: Some(names::matcher_consumer(CHAIN)),
                filter_subjects: vec![
                    names::event_filter(CHAIN, "JobPosted"),
                    names::event_filter(CHAIN, "JobRequeued"),
                ],
                deliver_policy: consumer::DeliverPolicy::All,
                ack_policy: consumer::AckPolicy::Explicit,
                ack_wait: Duration::from_secs(30),
                max_deliver: -1,
                ..Default::default()
            },
        )
        .await
        .expect("matcher creates the claims consumer");
    let mut claimed = claims.messages().await.expect("pull");
    let claim = next_message(&mut claimed, "a claim").await;
    assert_eq!(
        claim.subject.as_str(),
        names::event(CHAIN, "JobPosted", "7")
    );
    claim.ack_with(AckKind::Progress).await.expect("renewed");
    claim.double_ack().await.expect("claim settled");
    let pending_bucket = names::pending_bucket(CHAIN);
    assert!(
        matcher.js.get_key_value(&pending_bucket).await.is_err(),
        "no explanations bucket yet"
    );
    let explanations = matcher
        .js
        .create_key_value(storage::pending_bucket(CHAIN, 1))
        .await
        .expect("matcher creates the explanations bucket");
    explanations
        .put("7", r#"{"reason":"no node"}"#.into())
        .await
        .expect("explanation written");
    explanations.put("8", "{}".into()).await.expect("written");
    explanations.delete("8").await.expect("explanation deleted");
    matcher.assert_no_refusals("the matcher's work").await;

    // The keeper: its lease and its feed.
    let liveness = Session::open(&server, &config, "liveness").await;
    assert!(
        liveness
            .js
            .get_key_value("gantry_liveness_lease")
            .await
            .is_err(),
        "no keeper lease bucket yet"
    );
    let keeper_lease = lease_bucket(&liveness, names::LIVENESS_LEASE_BUCKET, 1, "liveness").await;
    take_and_renew(&keeper_lease, &lease_key, "keeper-a").await;
    assert_eq!(
        keeper_lease.get(&lease_key).await.expect("get"),
        Some(Bytes::from("keeper-a"))
    );
    let feed = read_all_filtered(&liveness.js, &names::stream_name(CHAIN), events.len()).await;
    assert_eq!(feed, events);
    // Why a waiting verified job waits, beside the matcher's explanations.
    let keeper_explanations = liveness
        .js
        .get_key_value(&pending_bucket)
        .await
        .expect("the keeper opens the explanations bucket");
    keeper_explanations
        .put("9", r#"{"summary":"commit phase"}"#.into())
        .await
        .expect("the keeper writes an explanation");
    keeper_explanations
        .delete("9")
        .await
        .expect("and deletes it once decided");
    liveness.assert_no_refusals("the keeper's work").await;

    // Each writes and reads its own view snapshots, checked against the chain stream's
    // commit by sequence, and cannot touch the other's.
    for (session, service, other) in [
        (&matcher, "matcher", "liveness"),
        (&liveness, "liveness", "matcher"),
    ] {
        let bucket = names::snapshots_bucket(CHAIN, service);
        let store = session
            .js
            .create_object_store(object_store::Config {
                bucket: bucket.clone(),
                ..Default::default()
            })
            .await
            .expect("the service makes its snapshots bucket");
        for version in ["first", "second"] {
            store
                .put("0xabc", &mut version.as_bytes())
                .await
                .expect("a snapshot written over the last");
        }
        let mut read = Vec::new();
        store
            .get("0xabc")
            .await
            .expect("the snapshot")
            .read_to_end(&mut read)
            .await
            .expect("read");
        assert_eq!(read, b"second");
        session
            .js
            .get_stream_no_info(names::stream_name(CHAIN))
            .await
            .expect("the chain stream")
            .get_raw_message(6)
            .await
            .expect("the commit a snapshot stands at, by sequence");
        session.assert_no_refusals("the service's snapshots").await;
        session
            .refused_publish(
                &format!("$O.{}.M.x", names::snapshots_bucket(CHAIN, other)),
                "{}",
            )
            .await;
    }

    // The API: both streams from a checkpoint, an explanation, the stream's tail.
    let api = Session::open(&server, &config, "api").await;
    let auth = Session::open(&server, &config, "auth").await;
    auth.js
        .get_or_create_stream(storage::jobs_stream(CHAIN, 1))
        .await
        .expect("the auth service makes the jobs stream");
    let worker = Session::open(&server, &config, "worker-1").await;
    publish_acked(&worker.js, names::completion_subject(CHAIN, 1, 7), "done").await;
    let projected = read_all(&api.js, &names::stream_name(CHAIN), events.len()).await;
    assert_eq!(projected, events);
    let reports = read_all(&api.js, &names::jobs_stream_name(CHAIN), 1).await;
    assert_eq!(reports, vec![names::completion_subject(CHAIN, 1, 7)]);
    let pending = api
        .js
        .get_key_value(&pending_bucket)
        .await
        .expect("api opens the explanations");
    assert_eq!(
        pending.get("7").await.expect("get"),
        Some(Bytes::from(r#"{"reason":"no node"}"#))
    );
    let tail = api
        .js
        .get_stream(names::stream_name(CHAIN))
        .await
        .expect("readiness reads the stream's tail");
    assert_eq!(tail.cached_info().state.last_sequence, events.len() as u64);
    tail.get_raw_message(6)
        .await
        .expect("the commit the stored projection stands at, by sequence");
    api.assert_no_refusals("the API's reads").await;

    // Only the indexer writes chain subjects; each service writes only its own state.
    for reader in [&matcher, &liveness, &api] {
        reader
            .refused_publish(&names::event(CHAIN, "JobAssigned", "1"), "{}")
            .await;
        reader
            .refused_stream_publish(&names::block_commit(CHAIN, 12))
            .await;
    }
    let refusing_pending = api
        .refusing_js
        .get_key_value(&pending_bucket)
        .await
        .expect("api opens the explanations");
    api.refused_call(
        refusing_pending.put("9", "{}".into()),
        format!("$KV.{pending_bucket}.9"),
    )
    .await;
    api.refused_publish(&names::progress_subject(CHAIN, 1, 7), "{}")
        .await;
    api.refused_publish(
        &format!("$O.{}.M.x", names::snapshots_bucket(CHAIN, "matcher")),
        "{}",
    )
    .await;
    let refusing_lease = liveness
        .refusing_js
        .get_key_value("gantry_indexer_lease")
        .await;
    assert!(
        refusing_lease.is_err(),
        "the keeper cannot even open the indexer's lease"
    );
    liveness
        .refused("Publish", "$JS.API.STREAM.INFO.KV_gantry_indexer_lease")
        .await;
    indexer
        .refused_publish(&names::progress_subject(CHAIN, 1, 7), "{}")
        .await;

    assert_eq!(
        stream_last(&chain).await,
        events.len() as u64,
        "no forged message reached the chain stream"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cluster_keeps_an_r3_stream_whole_when_its_leader_is_killed() {
    let config = NatsConfig::render("cluster.conf", CHAIN, &[1]).expect("render");
    let mut cluster =
        tokio::task::block_in_place(|| NatsCluster::start(&config)).expect("three nodes start");

    // The writer connects to one node, as a service does with one URL, and creates the
    // chain stream with three replicas.
    let bootstrap = Session::open(&cluster.nodes()[0], &config, "indexer").await;
    let chain = open_chain_stream(&bootstrap.js, 3).await;
    let leader = wait_for_replicas(&chain, 3).await;
    create_every_service_state(&cluster, &config, 3).await;
    let (leader_url, leader_name) = {
        let node = cluster
            .nodes()
            .iter()
            .find(|node| node.name() == leader)
            .expect("the leader is a cluster node");
        (node.url(), node.name().to_string())
    };
    drop(bootstrap);
    // Connected to the leader itself, so that killing it also costs the client its server:
    // it must find the others from what the cluster told it.
    let indexer = Session::open_url(&leader_url, &config, "indexer").await;
    let api = Session::open(
        cluster
            .nodes()
            .iter()
            .find(|node| node.name() != leader_name)
            .expect("another node"),
        &config,
        "api",
    )
    .await;

    const BEFORE: u64 = 100;
    const AFTER: u64 = 100;
    for n in 1..=BEFORE {
        append(&indexer.js, n).await;
    }
    tokio::task::block_in_place(|| cluster.node_mut(&leader_name).expect("leader node").kill());

    // Publishing goes on once the two others elect a new leader; retries of an append are
    // de-duplicated by its message id.
    for n in BEFORE + 1..=BEFORE + AFTER {
        append(&indexer.js, n).await;
    }
    // Creating a consumer needs the JetStream meta leader, which may have been the killed
    // node too: the survivors report healthy once one of them leads.
    let stream = chain_stream_once_healthy(&cluster, &api, "the two survivors are healthy").await;
    let info = stream.cached_info();
    assert_eq!(
        info.state.messages,
        BEFORE + AFTER,
        "nothing lost, nothing twice"
    );
    let new_leader = info
        .cluster
        .as_ref()
        .and_then(|c| c.leader.clone())
        .expect("a leader");
    assert_ne!(new_leader, leader_name, "a surviving node leads");
    let payloads = read_payloads(&api.js, &names::stream_name(CHAIN), BEFORE + AFTER).await;
    let expected: Vec<String> = (1..=BEFORE + AFTER).map(|n| format!("event {n}")).collect();
    assert_eq!(payloads, expected, "every message, in order");

    // The killed node comes back and catches up.
    tokio::task::block_in_place(|| {
        let node = cluster.node_mut(&leader_name).expect("leader node");
        node.restart()
    })
    .expect("the killed node restarts");
    let stream = chain_stream_once_healthy(&cluster, &api, "the cluster is healthy again").await;
    wait_for_replicas(&stream, 3).await;
    api.assert_no_refusals("the API reading the cluster").await;
    indexer
        .assert_no_refusals("the indexer writing to the cluster")
        .await;
}

/// Waits until `cluster` reports healthy (`what`), then reads the chain stream's info as
/// `session`.
async fn chain_stream_once_healthy(
    cluster: &NatsCluster,
    session: &Session,
    what: &str,
) -> stream::Stream {
    tokio::task::block_in_place(|| cluster.wait_healthy(Duration::from_secs(30)))
        .unwrap_or_else(|e| panic!("{what}: {e:?}"));
    session
        .js
        .get_stream(names::stream_name(CHAIN))
        .await
        .unwrap_or_else(|e| panic!("stream info once {what}: {e}"))
}

/// One user's connection, recording the permission violations the server reports on it.
/// Design 18, §6 and design 19, §2.1: a refereed provider puts its sealed outcome and
/// the seal's opening under its own id in the bucket of sealed results (which the auth
/// service makes: not a worker) and reads nothing back; a referee (any other worker) can
/// neither read the provider's objects (nor their metadata, which names the digest) nor
/// write under its id; the submitters' reader reads both objects whole, with one grant
/// for every node.
#[tokio::test(flavor = "multi_thread")]
async fn verification_a_referee_cannot_read_the_providers_result() {
    let config = NatsConfig::render("nats-server.conf", CHAIN, &[1, 2]).expect("render");
    let server = ConfiguredNats::start(&config).expect("nats-server starts with the config");
    let sealed = names::sealed_bucket(CHAIN);
    // Several chunks: the put is the one a provider makes.
    let tar: Vec<u8> = (0..400_000u32).map(|i| (i % 253) as u8).collect();
    let opening = br#"{"node":1,"digest":"0x01","salt":"0x02"}"#.to_vec();

    // The provider may not create the bucket (a creator sets the whole stream config: one
    // sourcing the bucket and republishing it would read it); the auth service does.
    let provider = Session::open(&server, &config, "worker-1").await;
    provider
        .refused_call(
            provider
                .refusing_js
                .create_stream(gantry_runtime::objects::stream_config(&sealed, 1)),
            format!("$JS.API.STREAM.CREATE.OBJ_{sealed}"),
        )
        .await;
    let auth = Session::open(&server, &config, "auth").await;
    gantry_runtime::objects::open(&auth.js, &sealed, 1)
        .await
        .expect("the auth service makes the bucket");
    for (key, bytes) in [
        (names::provider_result_key(7), &tar),
        (names::provider_seal_key(7), &opening),
    ] {
        let put = gantry_runtime::objects::put(
            &provider.js,
            &sealed,
            1,
            &key,
            Default::default(),
            bytes.as_slice(),
        )
        .await
        .unwrap_or_else(|e| panic!("the provider puts {key}: {e}"));
        assert_eq!(put.size, bytes.len() as u64);
    }
    provider.assert_no_refusals("putting a sealed result").await;
    // Not even the provider reads it back (its metadata carries the digest).
    provider
        .refused_call_prefix(
            gantry_runtime::objects::get(
                &provider.refusing_js,
                &sealed,
                1,
                &names::provider_result_key(7),
            ),
            format!("$JS.API.DIRECT.GET.OBJ_{sealed}"),
        )
        .await;

    // A referee: nothing of the provider's objects, and no write under its id.
    let referee = Session::open(&server, &config, "worker-2").await;
    referee
        .refused_call_prefix(
            gantry_runtime::objects::get(
                &referee.refusing_js,
                &sealed,
                1,
                &names::provider_result_key(7),
            ),
            format!("$JS.API.DIRECT.GET.OBJ_{sealed}"),
        )
        .await;
    referee
        .refused_call_prefix(
            gantry_runtime::objects::put(
                &referee.refusing_js,
                &sealed,
                1,
                &names::provider_result_key(7),
                Default::default(),
                [0u8; 3].as_slice(),
            ),
            format!("$O.{sealed}.C.1."),
        )
        .await;

    // The submitter reads both, whole.
    let reader = Session::open(&server, &config, "reader").await;
    assert!(scoped_object(&reader.js, &sealed, 1, &names::provider_result_key(7)).await == tar);
    assert_eq!(
        scoped_object(&reader.js, &sealed, 1, &names::provider_seal_key(7)).await,
        opening
    );
    reader.assert_no_refusals("reading a sealed result").await;
}

pub(crate) struct Session {
    pub(crate) client: Client,
    pub(crate) js: jetstream::Context,
    /// For calls that are expected to be refused: the server drops them, so they time out.
    pub(crate) refusing_js: jetstream::Context,
    violations: Mutex<mpsc::UnboundedReceiver<String>>,
}

impl Session {
    pub(crate) async fn open(server: &ConfiguredNats, config: &NatsConfig, user: &str) -> Self {
        Self::open_url(&server.url(), config, user).await
    }

    async fn open_url(url: &str, config: &NatsConfig, user: &str) -> Self {
        // As the services connect: the user and password in the URL, split off by
        // NatsAddress into connect options with the user's own inbox prefix.
        let address = NatsAddress::parse(&url.replacen(
            "nats://",
            &format!("nats://{user}:{}@", config.password(user)),
            1,
        ));
        Self::connect(&address.servers, address.connect_options())
            .await
            .unwrap_or_else(|e| panic!("{user} connects to {url}: {e}"))
    }

    /// Connects with `options` to `servers`, recording the permission violations.
    pub(crate) async fn connect(
        servers: &str,
        options: async_nats::ConnectOptions,
    ) -> Result<Self, async_nats::ConnectError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let client = options
            .event_callback(move |event| {
                let tx = tx.clone();
                async move {
                    if let Event::ServerError(ServerError::Other(message)) = event {
                        let _ = tx.send(message);
                    }
                }
            })
            .connect(servers)
            .await?;
        Ok(Self {
            js: jetstream::new(client.clone()),
            refusing_js: jetstream::ContextBuilder::new()
                .timeout(REFUSED_CALL_TIMEOUT)
                .ack_timeout(REFUSED_CALL_TIMEOUT)
                .build(client.clone()),
            client,
            violations: Mutex::new(rx),
        })
    }

    /// Waits for the server's "Permissions Violation for <kind> to <subject>".
    pub(crate) async fn refused(&self, kind: &str, subject: &str) {
        self.refused_matching(kind, |s| s == subject, subject).await;
    }

    pub(crate) async fn refused_matching(
        &self,
        kind: &str,
        matches: impl Fn(&str) -> bool,
        what: &str,
    ) {
        let prefix = format!("Permissions Violation for {kind} to ");
        let wait = async {
            let mut violations = self.violations.lock().await;
            // Refusals of earlier calls may come first: skipped.
            while let Some(message) = violations.recv().await {
                let refused = message
                    .strip_prefix(&prefix)
                    .map(|quoted| quoted.trim_matches('"'));
                if refused.is_some_and(&matches) {
                    return;
                }
            }
        };
        tokio::time::timeout(REFUSAL_TIMEOUT, wait)
            .await
            .unwrap_or_else(|_| panic!("no permissions violation for {kind} to {what}"));
    }

    /// Runs `call`, which must fail, and waits for the refusal of its publish to `subject`.
    pub(crate) async fn refused_call<T, E: std::fmt::Debug>(
        &self,
        call: impl std::future::Future<Output = Result<T, E>>,
        subject: String,
    ) {
        let (outcome, ()) = tokio::join!(call, self.refused("Publish", &subject));
        assert!(outcome.is_err(), "a refused call to {subject} fails");
    }

    /// As [`Self::refused_call`], for a subject known by its prefix (object chunks).
    pub(crate) async fn refused_call_prefix<T, E: std::fmt::Debug>(
        &self,
        call: impl std::future::Future<Output = Result<T, E>>,
        prefix: String,
    ) {
        let (outcome, ()) = tokio::join!(
            call,
            self.refused_matching("Publish", |s| s.starts_with(&prefix), &prefix)
        );
        assert!(outcome.is_err(), "a refused call to {prefix}… fails");
    }

    /// Publishes `payload` to `subject` (core NATS) and waits for the refusal.
    pub(crate) async fn refused_publish(&self, subject: &str, payload: &'static str) {
        self.client
            .publish(subject.to_owned(), payload.into())
            .await
            .expect("publish");
        self.refused("Publish", subject).await;
    }

    /// Publishes to `subject` through JetStream, which must fail, and waits for the refusal.
    pub(crate) async fn refused_stream_publish(&self, subject: &str) {
        self.refused_call(
            async {
                self.refusing_js
                    .publish(subject.to_owned(), "{}".into())
                    .await?
                    .await
            },
            subject.to_owned(),
        )
        .await;
    }

    /// A stream handle whose calls give up after [`REFUSED_CALL_TIMEOUT`].
    pub(crate) async fn refusing_stream(&self, name: &str) -> stream::Stream {
        self.refusing_js
            .get_stream(name)
            .await
            .expect("stream info")
    }

    /// Fails if the server refused anything on this connection so far.
    pub(crate) async fn assert_no_refusals(&self, doing: &str) {
        // A refusal comes back before the answer to a later ping.
        self.client.flush().await.expect("flush");
        let mut violations = self.violations.lock().await;
        let mut refused = Vec::new();
        while let Ok(message) = violations.try_recv() {
            refused.push(message);
        }
        assert!(refused.is_empty(), "{doing} was refused: {refused:?}");
    }
}

/// What every service creates at start, as its own user, with `replicas` (as started with
/// `--nats-replicas`): each stream and bucket then has that many current replicas.
async fn create_every_service_state(cluster: &NatsCluster, config: &NatsConfig, replicas: usize) {
    let node = &cluster.nodes()[0];
    let ttl = Duration::from_secs(3);
    // (user, who, its bucket): the indexer's and the keeper's leases, the matcher's
    // explanations.
    let mut services = Vec::new();
    let mut stream_names = Vec::new();
    for (user, who, bucket) in [
        (
            "indexer",
            "the indexer",
            storage::lease_bucket(names::INDEXER_LEASE_BUCKET, ttl, replicas),
        ),
        (
            "matcher",
            "the matcher",
            storage::pending_bucket(CHAIN, replicas),
        ),
        (
            "liveness",
            "liveness",
            storage::lease_bucket(names::LIVENESS_LEASE_BUCKET, ttl, replicas),
        ),
    ] {
        let session = Session::open(node, config, user).await;
        let store = session
            .js
            .create_key_value(bucket)
            .await
            .unwrap_or_else(|e| panic!("{who} creates its bucket: {e}"));
        stream_names.push(store.stream_name.clone());
        services.push((session, who));
    }
    // The auth service makes what every worker writes.
    let auth = Session::open(node, config, "auth").await;
    let jobs_stream = auth
        .js
        .get_or_create_stream(storage::jobs_stream(CHAIN, replicas))
        .await
        .expect("the auth service makes the jobs stream");
    for bucket in [
        names::results_bucket(CHAIN),
        names::checkpoints_bucket(CHAIN),
        names::sealed_bucket(CHAIN),
    ] {
        gantry_runtime::objects::open(&auth.js, &bucket, replicas)
            .await
            .expect("the auth service makes the bucket");
    }

    let admin = Session::open(node, config, "admin").await;
    stream_names.extend([
        jobs_stream.cached_info().config.name.clone(),
        format!("OBJ_{}", names::results_bucket(CHAIN)),
        format!("OBJ_{}", names::checkpoints_bucket(CHAIN)),
        format!("OBJ_{}", names::sealed_bucket(CHAIN)),
    ]);
    for name in stream_names {
        let stream = admin
            .js
            .get_stream(&name)
            .await
            .unwrap_or_else(|e| panic!("stream {name}: {e}"));
        assert_eq!(stream.cached_info().config.num_replicas, replicas, "{name}");
        wait_for_replicas(&stream, replicas).await;
    }
    services.push((auth, "the auth service"));
    for (session, who) in &services {
        session.assert_no_refusals(who).await;
    }
}

/// A service's lease bucket (3 s TTL) as `who` creates it at start.
async fn lease_bucket(session: &Session, bucket: &str, replicas: usize, who: &str) -> kv::Store {
    session
        .js
        .create_key_value(storage::lease_bucket(
            bucket,
            Duration::from_secs(3),
            replicas,
        ))
        .await
        .unwrap_or_else(|e| panic!("{who} creates its lease bucket: {e}"))
}

/// Takes the lease `key` for `holder` and renews it once, as a lease holder does.
async fn take_and_renew(lease: &kv::Store, key: &str, holder: &'static str) {
    let revision = lease.create(key, holder.into()).await.expect("lease taken");
    lease
        .update(key, holder.into(), revision)
        .await
        .expect("lease renewed");
}

/// The next message of a consumer, within 10 s.
async fn next_message<E: std::fmt::Debug>(
    messages: &mut (impl futures::Stream<Item = Result<jetstream::Message, E>> + Unpin),
    what: &str,
) -> jetstream::Message {
    tokio::time::timeout(Duration::from_secs(10), messages.next())
        .await
        .unwrap_or_else(|_| panic!("{what} within 10 s"))
        .expect("the consumer goes on")
        .expect("a message")
}

/// The chain stream as the indexer opens it, with `replicas`.
async fn open_chain_stream(js: &jetstream::Context, replicas: usize) -> stream::Stream {
    js.get_or_create_stream(storage::chain_stream(CHAIN, replicas))
        .await
        .expect("the indexer opens the chain stream")
}

/// An object store as `worker/src/store.rs::bucket` opens it: existing, else created.
/// Node `node`'s object `key` of the node-scoped `bucket`, whole.
async fn scoped_object(js: &jetstream::Context, bucket: &str, node: u64, key: &str) -> Vec<u8> {
    let object = gantry_runtime::objects::get(js, bucket, node, key)
        .await
        .unwrap_or_else(|e| panic!("{bucket}/{node}/{key}: {e}"))
        .unwrap_or_else(|| panic!("{bucket}/{node}/{key} is there"));
    let chunks: Vec<_> = object.bytes(u64::MAX).collect().await;
    chunks
        .into_iter()
        .flat_map(|chunk| chunk.expect("the object's bytes").to_vec())
        .collect()
}

fn inputs_bucket() -> String {
    format!("gantry_{CHAIN}_inputs")
}

/// Reads object `key` of `bucket` whole, as the worker's downloads and nats:// inputs do.
async fn read_object(js: &jetstream::Context, bucket: &str, key: &str) -> Vec<u8> {
    let store = js
        .get_object_store(bucket)
        .await
        .unwrap_or_else(|e| panic!("open {bucket}: {e}"));
    let mut object = store
        .get(key)
        .await
        .unwrap_or_else(|e| panic!("get {bucket}/{key}: {e}"));
    let mut bytes = Vec::new();
    // A read the server stops feeding (a refused flow-control reply) would wait forever.
    tokio::time::timeout(Duration::from_secs(30), object.read_to_end(&mut bytes))
        .await
        .unwrap_or_else(|_| panic!("{bucket}/{key} not read within 30 s"))
        .unwrap_or_else(|e| panic!("read {bucket}/{key}: {e}"));
    bytes
}

async fn publish_acked(js: &jetstream::Context, subject: String, payload: &'static str) {
    js.publish(subject.clone(), payload.into())
        .await
        .unwrap_or_else(|e| panic!("publish {subject}: {e}"))
        .await
        .unwrap_or_else(|e| panic!("ack of {subject}: {e}"));
}

async fn stream_last(stream: &stream::Stream) -> u64 {
    let mut stream = stream.clone();
    stream
        .info()
        .await
        .expect("stream info")
        .state
        .last_sequence
}

/// The subjects of the first `count` messages of `stream`, through an ordered consumer
/// from a start sequence with no filter (as the API projects).
async fn read_all(js: &jetstream::Context, stream: &str, count: usize) -> Vec<String> {
    let config = consumer::pull::OrderedConfig {
        deliver_policy: consumer::DeliverPolicy::ByStartSequence { start_sequence: 1 },
        ..Default::default()
    };
    read_subjects(js, stream, config, count).await
}

/// The same through an ordered consumer filtered to the whole chain (as the matcher's and
/// keeper's feed replays it).
async fn read_all_filtered(js: &jetstream::Context, stream: &str, count: usize) -> Vec<String> {
    let config = consumer::pull::OrderedConfig {
        filter_subject: names::stream_subjects(CHAIN),
        deliver_policy: consumer::DeliverPolicy::All,
        ..Default::default()
    };
    read_subjects(js, stream, config, count).await
}

async fn read_subjects(
    js: &jetstream::Context,
    stream: &str,
    config: consumer::pull::OrderedConfig,
    count: usize,
) -> Vec<String> {
    read_ordered(js, stream, config, count as u64)
        .await
        .into_iter()
        .map(|m| m.subject.to_string())
        .collect()
}

async fn read_payloads(js: &jetstream::Context, stream: &str, count: u64) -> Vec<String> {
    let config = consumer::pull::OrderedConfig {
        deliver_policy: consumer::DeliverPolicy::All,
        ..Default::default()
    };
    read_ordered(js, stream, config, count)
        .await
        .into_iter()
        .map(|m| String::from_utf8_lossy(&m.payload).into_owned())
        .collect()
}

async fn read_ordered(
    js: &jetstream::Context,
    stream: &str,
    config: consumer::pull::OrderedConfig,
    count: u64,
) -> Vec<async_nats::Message> {
    let mut messages = js
        .get_stream(stream)
        .await
        .unwrap_or_else(|e| panic!("stream {stream}: {e}"))
        .create_consumer(config)
        .await
        .unwrap_or_else(|e| panic!("ordered consumer on {stream}: {e}"))
        .messages()
        .await
        .expect("messages");
    let mut read = Vec::new();
    while (read.len() as u64) < count {
        let what = format!("{} of {count} messages of {stream}", read.len());
        read.push(next_message(&mut messages, &what).await.message);
    }
    read
}

/// Appends `event <n>` as the indexer does (its message id and expected last sequence),
/// retrying through a leader election for up to 30 s.
async fn append(js: &jetstream::Context, n: u64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", names::message_id(CHAIN, n).as_str());
        headers.insert("Nats-Expected-Last-Sequence", (n - 1).to_string().as_str());
        let acked = async {
            js.publish_with_headers(
                names::event(CHAIN, "JobPosted", &n.to_string()),
                headers,
                format!("event {n}").into(),
            )
            .await?
            .await
            .map_err(async_nats::Error::from)
        };
        match tokio::time::timeout(Duration::from_secs(5), acked).await {
            Ok(Ok(ack)) => {
                assert_eq!(ack.sequence, n, "event {n} at its own sequence");
                return;
            }
            outcome => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "event {n} not appended within 30 s: {outcome:?}"
                );
                // Election under way: the next try goes to whoever leads by then.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Waits until the stream reports `replicas` members, all current; returns the leader.
async fn wait_for_replicas(stream: &stream::Stream, replicas: usize) -> String {
    let mut stream = stream.clone();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(info) = stream.info().await
            && let Some(cluster) = &info.cluster
            && let Some(leader) = &cluster.leader
            && cluster.replicas.len() + 1 == replicas
            && cluster.replicas.iter().all(|r| r.current)
        {
            return leader.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stream has not {replicas} current replicas after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Design 19, §2.1, as a node that held a job would try it on the next holder's resume:
/// metadata under its own id that names chunks beyond its own object (a wildcard nuid,
/// another node's), more chunks than its size, or fewer bytes than it says, is refused or
/// ends the read with an error, never a wait without end.
#[tokio::test(flavor = "multi_thread")]
async fn checkpoint_a_holders_lying_metadata_is_refused_and_never_hangs_the_reader() {
    use async_nats::jetstream::object_store::ObjectInfo;
    let server = gantry_testkit::NatsServer::start().expect("nats-server starts");
    let js = jetstream::new(async_nats::connect(server.url()).await.unwrap());
    let bucket = names::checkpoints_bucket(CHAIN);
    gantry_runtime::objects::open(&js, &bucket, 1)
        .await
        .unwrap();
    let put = gantry_runtime::objects::put(
        &js,
        &bucket,
        1,
        "7",
        Default::default(),
        [5u8; 300_000].as_slice(),
    )
    .await
    .unwrap();
    assert_eq!(put.size, 300_000);
    let honest = gantry_runtime::objects::get(&js, &bucket, 1, "7")
        .await
        .unwrap()
        .unwrap();
    let meta = |info: &ObjectInfo| serde_json::to_vec(info).unwrap();
    // Key "9", base64url.
    let subject = format!("$O.{bucket}.M.1.OQ==");
    let lie = |change: &dyn Fn(&mut ObjectInfo)| {
        let mut info = honest.info.clone();
        change(&mut info);
        meta(&info)
    };
    for (what, payload) in [
        ("a wildcard nuid", lie(&|i| i.nuid = "1.>".into())),
        (
            "another node's nuid",
            lie(&|i| i.nuid = i.nuid.replacen("1.", "2.", 1)),
        ),
        ("more chunks than its size", lie(&|i| i.chunks += 5)),
    ] {
        js.publish(subject.clone(), payload.into())
            .await
            .unwrap()
            .await
            .unwrap();
        let got = gantry_runtime::objects::get(&js, &bucket, 1, "9").await;
        assert!(
            matches!(got, Err(gantry_runtime::objects::GetError::Foreign(_))),
            "{what}: {got:?}"
        );
    }
    // Fewer bytes than it says: the read ends with an error once the chunks run out.
    js.publish(
        subject.clone(),
        lie(&|i| {
            i.size += 1;
        })
        .into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let short = gantry_runtime::objects::get(&js, &bucket, 1, "9")
        .await
        .unwrap()
        .unwrap();
    let read: Vec<_> = tokio::time::timeout(
        gantry_runtime::objects::CHUNK_WAIT * 2,
        short.bytes(u64::MAX).collect(),
    )
    .await
    .expect("the read ends");
    assert!(
        read.iter().any(Result::is_err),
        "the short object is not taken whole"
    );
    // A limit below the object's size ends the read too.
    let honest = gantry_runtime::objects::get(&js, &bucket, 1, "7")
        .await
        .unwrap()
        .unwrap();
    let limited: Vec<_> = honest.bytes(1_000).collect().await;
    assert!(limited.iter().any(Result::is_err));
}

/// Design 19, §3: the job-key exchange on the production config. The auth service makes
/// the keys bucket; a worker writes its own node's requests and reads the releases to it;
/// a submitter (the reader) reads the requests and writes releases; neither may write the
/// other's side, and a worker may not ask in another node's name.
#[tokio::test(flavor = "multi_thread")]
async fn encrypted_each_side_of_the_key_exchange_writes_only_its_own() {
    let config = NatsConfig::render("nats-server.conf", CHAIN, &[1, 2]).expect("render");
    let server = ConfiguredNats::start(&config).expect("nats-server starts with the config");
    let bucket = names::keys_bucket(CHAIN);

    let auth = Session::open(&server, &config, "auth").await;
    gantry_runtime::keys::open(&auth.js, CHAIN, 1)
        .await
        .expect("the auth service makes the keys bucket");
    auth.assert_no_refusals("making the keys bucket").await;

    // A worker opens it as gantry-worker does and asks for job 7's key.
    let worker = Session::open(&server, &config, "worker-1").await;
    let keys = gantry_runtime::keys::open(&worker.js, CHAIN, 1)
        .await
        .expect("the worker opens the keys bucket");
    let mut releases = keys
        .watch_with_history(names::key_release(1, 7, 1))
        .await
        .expect("the worker watches the releases to it");
    keys.put(names::key_request(1, 7, 1), "request".into())
        .await
        .expect("the worker asks in its own name");
    worker.assert_no_refusals("asking for a job key").await;

    // The submitter sees the request and answers it.
    let reader = Session::open(&server, &config, "reader").await;
    let submitter_keys = gantry_runtime::keys::open(&reader.js, CHAIN, 1)
        .await
        .expect("the reader opens the keys bucket");
    let mut requests = submitter_keys
        .watch_with_history("request.>")
        .await
        .expect("the reader watches the requests");
    let request = tokio::time::timeout(REFUSAL_TIMEOUT, requests.next())
        .await
        .expect("the request arrives")
        .expect("a watch entry")
        .expect("an entry");
    assert_eq!(request.key, names::key_request(1, 7, 1));
    submitter_keys
        .put(names::key_release(1, 7, 1), "release".into())
        .await
        .expect("the reader releases a key");
    reader.assert_no_refusals("releasing a job key").await;
    let release = tokio::time::timeout(REFUSAL_TIMEOUT, releases.next())
        .await
        .expect("the release arrives")
        .expect("a watch entry")
        .expect("an entry");
    assert_eq!(release.value, "release");

    // Nobody empties it: a rollup is refused by the stream, and the request is still there.
    let mut rollup = HeaderMap::new();
    rollup.insert("Nats-Rollup", "all");
    let wiped = async {
        reader
            .js
            .publish_with_headers(
                format!("$KV.{bucket}.{}", names::key_release(1, 7, 1)),
                rollup,
                "wipe".into(),
            )
            .await?
            .await
    }
    .await;
    assert!(wiped.is_err(), "a rollup is refused");
    let kept = submitter_keys
        .get(names::key_request(1, 7, 1))
        .await
        .expect("a read")
        .expect("the request is still there");
    assert_eq!(kept, "request");

    // Neither writes the other's side, nor a worker another node's requests.
    for (session, subject) in [
        (
            &worker,
            format!("$KV.{bucket}.{}", names::key_request(2, 8, 1)),
        ),
        (
            &worker,
            format!("$KV.{bucket}.{}", names::key_release(1, 7, 1)),
        ),
        (
            &reader,
            format!("$KV.{bucket}.{}", names::key_request(1, 7, 1)),
        ),
    ] {
        session.refused_stream_publish(&subject).await;
    }
    // Nor does a worker make the bucket over (its settings are the network's): refused
    // at its first call, the account's limits (and STREAM.CREATE is not granted either).
    worker
        .refused_call(
            worker
                .refusing_js
                .create_key_value(storage::keys_bucket(CHAIN, 1)),
            "$JS.API.INFO".to_owned(),
        )
        .await;
    worker
        .refused_call(
            worker.refusing_js.create_stream(stream::Config {
                name: format!("KV_{bucket}"),
                subjects: vec![format!("$KV.{bucket}.>")],
                ..Default::default()
            }),
            format!("$JS.API.STREAM.CREATE.KV_{bucket}"),
        )
        .await;
}
