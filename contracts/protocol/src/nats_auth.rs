//! The NATS accounts, users and permissions of one chain (`auth.conf`, which
//! `deploy/nats/nats-server.conf` and `cluster.conf` include), rendered from the names in
//! [`crate::names`]: a stream, bucket or consumer renamed there is renamed here, so the
//! permissions can never grant the old name. `gantry-devnet nats-auth <chain> [<node>…]`
//! prints it; passwords are not in it: each user's is read from the server's environment
//! when it starts (`$GANTRY_NATS_<USER>_PASSWORD`).
//!
//! ```text
//!   user       env var holding its password        may
//!   admin      GANTRY_NATS_ADMIN_PASSWORD          everything (operators: nats CLI, backups)
//!   indexer    GANTRY_NATS_INDEXER_PASSWORD        write the chain stream, its writer lease
//!   matcher    GANTRY_NATS_MATCHER_PASSWORD        read the chain stream, claim open jobs, KV pending,
//!                                                  its view snapshots
//!   liveness   GANTRY_NATS_LIVENESS_PASSWORD       read the chain stream, KV keeper lease, its
//!                                                  view snapshots
//!   api        GANTRY_NATS_API_PASSWORD            read the chain and jobs streams, KV pending
//!   reader     GANTRY_NATS_READER_PASSWORD         download results (submitters' `gantry` CLI)
//!   auth       GANTRY_NATS_AUTH_PASSWORD           the auth service: record handshakes, keep the
//!                                                  workers' manifests, make each node's bucket
//!   callout    GANTRY_NATS_CALLOUT_PASSWORD        (account AUTH) answer the server's auth callout
//!   worker-<N> GANTRY_NATS_WORKER_<N>_PASSWORD     (only for nodes listed) as a handshake's user
//! ```
//!
//! Workers join without any of this (design 19): a client that is none of these users is
//! sent to the auth callout, whose service (`gantry-auth`) checks the worker's handshake
//! token and answers with a user JWT for account GANTRY carrying
//! [`worker_permissions`]: node N's assignment and claim consumers, its reports, results and
//! checkpoints, `nats://` inputs; signed by the issuer key whose public half the server
//! reads from `$GANTRY_NATS_CALLOUT_ISSUER`. `allowed_accounts` names AUTH only, so the
//! service users above log in locally and never reach the callout. Listing node ids gives
//! those nodes config users as well (operators running their own workers with passwords)
//! and lets the reader read their buckets of sealed results.
//!
//! `$JS.API.CONSUMER.CREATE.<stream>` alone is the endpoint of unnamed (ordered) consumers;
//! with `.<name>[.<filter>]` after it, that of a named one, its only filter in the subject
//! (nats-server refuses a request whose filter differs from its subject's). Every user gets
//! the replies to its requests, JetStream answers and pulled messages on its own
//! `_INBOX_<user>.>` ([`crate::nats::inbox_prefix`]).

use std::fmt::Write as _;

use crate::bindings::JobMarket;
use crate::events::event_name;
use crate::names;
use crate::nats::inbox_prefix;

const API: &str = "$JS.API";

/// One user: its name, the environment variable of its password, why it exists, and what
/// it may publish (`None`: everything, the admin). Every user but the callout's is in
/// account GANTRY and subscribes to its own inbox only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub password_env: String,
    pub comment: String,
    pub publish: Option<Vec<String>>,
}

/// What a user may publish and subscribe to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permissions {
    pub publish: Vec<String>,
    pub subscribe: Vec<String>,
}

