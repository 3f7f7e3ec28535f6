//! The JetStream streams, KV buckets and object stores the services create, with their
//! settings, in one place: whichever service creates one first, the others (and the tests,
//! and an operator creating them ahead) agree on what it is.
//!
//! | what                          | created by        | replicas        |
//! |-------------------------------|-------------------|-----------------|
//! | chain stream `GANTRY_<C>`     | indexer           | `--nats-replicas` |
//! | `gantry_indexer_lease` (KV)   | indexer           | `--nats-replicas` |
//! | `gantry_<C>_pending` (KV)     | matcher           | `--nats-replicas` |
//! | `gantry_liveness_lease` (KV)  | liveness          | `--nats-replicas` |
//! | jobs stream `GANTRY_JOBS_<C>` | worker            | `nats_replicas`   |
//! | `gantry_<C>_results`, `_checkpoints` (object stores) | worker | `nats_replicas` |
//!
//! A stream's replica count is fixed by whoever creates it; on a three-node cluster every
//! service is started with 3. Consumers take their stream's replica count. The workers'
//! assignment and claim consumers are here too: the NATS permissions
//! (`crate::nats_auth`) grant a worker exactly these consumers' names and filters.

use std::time::Duration;

use async_nats::jetstream::{consumer, kv, object_store, stream};

use crate::names;

/// How long the jobs stream keeps progress, logs and completion reports.
pub const JOBS_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// The most messages the jobs stream keeps per subject (per job and kind).
pub const JOBS_MAX_PER_SUBJECT: i64 = 20_000;

/// The most replicas JetStream keeps of a stream.
pub const MAX_REPLICAS: usize = 5;

/// Checks a configured replica count: 1 (a single server) to [`MAX_REPLICAS`].
pub fn check_replicas(replicas: usize) -> Result<usize, String> {
    if (1..=MAX_REPLICAS).contains(&replicas) {
        Ok(replicas)
    } else {
        Err(format!(
            "NATS replicas must be 1 to {MAX_REPLICAS}, not {replicas}"
        ))
    }
}

/// Parses a replica count as the services' `--nats-replicas` takes it.
pub fn parse_replicas(text: &str) -> Result<usize, String> {
    let replicas = text.trim().parse().map_err(|_| {
        format!("NATS replicas must be a number from 1 to {MAX_REPLICAS}, not {text:?}")
    })?;
    check_replicas(replicas)
}

/// The append-only chain stream the indexer writes: no deletes or purges, direct gets for
/// the API's and workers' reads, a de-duplication window for retried appends, and atomic
/// batches (a block's events and its commit land together or not at all).
pub fn chain_stream(chain_id: u64, replicas: usize) -> stream::Config {
    stream::Config {
        name: names::stream_name(chain_id),
        subjects: vec![names::stream_subjects(chain_id)],
        storage: stream::StorageType::File,
        deny_delete: true,
        deny_purge: true,
        allow_direct: true,
        allow_atomic_publish: true,
        duplicate_window: Duration::from_secs(120),
        num_replicas: replicas,
        ..Default::default()
    }
}

/// The stream of workers' progress, logs and completion reports, bounded in age and per
/// subject.
pub fn jobs_stream(chain_id: u64, replicas: usize) -> stream::Config {
    stream::Config {
        name: names::jobs_stream_name(chain_id),
        subjects: vec![names::jobs_stream_subjects(chain_id)],
        max_age: JOBS_MAX_AGE,
        max_messages_per_subject: JOBS_MAX_PER_SUBJECT,
        storage: stream::StorageType::File,
        num_replicas: replicas,
        ..Default::default()
    }
}

/// How long an assignment stays unacknowledged before it is redelivered, unless the worker
/// renews it (it does while the job runs).
pub const ASSIGNMENT_ACK_WAIT: Duration = Duration::from_secs(30);

/// Node `node_id`'s durable assignment consumer on the chain stream: its one filter is the
/// node's `JobAssigned` subject, which is all a worker's NATS user may read.
pub fn assignment_consumer(chain_id: u64, node_id: u64) -> consumer::pull::Config {
    consumer::pull::Config {
        durable_name: Some(names::worker_consumer(chain_id, node_id)),
        description: Some(format!("assignments of node {node_id}")),
        filter_subject: names::assignments_of(chain_id, node_id),
        deliver_policy: consumer::DeliverPolicy::All,
        ack_policy: consumer::AckPolicy::Explicit,
        ack_wait: ASSIGNMENT_ACK_WAIT,
        max_deliver: -1,
        ..Default::default()
    }
}

/// Node `node_id`'s durable consumer of the verified jobs' seats it is drawn into
/// (`SeatDrawn` keyed by its node). A seat's message stays unacknowledged until its seal is
/// committed and revealed, so a restarted worker takes it up again.
pub fn seat_consumer(chain_id: u64, node_id: u64) -> consumer::pull::Config {
    consumer::pull::Config {
        durable_name: Some(names::seat_consumer(chain_id, node_id)),
        description: Some(format!("verified seats of node {node_id}")),
        filter_subject: names::seats_of(chain_id, node_id),
        deliver_policy: consumer::DeliverPolicy::All,
        ack_policy: consumer::AckPolicy::Explicit,
        ack_wait: ASSIGNMENT_ACK_WAIT,
        max_deliver: -1,
        ..Default::default()
    }
}

/// How long a claim-mode worker that is away keeps its claim consumers' positions.
pub const CLAIM_CONSUMER_INACTIVE: Duration = Duration::from_secs(7 * 24 * 3600);

