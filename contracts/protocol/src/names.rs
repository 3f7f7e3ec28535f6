//! Every name that crosses a process boundary: streams, subjects, KV and object store
//! buckets, durable consumers, message ids. The NATS permissions of each service are
//! rendered from these functions, so a name changes here or nowhere.
//!
//! One JetStream stream per chain holds every message about that chain, in chain order:
//!
//! ```text
//! stream  GANTRY_<chain>              subjects gantry.<chain>.>
//!   gantry.<chain>.ev.<EventName>.<key>   one decoded contract event (key: job or node id;
//!                                         the node id for JobAssigned, so a worker filters
//!                                         `gantry.<chain>.ev.JobAssigned.<its node id>`)
//!   gantry.<chain>.block.<number>         block commit marker, after the block's events
//!   gantry.<chain>.retract                orphaned blocks, before their replacements
//!   gantry.<chain>.final                  finality watermark
//!
//! stream  GANTRY_JOBS_<chain>         subjects gantry.jobs.<chain>.>
//!   gantry.jobs.<chain>.{progress,logs,done}.<node>.<job>   what node's worker reports about a job
//!
//! object stores  gantry_<chain>_results (<job>-<attempt>), gantry_<chain>_checkpoints (<job>)
//! KV             gantry_<chain>_pending (matcher's explanations), gantry_{indexer,liveness}_lease
//! consumers      gantry_<chain>_matcher, gantry_<chain>_worker_<node>, gantry_<chain>_seats_<node>,
//!                gantry_<chain>_claim_<node>_<event>
//! ```

use crate::bindings::JobMarket;
use crate::events::event_name;

/// The stream of chain `chain_id`.
pub fn stream_name(chain_id: u64) -> String {
    format!("GANTRY_{chain_id}")
}

/// The subject filter covering the whole stream of chain `chain_id`.
pub fn stream_subjects(chain_id: u64) -> String {
    format!("gantry.{chain_id}.>")
}

/// The subject of one contract event (`key` as in `DecodedEvent::key`).
pub fn event(chain_id: u64, event_name: &str, key: &str) -> String {
    format!("gantry.{chain_id}.ev.{event_name}.{key}")
}

/// The filter for every event of one name, e.g. all `JobPosted`.
pub fn event_filter(chain_id: u64, event_name: &str) -> String {
    format!("gantry.{chain_id}.ev.{event_name}.*")
}

/// The filter a worker uses for the jobs assigned to its node.
pub fn assignments_of(chain_id: u64, node_id: u64) -> String {
    event(
        chain_id,
        event_name::<JobMarket::JobAssigned>(),
        &node_id.to_string(),
    )
}

/// The filter a worker uses for the seats its node is drawn into (`SeatDrawn`, keyed by
/// node).
pub fn seats_of(chain_id: u64, node_id: u64) -> String {
    event(
        chain_id,
        event_name::<JobMarket::SeatDrawn>(),
        &node_id.to_string(),
    )
}

/// The commit marker of block `number`. The last message on this subject is the block's
/// latest commit (a block re-committed after a reorg replaces the orphaned one).
pub fn block_commit(chain_id: u64, number: u64) -> String {
    format!("gantry.{chain_id}.block.{number}")
}

/// The filter for every block commit.
pub fn block_commits(chain_id: u64) -> String {
    format!("gantry.{chain_id}.block.*")
}

pub fn retraction(chain_id: u64) -> String {
    format!("gantry.{chain_id}.retract")
}

pub fn finality(chain_id: u64) -> String {
    format!("gantry.{chain_id}.final")
}

/// The object store of `service`'s view snapshots on chain `chain_id` (one object per
/// signing account).
pub fn snapshots_bucket(chain_id: u64, service: &str) -> String {
    format!("gantry_{chain_id}_snapshots_{service}")
}

/// The KV bucket of pending-job explanations of chain `chain_id`, keyed by job id
/// (see [`crate::pending`]).
pub fn pending_bucket(chain_id: u64) -> String {
    format!("gantry_{chain_id}_pending")
}

/// The KV bucket of the workers' capability manifests of chain `chain_id`, keyed by node
/// id: what each node's worker said in its last handshake (`handshake::Manifest`), written
/// by the auth service, read by the matcher.
pub fn nodes_bucket(chain_id: u64) -> String {
    format!("gantry_{chain_id}_nodes")
}

/// The KV bucket where the auth service records each handshake token it admitted (by its
/// signature's hash) until the token's window has passed: a token is used once, whichever
/// replica sees it.
pub fn handshakes_bucket(chain_id: u64) -> String {
    format!("gantry_{chain_id}_handshakes")
}