/// The account the auth callout's service connects to: nothing in it but the callout.
pub const CALLOUT_ACCOUNT: &str = "AUTH";
/// The account of the streams, the buckets, the services and the workers.
pub const ACCOUNT: &str = "GANTRY";
/// The callout service's user, in [`CALLOUT_ACCOUNT`].
pub const CALLOUT_USER: &str = "callout";
/// The variable of the server's environment holding the callout issuer's public key
/// (`A…`): the server accepts user JWTs signed by it.
pub const CALLOUT_ISSUER_ENV: &str = "GANTRY_NATS_CALLOUT_ISSUER";
/// Where the server asks the callout (nats-server's fixed subject).
pub const CALLOUT_SUBJECT: &str = "$SYS.REQ.USER.AUTH";
/// How long the server waits for the callout's answer (and for any client's CONNECT),
/// seconds.
pub const CALLOUT_TIMEOUT_SECS: u64 = 2;

/// Node `node`'s worker: what its user may publish (see [`worker`]) and subscribe to (its
/// own inbox). The auth service grants exactly this to a handshake.
pub fn worker_permissions(chain_id: u64, node: u64) -> Permissions {
    let user = worker(chain_id, node);
    Permissions {
        publish: user.publish.expect("a worker's publish list"),
        subscribe: vec![format!("{}.>", inbox_prefix(&user.name))],
    }
}

/// The users of chain `chain_id`'s services and of the workers of `nodes`.
pub fn users(chain_id: u64, nodes: &[u64]) -> Vec<User> {
    let mut users = vec![
        User {
            name: "admin".into(),
            password_env: "GANTRY_NATS_ADMIN_PASSWORD".into(),
            comment: String::new(),
            publish: None,
        },
        service(
            "indexer",
            "The one writer of the chain stream; creates it and its writer-lease bucket.",
            indexer(chain_id),
        ),
        service(
            "matcher",
            "Reads the chain stream (ordered consumers, deleted when recreated), shares open jobs \
             through its durable consumer, writes the explanations of unplaced jobs. \
             $JS.API.INFO: creating a KV bucket reads the account's limits.",
            matcher(chain_id),
        ),
        service(
            "liveness",
            "Reads the chain stream; one replica at a time holds the keeper lease and writes \
             why each waiting verified job waits.",
            liveness(chain_id),
        ),
        service(
            "api",
            "Reads the chain and jobs streams (ordered consumers), the explanations, and the \
             results bucket (it serves a job's stored result to a browser, which checks it).",
            api(chain_id),
        ),
        service(
            "auth",
            "The auth service (gantry-auth): records the handshakes it admits, keeps each \
             worker's manifest, creates each node's bucket of sealed results (a worker may not).",
            auth(chain_id),
        ),
        service(
            "reader",
            "Submitters fetching their results (the gantry CLI): read the results bucket and \
             the nodes' buckets of sealed results only.",
            reader(chain_id),
        ),
    ];
    users.extend(nodes.iter().map(|node| worker(chain_id, *node)));
    users
}

fn service(name: &str, comment: &str, publish: Vec<String>) -> User {
    User {
        name: name.into(),
        password_env: password_env(name),
        comment: comment.into(),
        publish: Some(publish),
    }
}

fn strings<const N: usize>(items: [String; N]) -> Vec<String> {
    items.into()
}

/// Reading a stream through ordered (unnamed) consumers.
fn ordered_reader(stream: &str) -> Vec<String> {
    strings([
        format!("{API}.CONSUMER.CREATE.{stream}"),
        format!("{API}.CONSUMER.MSG.NEXT.{stream}.*"),
        format!("{API}.CONSUMER.DELETE.{stream}.*"),
    ])
}

/// Using the durable consumer `name` of `stream`, with `filter` when the user creates it.
fn durable(stream: &str, name: &str, filter: Option<&str>) -> Vec<String> {
    let create = match filter {
        Some(filter) => format!("{API}.CONSUMER.CREATE.{stream}.{name}.{filter}"),
        None => format!("{API}.CONSUMER.CREATE.{stream}.{name}"),
    };
    strings([
        create,
        format!("{API}.CONSUMER.INFO.{stream}.{name}"),
        format!("{API}.CONSUMER.MSG.NEXT.{stream}.{name}"),
        format!("$JS.ACK.{stream}.{name}.>"),
    ])
}