/// Node `node_id`'s durable claim-mode consumer over `event` (one of
/// [`names::CLAIM_EVENTS`]): one message in flight, so that the worker considers a job only
/// when it could take it, and a restarted worker goes on where it stopped.
pub fn claim_consumer(chain_id: u64, node_id: u64, event: &str) -> consumer::pull::Config {
    consumer::pull::Config {
        durable_name: Some(names::claim_consumer(chain_id, node_id, event)),
        description: Some(format!("{event} events for node {node_id}'s claim mode")),
        filter_subject: names::event_filter(chain_id, event),
        deliver_policy: consumer::DeliverPolicy::All,
        ack_policy: consumer::AckPolicy::Explicit,
        ack_wait: ASSIGNMENT_ACK_WAIT,
        max_deliver: -1,
        max_ack_pending: 1,
        inactive_threshold: CLAIM_CONSUMER_INACTIVE,
        ..Default::default()
    }
}

/// An object store (results, checkpoints, inputs).
pub fn object_store(bucket: &str, replicas: usize) -> object_store::Config {
    object_store::Config {
        bucket: bucket.to_owned(),
        storage: stream::StorageType::File,
        num_replicas: replicas,
        ..Default::default()
    }
}

/// The matcher's explanations of unplaced jobs: the latest per job.
pub fn pending_bucket(chain_id: u64, replicas: usize) -> kv::Config {
    kv::Config {
        bucket: names::pending_bucket(chain_id),
        description: "why open jobs are not placed, by job id".into(),
        history: 1,
        storage: stream::StorageType::File,
        num_replicas: replicas,
        ..Default::default()
    }
}

/// The workers' manifests ([`names::nodes_bucket`]): the last one of each node.
pub fn nodes_bucket(chain_id: u64, replicas: usize) -> kv::Config {
    kv::Config {
        bucket: names::nodes_bucket(chain_id),
        description: "the capability manifest of each node's worker, from its last handshake"
            .into(),
        history: 1,
        storage: stream::StorageType::File,
        num_replicas: replicas,
        ..Default::default()
    }
}

/// The admitted handshake tokens ([`names::handshakes_bucket`]), each kept for `keep` (at
/// least twice the tokens' clock window, so none is admitted again).
pub fn handshakes_bucket(chain_id: u64, keep: Duration, replicas: usize) -> kv::Config {
    kv::Config {
        bucket: names::handshakes_bucket(chain_id),
        description: "handshake tokens admitted, by signature hash, until their window ends".into(),
        history: 1,
        max_age: keep,
        storage: stream::StorageType::File,
        num_replicas: replicas,
        ..Default::default()
    }
}

/// The job-key exchange ([`names::keys_bucket`]): requests and releases kept a day (a
/// key is needed when an attempt starts), each small, at most 256 MiB in all. A node and
/// a submitter watch their keys from before they are written, so they see every entry;
/// the history of 64 is for a watcher that starts late. (`gantry_runtime::keys::open`
/// then turns rollups off and drops the oldest entries when full.)
pub fn keys_bucket(chain_id: u64, replicas: usize) -> kv::Config {
    kv::Config {
        bucket: names::keys_bucket(chain_id),
        description: "job keys asked for by nodes and released by submitters (design 19)".into(),
        history: 64,
        max_age: Duration::from_secs(24 * 3600),
        max_value_size: crate::encryption::MAX_MESSAGE_BYTES as i32,
        max_bytes: 256 << 20,
        storage: stream::StorageType::File,
        num_replicas: replicas,
        ..Default::default()
    }
}

/// A lease bucket (`INDEXER_LEASE_BUCKET` or `LIVENESS_LEASE_BUCKET`): entries expire after
/// the lease's time to live, so a dead holder's lease lapses.
pub fn lease_bucket(bucket: &str, ttl: Duration, replicas: usize) -> kv::Config {
    kv::Config {
        bucket: bucket.to_owned(),
        history: 1,
        max_age: ttl,
        storage: stream::StorageType::File,
        num_replicas: replicas,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_config_carries_its_replicas_and_name() {
        assert_eq!(chain_stream(7, 3).num_replicas, 3);
        assert_eq!(chain_stream(7, 3).name, "GANTRY_7");
        assert_eq!(jobs_stream(7, 3).num_replicas, 3);
        assert_eq!(
            jobs_stream(7, 1).subjects,
            vec!["gantry.jobs.7.>".to_owned()]
        );
        assert_eq!(object_store("b", 3).num_replicas, 3);
        let assignments = assignment_consumer(7, 2);
        assert_eq!(
            assignments.durable_name.as_deref(),
            Some("gantry_7_worker_2")
        );
        assert_eq!(assignments.filter_subject, names::assignments_of(7, 2));
        let claims = claim_consumer(7, 2, "JobRequeued");
        assert_eq!(
            claims.durable_name.as_deref(),
            Some("gantry_7_claim_2_JobRequeued")
        );
        assert_eq!(claims.filter_subject, "gantry.7.ev.JobRequeued.*");
        assert_eq!(pending_bucket(7, 3).num_replicas, 3);
        assert_eq!(pending_bucket(7, 3).bucket, "gantry_7_pending");
        let lease = lease_bucket(names::INDEXER_LEASE_BUCKET, Duration::from_secs(2), 3);
        assert_eq!(
            (lease.num_replicas, lease.max_age),
            (3, Duration::from_secs(2))
        );
    }

    #[test]
    fn replicas_are_one_to_five() {
        assert_eq!(check_replicas(1), Ok(1));
        assert_eq!(check_replicas(5), Ok(5));
        assert!(check_replicas(0).unwrap_err().contains("1 to 5"));
        assert!(check_replicas(6).is_err());
        assert_eq!(parse_replicas("3"), Ok(3));
        assert!(parse_replicas("three").unwrap_err().contains("three"));
        assert!(parse_replicas("0").is_err());
    }
}