/// The NATS user name a node's worker has, whether from the server's configuration or
/// from the handshake: its inbox prefix derives from it (`nats::inbox_prefix`).
pub fn worker_user(node_id: u64) -> String {
    format!("worker-{node_id}")
}

/// The name of the durable consumer through which matcher replicas share the open jobs.
pub fn matcher_consumer(chain_id: u64) -> String {
    format!("gantry_{chain_id}_matcher")
}

/// `Nats-Msg-Id` of the message that is to be stream sequence `sequence`. Every publish
/// also carries `Nats-Expected-Last-Sequence: sequence - 1`, so a retry of the same
/// message is dropped as a duplicate, and a second writer or a gap is refused.
pub fn message_id(chain_id: u64, sequence: u64) -> String {
    format!("gantry:{chain_id}:{sequence}")
}

// Worker reports, results and checkpoints: outside the chain stream.

/// Node `node_id`'s progress on job `job_id`. The node is in every report's subject so that
/// the permissions hold a worker to its own (design 19, §2): [`reports_of`].
pub fn progress_subject(chain_id: u64, node_id: u64, job_id: u64) -> String {
    format!("gantry.jobs.{chain_id}.progress.{node_id}.{job_id}")
}

pub fn logs_subject(chain_id: u64, node_id: u64, job_id: u64) -> String {
    format!("gantry.jobs.{chain_id}.logs.{node_id}.{job_id}")
}

pub fn completion_subject(chain_id: u64, node_id: u64, job_id: u64) -> String {
    format!("gantry.jobs.{chain_id}.done.{node_id}.{job_id}")
}

/// Every report subject of node `node_id`: what its worker may publish.
pub fn reports_of(chain_id: u64, node_id: u64) -> [String; 3] {
    ["progress", "logs", "done"].map(|kind| format!("gantry.jobs.{chain_id}.{kind}.{node_id}.*"))
}

/// The JetStream stream holding chain `chain_id`'s progress, logs and completion reports
/// (subjects `gantry.jobs.<chain>.>`), with age and per-job size limits.
pub fn jobs_stream_name(chain_id: u64) -> String {
    format!("GANTRY_JOBS_{chain_id}")
}

/// The subjects of [`jobs_stream_name`].
pub fn jobs_stream_subjects(chain_id: u64) -> String {
    format!("gantry.jobs.{chain_id}.>")
}

/// The node-scoped bucket of results (design 19, §2.1) is [`results_bucket`]: node N's
/// key `<job>-<attempt>` is a tar of the job's outputs, `resultURI`
/// `nats://<bucket>/<N>/<key>` ([`result_uri`]). A verified job's result, uploaded by each
/// paid seat after the decision, is its [`verified_result_key`].
pub fn verified_result_key(job_id: u64) -> String {
    format!("{job_id}-verified")
}

/// Where paid seat `node_id` of verified job `job_id` uploaded the job's result.
pub fn verified_result_uri(chain_id: u64, node_id: u64, job_id: u64) -> String {
    result_uri(chain_id, node_id, &verified_result_key(job_id))
}

/// Node `node_id`'s result `key` in the results bucket of chain `chain_id`.
pub fn result_uri(chain_id: u64, node_id: u64, key: &str) -> String {
    format!("nats://{}/{node_id}/{key}", results_bucket(chain_id))
}

pub fn results_bucket(chain_id: u64) -> String {
    format!("gantry_{chain_id}_results")
}

/// The node-scoped bucket of sealed results (design 18, §6; design 19, §2.1): a refereed
/// job's provider puts its outcome's tar there under its own id
/// ([`provider_result_key`]) with what opens its seal ([`provider_seal_key`]), for the
/// submitter alone. Each node may write under its id and nothing else; no worker may read
/// it (a referee that read the provider's result could commit it without running the
/// job); the submitters' reader may.
pub fn sealed_bucket(chain_id: u64) -> String {
    format!("gantry_{chain_id}_sealed")
}

/// Whether `bucket` is node-scoped (`gantry_runtime::objects`): its objects are named
/// `<node>/<key>` in URIs.
pub fn is_node_scoped(bucket: &str) -> bool {
    bucket.starts_with("gantry_")
        && ["_sealed", "_checkpoints", "_results"]
            .iter()
            .any(|kind| bucket.ends_with(kind))
}

/// The key of a refereed job's outcome (its canonical tar) under its provider's id in
/// [`sealed_bucket`].
pub fn provider_result_key(job_id: u64) -> String {
    format!("{job_id}-p")
}

/// The key of what opens a refereed provider's seal (JSON [`ProviderSeal`]) under its
/// provider's id in [`sealed_bucket`].
pub fn provider_seal_key(job_id: u64) -> String {
    format!("{job_id}-p.seal")
}