/// The submitters' reader: the results bucket and the bucket of sealed results (every
/// node's, node-scoped: one grant for all).
fn reader(chain_id: u64) -> Vec<String> {
    let mut subjects = object_store(&names::results_bucket(chain_id));
    subjects.extend(object_store(&names::sealed_bucket(chain_id)));
    // Releasing job keys (`gantry job watch`, `gantry keys serve`): the nodes' requests
    // read, releases written (each signed by its job's submitter; a node skips the rest).
    let keys = names::keys_bucket(chain_id);
    subjects.extend(kv_watch(&keys));
    subjects.push(format!("$KV.{keys}.release.>"));
    subjects
}

/// Reading and watching the KV bucket `bucket`: by key, and through ordered consumers.
fn kv_watch(bucket: &str) -> Vec<String> {
    strings([
        format!("{API}.STREAM.INFO.KV_{bucket}"),
        format!("{API}.DIRECT.GET.KV_{bucket}.>"),
        format!("{API}.CONSUMER.CREATE.KV_{bucket}"),
        format!("{API}.CONSUMER.DELETE.KV_{bucket}.*"),
        format!("$JS.FC.KV_{bucket}.>"),
    ])
}

/// Putting node `node`'s objects into the node-scoped `bucket` without reading any (no
/// metadata, no chunk, no consumer, no purge) and without creating it: a stream's creator
/// sets its whole config, and one that sources the bucket and republishes it to the
/// creator's inbox would read it. The auth service creates it.
fn write_only_object_store(bucket: &str, node: u64) -> Vec<String> {
    let mut subjects = vec![format!("{API}.STREAM.INFO.OBJ_{bucket}")];
    subjects.extend(names::node_objects(bucket, node));
    subjects
}

/// Reading node-scoped objects of `bucket` (`gantry_runtime::objects`: every node's) and
/// writing node `node`'s own (`$O.<bucket>.{C,M}.<node>.…`), nothing else: no purge, no
/// stream made or changed (design 19, §2.1).
fn scoped_object_store(bucket: &str, node: u64) -> Vec<String> {
    let mut subjects = object_store(bucket);
    subjects.extend(names::node_objects(bucket, node));
    subjects
}

/// Reading (get) the object store `bucket`: an object's metadata by subject, its chunks
/// through an ordered consumer with flow control.
fn object_store(bucket: &str) -> Vec<String> {
    strings([
        format!("{API}.STREAM.INFO.OBJ_{bucket}"),
        format!("{API}.DIRECT.GET.OBJ_{bucket}.>"),
        format!("{API}.CONSUMER.CREATE.OBJ_{bucket}"),
        format!("{API}.CONSUMER.DELETE.OBJ_{bucket}.*"),
        format!("$JS.FC.OBJ_{bucket}.>"),
    ])
}

fn indexer(chain_id: u64) -> Vec<String> {
    let stream = names::stream_name(chain_id);
    let lease = names::INDEXER_LEASE_BUCKET;
    strings([
        names::stream_subjects(chain_id),
        format!("{API}.INFO"),
        format!("{API}.STREAM.INFO.{stream}"),
        format!("{API}.STREAM.CREATE.{stream}"),
        // A stream made before atomic batches is updated to allow them (deny delete and
        // purge cannot be dropped by an update: the server refuses it).
        format!("{API}.STREAM.UPDATE.{stream}"),
        format!("{API}.STREAM.MSG.GET.{stream}"),
        format!("{API}.STREAM.CREATE.KV_{lease}"),
        format!("{API}.DIRECT.GET.KV_{lease}.>"),
        format!("$KV.{lease}.chain-{chain_id}"),
    ])
}

fn matcher(chain_id: u64) -> Vec<String> {
    let stream = names::stream_name(chain_id);
    let pending = names::pending_bucket(chain_id);
    let mut subjects = strings([format!("{API}.INFO"), format!("{API}.STREAM.INFO.{stream}")]);
    subjects.extend(ordered_reader(&stream));
    let mut shared = durable(&stream, &names::matcher_consumer(chain_id), None);
    shared.remove(2); // the matcher fetches in batches through its own pull requests
    subjects.extend(shared);
    subjects.extend(strings([
        format!("{API}.STREAM.INFO.KV_{pending}"),
        format!("{API}.STREAM.CREATE.KV_{pending}"),
        format!("$KV.{pending}.>"),
    ]));
    // The workers' manifests, read.
    let nodes = names::nodes_bucket(chain_id);
    subjects.extend(strings([
        format!("{API}.STREAM.INFO.KV_{nodes}"),
        format!("{API}.DIRECT.GET.KV_{nodes}.>"),
    ]));
    subjects.extend(snapshots(chain_id, "matcher"));
    subjects
}

/// A service's view snapshots: its own object store (made, written, read, old chunks
/// purged) and the chain stream's commit a snapshot is checked against, by sequence.
fn snapshots(chain_id: u64, service: &str) -> Vec<String> {
    let bucket = names::snapshots_bucket(chain_id, service);
    let stream = names::stream_name(chain_id);
    let mut subjects = object_store(&bucket);
    subjects.extend(strings([
        format!("{API}.STREAM.CREATE.OBJ_{bucket}"),
        format!("{API}.STREAM.PURGE.OBJ_{bucket}"),
        format!("{API}.STREAM.MSG.GET.OBJ_{bucket}"),
        format!("{API}.CONSUMER.CREATE.OBJ_{bucket}.>"),
        format!("$O.{bucket}.>"),
        format!("{API}.STREAM.MSG.GET.{stream}"),
    ]));
    subjects
}

fn liveness(chain_id: u64) -> Vec<String> {
    let stream = names::stream_name(chain_id);
    let lease = names::LIVENESS_LEASE_BUCKET;
    let pending = names::pending_bucket(chain_id);
    let mut subjects = strings([format!("{API}.INFO"), format!("{API}.STREAM.INFO.{stream}")]);
    subjects.extend(ordered_reader(&stream));
    subjects.extend(strings([
        format!("{API}.STREAM.INFO.KV_{lease}"),
        format!("{API}.STREAM.CREATE.KV_{lease}"),
        format!("{API}.DIRECT.GET.KV_{lease}.>"),
        format!("$KV.{lease}.chain-{chain_id}"),
        // Why each waiting verified job waits, beside the matcher's explanations.
        format!("{API}.STREAM.INFO.KV_{pending}"),
        format!("{API}.STREAM.CREATE.KV_{pending}"),
        format!("$KV.{pending}.>"),
    ]));
    subjects.extend(snapshots(chain_id, "liveness"));
    subjects
}

fn api(chain_id: u64) -> Vec<String> {
    let stream = names::stream_name(chain_id);
    let jobs = names::jobs_stream_name(chain_id);
    let pending = names::pending_bucket(chain_id);
    let mut subjects = strings([
        format!("{API}.STREAM.INFO.{stream}"),
        format!("{API}.STREAM.INFO.{jobs}"),
        // The commit its stored projection stands at, checked at start.
        format!("{API}.STREAM.MSG.GET.{stream}"),
    ]);
    subjects.extend(ordered_reader(&stream));
    subjects.extend(ordered_reader(&jobs));
    subjects.extend(strings([
        format!("{API}.STREAM.INFO.KV_{pending}"),
        format!("{API}.DIRECT.GET.KV_{pending}.>"),
    ]));
    subjects.extend(object_store(&names::results_bucket(chain_id)));
    subjects
}