/// The `resultURI` a refereed provider submits: its outcome's tar under its id in the
/// bucket of sealed results (`nats://<bucket>/<node>/<key>`).
pub fn provider_result_uri(chain_id: u64, node_id: u64, job_id: u64) -> String {
    format!(
        "nats://{}/{node_id}/{}",
        sealed_bucket(chain_id),
        provider_result_key(job_id)
    )
}

/// What a refereed provider puts beside its outcome for the submitter: the digest it
/// sealed (the tar's SHA-256) and the salt, so that the submitter can check the seal on
/// chain against the tar, and open it in a dispute itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProviderSeal {
    pub node: u64,
    pub digest: alloy::primitives::B256,
    pub salt: alloy::primitives::B256,
}

/// The node-scoped bucket of checkpoints (`gantry_runtime::objects`): node N's key `<job>`
/// is a tar of `/checkpoints` as N last uploaded it, signed (`crate::checkpoint`), and
/// restored when the job resumes on another node.
pub fn checkpoints_bucket(chain_id: u64) -> String {
    format!("gantry_{chain_id}_checkpoints")
}

/// What node `node_id` may write of a node-scoped bucket (design 19, §2.1): its chunks and
/// its metadata, under its id (`gantry_runtime::objects`).
pub fn node_objects(bucket: &str, node_id: u64) -> [String; 2] {
    [
        format!("$O.{bucket}.C.{node_id}.>"),
        format!("$O.{bucket}.M.{node_id}.>"),
    ]
}

/// The durable consumer through which node `node_id`'s worker pulls its assignments.
pub fn worker_consumer(chain_id: u64, node_id: u64) -> String {
    format!("gantry_{chain_id}_worker_{node_id}")
}

/// Node `node_id`'s durable consumer of the seats it is drawn into.
pub fn seat_consumer(chain_id: u64, node_id: u64) -> String {
    format!("gantry_{chain_id}_seats_{node_id}")
}

/// The contract events a worker in claim mode watches for jobs to claim.
pub const CLAIM_EVENTS: [&str; 2] = ["JobPosted", "JobRequeued"];

/// The durable consumer through which node `node_id`'s worker in claim mode reads `event`
/// (one of [`CLAIM_EVENTS`]).
pub fn claim_consumer(chain_id: u64, node_id: u64, event: &str) -> String {
    format!("gantry_{chain_id}_claim_{node_id}_{event}")
}

/// The object store bucket submitters may name `nats://` inputs in (workers read it).
pub fn inputs_bucket(chain_id: u64) -> String {
    format!("gantry_{chain_id}_inputs")
}

/// The KV bucket of the job-key exchange (design 19, §3; `crate::encryption`): a node's
/// [`key_request`]s, written by it only, and the submitters' [`key_release`]s to it.
pub fn keys_bucket(chain_id: u64) -> String {
    format!("gantry_{chain_id}_keys")
}

/// Node `node_id`'s request for the job key of `attempt` of `job_id`.
pub fn key_request(node_id: u64, job_id: u64, attempt: u8) -> String {
    format!("request.{node_id}.{job_id}.{attempt}")
}

/// A submitter's release of the job key of `attempt` of `job_id` to node `node_id`.
pub fn key_release(node_id: u64, job_id: u64, attempt: u8) -> String {
    format!("release.{node_id}.{job_id}.{attempt}")
}

// Leader leases.

/// The KV bucket of the indexer's writer lease.
pub const INDEXER_LEASE_BUCKET: &str = "gantry_indexer_lease";
/// The KV bucket of the liveness keepers' lease.
pub const LIVENESS_LEASE_BUCKET: &str = "gantry_liveness_lease";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_documented_layout() {
        assert_eq!(stream_name(31337), "GANTRY_31337");
        assert_eq!(stream_subjects(31337), "gantry.31337.>");
        assert_eq!(event(1, "JobPosted", "7"), "gantry.1.ev.JobPosted.7");
        assert_eq!(assignments_of(1, 3), "gantry.1.ev.JobAssigned.3");
        assert_eq!(event_filter(1, "JobPosted"), "gantry.1.ev.JobPosted.*");
        assert_eq!(block_commit(1, 9), "gantry.1.block.9");
        assert_eq!(block_commits(1), "gantry.1.block.*");
        assert_eq!(pending_bucket(1), "gantry_1_pending");
    }

    #[test]
    fn message_ids_name_the_stream_position() {
        assert_eq!(message_id(31337, 42), "gantry:31337:42");
        assert_ne!(message_id(1, 42), message_id(2, 42));
    }
}