fn auth(chain_id: u64) -> Vec<String> {
    let nodes = names::nodes_bucket(chain_id);
    let handshakes = names::handshakes_bucket(chain_id);
    let mut subjects = strings([format!("{API}.INFO")]);
    let keys = names::keys_bucket(chain_id);
    subjects.extend(strings([
        format!("{API}.STREAM.INFO.KV_{keys}"),
        format!("{API}.STREAM.CREATE.KV_{keys}"),
        // Rollups off (`gantry_runtime::keys::open`).
        format!("{API}.STREAM.UPDATE.KV_{keys}"),
    ]));
    for bucket in [&nodes, &handshakes] {
        subjects.extend(strings([
            format!("{API}.STREAM.INFO.KV_{bucket}"),
            format!("{API}.STREAM.CREATE.KV_{bucket}"),
            format!("{API}.DIRECT.GET.KV_{bucket}.>"),
            format!("$KV.{bucket}.>"),
        ]));
    }
    // What every worker writes, made at start with the network's settings (a worker that
    // made them would choose them for everyone); the node-scoped buckets' rollups turned
    // off if an older one allowed them.
    let jobs = names::jobs_stream_name(chain_id);
    subjects.extend(strings([
        format!("{API}.STREAM.INFO.{jobs}"),
        format!("{API}.STREAM.CREATE.{jobs}"),
    ]));
    for bucket in [
        names::results_bucket(chain_id),
        names::checkpoints_bucket(chain_id),
        names::sealed_bucket(chain_id),
    ] {
        subjects.extend(strings([
            format!("{API}.STREAM.INFO.OBJ_{bucket}"),
            format!("{API}.STREAM.CREATE.OBJ_{bucket}"),
        ]));
        if names::is_node_scoped(&bucket) {
            subjects.push(format!("{API}.STREAM.UPDATE.OBJ_{bucket}"));
        }
    }
    subjects
}

/// Node `node`'s worker: its own assignment consumer and, for claim mode, its consumers of
/// the claim events (no other consumer on the chain stream), the JobPosted spec by
/// subject, its reports, results and checkpoints, and `nats://` inputs (read only).
fn worker(chain_id: u64, node: u64) -> User {
    let stream = names::stream_name(chain_id);
    let jobs = names::jobs_stream_name(chain_id);
    let mut publish = strings([
        format!("{API}.STREAM.INFO.{stream}"),
        format!("{API}.STREAM.MSG.GET.{stream}"),
    ]);
    publish.extend(durable(
        &stream,
        &names::worker_consumer(chain_id, node),
        Some(&names::assignments_of(chain_id, node)),
    ));
    publish.extend(durable(
        &stream,
        &names::seat_consumer(chain_id, node),
        Some(&names::seats_of(chain_id, node)),
    ));
    for event in names::CLAIM_EVENTS {
        publish.extend(durable(
            &stream,
            &names::claim_consumer(chain_id, node, event),
            Some(&names::event_filter(chain_id, event)),
        ));
    }
    publish.extend(names::reports_of(chain_id, node));
    // The jobs stream and the checkpoints bucket are made by the auth service (with the
    // network's settings: a worker that made them would choose them for everyone).
    publish.push(format!("{API}.STREAM.INFO.{jobs}"));
    publish.extend(scoped_object_store(&names::results_bucket(chain_id), node));
    publish.extend(scoped_object_store(
        &names::checkpoints_bucket(chain_id),
        node,
    ));
    publish.extend(object_store(&names::inputs_bucket(chain_id)));
    // The job-key exchange: its own requests written, the releases to it read (sealed
    // to the attempt's identity, which only it holds).
    let keys = names::keys_bucket(chain_id);
    publish.extend(kv_watch(&keys));
    publish.push(format!("$KV.{keys}.request.{node}.>"));
    publish.extend(write_only_object_store(
        &names::sealed_bucket(chain_id),
        node,
    ));
    User {
        name: names::worker_user(node),
        password_env: password_env(&names::worker_user(node)),
        comment: format!(
            "Node {node}'s worker: its assignments, its claim-mode consumers of {}, the {} spec \
             by subject, its reports, results and checkpoints, and nats:// inputs.",
            names::CLAIM_EVENTS.join(" and "),
            event_name::<JobMarket::JobPosted>(),
        ),
        publish: Some(publish),
    }
}

/// `auth.conf` for chain `chain_id` and the workers of `nodes`.
pub fn render(chain_id: u64, nodes: &[u64]) -> String {
    let mut out = format!(
        "# Generated by `gantry-devnet nats-auth {chain_id}{}` from gantry_protocol::names;\n\
         # do not edit, re-run it (and reload the servers: nats-server --signal reload;\n\
         # a change to the auth_callout block needs a restart).\n\n\
         accounts {{\n  {CALLOUT_ACCOUNT} {{\n    users: [\n      \
         # The auth service (gantry-auth) answering the callout; nothing else is here.\n      \
         {{ user: {CALLOUT_USER}, password: ${}, permissions: {{\n          \
         publish: {{ allow: [\"$SYS._INBOX.>\"] }}\n          \
         subscribe: {{ allow: [\"{CALLOUT_SUBJECT}\", \"{}.>\"] }}\n      }} }}\n    ]\n  }}\n  \
         {ACCOUNT} {{\n    jetstream: enabled\n    users: [\n",
        nodes.iter().map(|n| format!(" {n}")).collect::<String>(),
        password_env(CALLOUT_USER),
        inbox_prefix(CALLOUT_USER),
    );
    for user in users(chain_id, nodes) {
        render_user(&mut out, &user);
    }
    out.push_str("    ]\n  }\n}\n");
    let _ = write!(
        out,
        "\n# A client that is none of the users above is a worker: the auth service checks its\n\
         # handshake and answers with a user of {ACCOUNT} scoped to its node.\n\
         authorization {{\n  timeout: {CALLOUT_TIMEOUT_SECS}\n  auth_callout {{\n    \
         issuer: ${CALLOUT_ISSUER_ENV}\n    account: {CALLOUT_ACCOUNT}\n    \
         auth_users: [ {CALLOUT_USER} ]\n    \
         # Not {ACCOUNT}: its users log in here and never reach the callout.\n    \
         allowed_accounts: [ {CALLOUT_ACCOUNT} ]\n  }}\n}}\n"
    );
    out
}

/// `GANTRY_NATS_<USER>_PASSWORD`: the variable of the server's environment holding `user`'s
/// password.
pub fn password_env(user: &str) -> String {
    format!(
        "GANTRY_NATS_{}_PASSWORD",
        user.to_uppercase().replace('-', "_")
    )
}

fn render_user(out: &mut String, user: &User) {
    let password = format!("${}", user.password_env);
    let Some(publish) = &user.publish else {
        let _ = writeln!(out, "      {{ user: {}, password: {password} }}", user.name);
        return;
    };
    out.push('\n');
    for line in wrap(&user.comment, 84) {
        let _ = writeln!(out, "      # {line}");
    }
    let _ = writeln!(
        out,
        "      {{ user: {}, password: {password}, permissions: {{",
        user.name
    );
    out.push_str("          publish: { allow: [\n");
    let quoted: Vec<String> = publish
        .iter()
        .map(|s| format!("            {s:?}"))
        .collect();
    out.push_str(&quoted.join(",\n"));
    out.push_str("\n          ] }\n");
    let _ = writeln!(
        out,
        "          subscribe: {{ allow: [\"{}.>\"] }}",
        inbox_prefix(&user.name)
    );
    out.push_str("      } }\n");
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let line = lines.last_mut().expect("one line at least");
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(word.to_owned());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publish_of<'a>(users: &'a [User], name: &str) -> &'a [String] {
        users
            .iter()
            .find(|u| u.name == name)
            .and_then(|u| u.publish.as_deref())
            .unwrap()
    }

    #[test]
    fn a_worker_may_use_only_its_own_consumers_and_subjects() {
        let users = users(7, &[3, 4]);
        let three = publish_of(&users, "worker-3");
        assert!(
            three.contains(
                &"$JS.API.CONSUMER.CREATE.GANTRY_7.gantry_7_worker_3.gantry.7.ev.JobAssigned.3"
                    .to_owned()
            )
        );
        assert!(three.contains(&"$JS.API.CONSUMER.CREATE.GANTRY_7.gantry_7_claim_3_JobPosted.gantry.7.ev.JobPosted.*".to_owned()));
        assert!(three.contains(&"gantry.jobs.7.progress.3.*".to_owned()));
        assert!(
            !three
                .iter()
                .any(|s| s.starts_with("gantry.jobs.7.") && !s.contains(".3."))
        );
        assert!(three.contains(&"$O.gantry_7_results.C.3.>".to_owned()));
        assert!(
            !three
                .iter()
                .any(|s| s == "$O.gantry_7_results.>" || s.contains("PURGE"))
        );
        // Checkpoints: its own, under its id; every node's read.
        for own in [
            "$O.gantry_7_checkpoints.C.3.>",
            "$O.gantry_7_checkpoints.M.3.>",
            "$JS.API.DIRECT.GET.OBJ_gantry_7_checkpoints.>",
        ] {
            assert!(three.contains(&own.to_owned()), "{own}");
        }
        assert!(!three.contains(&"$O.gantry_7_checkpoints.>".to_owned()));
        assert!(
            !three
                .iter()
                .any(|s| s.contains("PURGE.OBJ_gantry_7_checkpoints")
                    || s.contains("STREAM.CREATE.OBJ_gantry_7_checkpoints")
                    || s.contains("STREAM.CREATE.GANTRY_JOBS"))
        );
        assert!(
            !three
                .iter()
                .any(|s| s.contains("worker_4") || s.contains("claim_4"))
        );
        assert!(
            !three.contains(&"$O.gantry_7_inputs.>".to_owned()),
            "inputs are read only"
        );
        assert!(
            !three.iter().any(|s| s.starts_with("gantry.7.")),
            "only the indexer writes the chain"
        );
    }

    #[test]
    fn only_the_indexer_writes_the_chain_stream_and_the_reader_only_reads_results() {
        let users = users(7, &[1]);
        for user in users.iter().filter(|u| u.publish.is_some()) {
            let writes_chain = publish_of(&users, &user.name).contains(&"gantry.7.>".to_owned());
            assert_eq!(writes_chain, user.name == "indexer", "{}", user.name);
        }
        let reader = publish_of(&users, "reader");
        assert!(reader.iter().all(|s| s.contains("OBJ_gantry_7_results")
            || s.contains("OBJ_gantry_7_sealed")
            || s.contains("KV_gantry_7_keys")
            || s == "$KV.gantry_7_keys.release.>"));
        assert!(!reader.iter().any(|s| s.starts_with("$O.")), "no puts");
    }

    /// Design 19, §3: a worker writes its own node's key requests only, a submitter (the
    /// reader) releases only; both read the bucket (its secrets are sealed).
    #[test]
    fn encrypted_a_worker_asks_for_keys_in_its_own_name_and_submitters_only_release() {
        let users = users(7, &[3]);
        let three = publish_of(&users, "worker-3");
        let writes = |user: &[String]| -> Vec<String> {
            user.iter()
                .filter(|s| s.starts_with("$KV.gantry_7_keys."))
                .cloned()
                .collect()
        };
        assert_eq!(writes(three), ["$KV.gantry_7_keys.request.3.>"]);
        let reader = publish_of(&users, "reader");
        assert_eq!(writes(reader), ["$KV.gantry_7_keys.release.>"]);
        for user in users.iter().filter(|u| u.publish.is_some()) {
            let creates = publish_of(&users, &user.name)
                .contains(&"$JS.API.STREAM.CREATE.KV_gantry_7_keys".to_owned());
            assert_eq!(creates, user.name == "auth", "{}", user.name);
        }
    }

    /// Design 18, §6: a worker writes its own bucket of sealed results and reads none
    /// (a referee that read the provider's result, or its metadata with the digest, could
    /// commit it without running the job); no worker writes another's.
    #[test]
    fn a_worker_writes_its_own_sealed_results_and_reads_none() {
        let users = users(7, &[3, 4]);
        let three = publish_of(&users, "worker-3");
        assert!(three.contains(&"$O.gantry_7_sealed.C.3.>".to_owned()));
        assert!(three.contains(&"$O.gantry_7_sealed.M.3.>".to_owned()));
        assert!(
            !three
                .iter()
                .any(|s| s.contains("gantry_7_sealed.") && !s.contains(".3.")),
            "not another's"
        );
        for read in [
            "DIRECT.GET",
            "CONSUMER.CREATE",
            "STREAM.MSG.GET",
            "STREAM.PURGE",
        ] {
            assert!(
                !three
                    .iter()
                    .any(|s| s.contains("sealed") && s.contains(read)),
                "{read}"
            );
        }
        let reader = publish_of(&users, "reader");
        assert!(reader.contains(&"$JS.API.DIRECT.GET.OBJ_gantry_7_sealed.>".to_owned()));
    }

    /// Design 19: what the auth service grants a handshake is exactly what a configured
    /// worker user of the same node may do, and its replies come to that node's inbox.
    #[test]
    fn a_handshake_gets_its_nodes_worker_permissions_and_inbox() {
        let users = users(7, &[3]);
        let granted = worker_permissions(7, 3);
        assert_eq!(granted.publish, publish_of(&users, "worker-3"));
        assert_eq!(granted.subscribe, vec!["_INBOX_worker-3.>".to_owned()]);
        assert!(!granted.publish.iter().any(|s| s.contains("worker_4")));
    }

    /// The service users log in locally (their account is not among the callout's
    /// `allowed_accounts`), everyone else goes to the callout; the callout's user may
    /// only answer it.
    #[test]
    fn only_clients_that_are_no_configured_user_go_to_the_callout() {
        let conf = render(7, &[]);
        assert!(conf.contains("allowed_accounts: [ AUTH ]"), "{conf}");
        assert!(conf.contains("issuer: $GANTRY_NATS_CALLOUT_ISSUER"));
        assert!(conf.contains("auth_users: [ callout ]"));
        assert!(conf.contains(
            "user: callout, password: $GANTRY_NATS_CALLOUT_PASSWORD, permissions: {\n          \
             publish: { allow: [\"$SYS._INBOX.>\"] }\n          \
             subscribe: { allow: [\"$SYS.REQ.USER.AUTH\", \"_INBOX_callout.>\"] }"
        ));
        assert!(!conf.contains("worker-"), "no worker user unless listed");
        let auth = publish_of(&users(7, &[]), "auth").to_vec();
        assert!(auth.contains(&"$KV.gantry_7_handshakes.>".to_owned()));
        assert!(auth.contains(&"$KV.gantry_7_nodes.>".to_owned()));
        assert!(
            !auth
                .iter()
                .any(|s| s.starts_with("$O.") || s.starts_with("gantry."))
        );
    }

    #[test]
    fn the_config_names_every_user_with_its_password_variable_and_inbox() {
        let conf = render(31337, &[2]);
        for (user, env) in [
            ("admin", "GANTRY_NATS_ADMIN_PASSWORD"),
            ("indexer", "GANTRY_NATS_INDEXER_PASSWORD"),
            ("worker-2", "GANTRY_NATS_WORKER_2_PASSWORD"),
        ] {
            assert!(
                conf.contains(&format!("user: {user}, password: ${env}")),
                "{user}"
            );
        }
        assert!(conf.contains("subscribe: { allow: [\"_INBOX_worker-2.>\"] }"));
        assert_eq!(conf.matches('{').count(), conf.matches('}').count());
    }
}
