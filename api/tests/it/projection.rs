//! The projection equals the market's state after the scripted activity (the kit's
//! lifecycle and the harness's disputes), after a restart, after a rebuild from an empty
//! database and after a reorg; the rows say what the market's events said.

use std::time::Duration;

use alloy::primitives::{Address, B256, U256};
use gantry_api::model::{JobStatus, NodeStatus, with_failure_reports};
use gantry_api::project::{self, Progress};
use gantry_api::store::Store;
use gantry_protocol::api::{
    AttemptOutcome, ChargeCause, Completion, Failure, JobDetail, RequirementsRow, StateWords,
    TermsWords,
};
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::market::Policy;
use gantry_testkit::accounts::SUBMITTER;
use gantry_testkit::{GUSD, Postgres, TestNet};
use tokio_util::sync::CancellationToken;

use crate::harness::{
    DEPOSIT, JOB_CANCELLED, JOB_DISPUTE_LOST, JOB_DISPUTED, JOB_PAID, JOB_REJECTED, NODE_DISPUTED,
    NODE_EXITING, chain_with_market, post_job,
};

/// Projects into `url` until the projection has applied the chain's head block.
pub(crate) async fn project_to_head(chain: &TestNet, url: &str) -> Store {
    let store = Store::open(url).await.expect("store opens");
    project_store_to_head(chain, store).await
}

/// [`project_to_head`], into `store`.
async fn project_store_to_head(chain: &TestNet, store: Store) -> Store {
    let head = alloy::providers::Provider::get_block_number(&chain.devnet.admin)
        .await
        .unwrap();
    let js = chain.jetstream().await;
    let (tx, mut rx) = tokio::sync::watch::channel(Progress::default());
    let stop = CancellationToken::new();
    let task = tokio::spawn(project::run(
        js,
        chain.devnet.deployment.chain_id,
        store.clone(),
        tx,
        gantry_api::live::Live::default(),
        stop.clone(),
    ));
    let reached = tokio::time::timeout(Duration::from_secs(60), rx.wait_for(|p| p.block >= head))
        .await
        .map(|r| r.map(|_| ()));
    match reached {
        Ok(Ok(())) => {}
        Ok(Err(_)) => panic!("the projection stopped: {:?}", task.await),
        Err(_) => panic!(
            "the projection did not reach block {head}: {:?}",
            *rx.borrow()
        ),
    }
    stop.cancel();
    task.await.unwrap().expect("the projection stops cleanly");
    store
}

/// Every row against what the market holds: each job's state hash against `jobHash`
/// (and its state against the kit's fold of the chain's logs, `TestNet::job`), its barred
/// nodes against `isBarred`; each node against `getNode`; each account's credits against
/// `creditOf`; the treasury, the policy version and the pause against the market's views.
pub(crate) async fn assert_matches_chain(chain: &TestNet, store: &Store) {
    let market = JobMarket::new(chain.devnet.deployment.market, chain.devnet.admin.clone());
    let count = market.jobCount().call().await.unwrap();
    let jobs = store.all_jobs().await.unwrap();
    assert_eq!(jobs.len() as u64, count, "one row per job");
    for row in &jobs {
        let id = row.job_id;
        let job = chain.job(id).await;
        assert_eq!(row.status, job.state.status, "job {id}");
        assert_eq!(row.bounty, job.terms.bounty.to_string(), "job {id}");
        assert_eq!(row.submitter, job.terms.submitter.to_string(), "job {id}");
        assert_eq!(row.deadline, job.terms.deadline, "job {id}");
        assert_eq!(row.policy_version as u32, job.terms.policy, "job {id}");
        let stored = market.jobHash(id).call().await.unwrap();
        assert_eq!(
            row.state_hash,
            (stored != B256::ZERO).then(|| format!("{stored:#x}")),
            "job {id}'s state is the market's"
        );
        assert_eq!(
            row.terms,
            TermsWords::new(&job.terms.pack()),
            "job {id}'s terms"
        );
        assert_eq!(
            row.requirements,
            RequirementsRow::new(&job.terms.requirements),
            "job {id}"
        );
        let words = (stored != B256::ZERO && row.verification.is_none())
            .then(|| StateWords::new(&job.state.pack()));
        assert_eq!(
            row.state, words,
            "job {id}'s state as the market's calls take it"
        );
        if !row.status.is_settled() {
            let state = job.state;
            assert_eq!(
                (row.faults, row.barred),
                (u64::from(state.faults), u64::from(state.barred)),
                "job {id}"
            );
            assert_eq!(row.node_id.unwrap_or(0), state.node_id, "job {id}");
            assert_eq!(row.until.unwrap_or(0), state.until, "job {id}");
        }
        for node in &row.barred_nodes {
            assert!(
                market.isBarred(id, *node).call().await.unwrap(),
                "node {node} is barred from job {id}"
            );
        }
    }
    let nodes = store.all_nodes().await.unwrap();
    assert_eq!(
        nodes.len() as u64,
        chain.registry(0).nodeCount().call().await.unwrap(),
        "one row per node"
    );
    for node in &nodes {
        let id = node.node_id;
        let info = chain.node(id).await;
        assert_eq!(
            node.status,
            NodeStatus::try_from(info.status).unwrap(),
            "node {id}"
        );
        assert_eq!(node.stake, info.stake.to_string(), "node {id}");
        assert_eq!(node.locked_stake, info.lockedStake.to_string(), "node {id}");
        assert_eq!(node.earnings, info.earnings.to_string(), "node {id}");
        assert_eq!(node.fees_owed, info.feesOwed.to_string(), "node {id}");
        assert_eq!(
            node.last_heartbeat,
            u64::from(info.lastHeartbeat),
            "node {id}"
        );
        assert_eq!(
            node.registered_at,
            info.registeredAt.to::<u64>(),
            "node {id}"
        );
        let time = |at: Option<u64>| at.unwrap_or(0);
        assert_eq!(
            time(node.inactive_since),
            info.inactiveSince.to::<u64>(),
            "node {id}"
        );
        assert_eq!(
            time(node.unbonding_ends_at),
            info.unbondingEndsAt.to::<u64>(),
            "node {id}"
        );
    }
    for account in store.all_accounts().await.unwrap() {
        let address: Address = account.account.parse().unwrap();
        let credits = market.creditOf(address).call().await.unwrap();
        assert_eq!(account.credits, credits.to_string(), "{address}'s credits");
    }
    let stats = store.stats().await.unwrap();
    let treasury = market.treasuryBalance().call().await.unwrap();
    assert_eq!(stats.treasury, treasury.to_string(), "the treasury");
    let version = market.policyVersion().call().await.unwrap();
    assert_eq!(stats.policy_version, u64::from(version));
    assert_eq!(stats.paused, market.paused().call().await.unwrap());
}

/// What the market's events said about each side, row by row: the reject's bar and
/// charge, the disputes' bonds and exposure, the refunds, the node's slash with its job,
/// the submitter's credits.
async fn assert_market_rows(chain: &TestNet, store: &Store) {
    let job = |id| async move { store.job(id).await.unwrap().expect("the job") };
    let policy = Policy::from(
        &JobMarket::new(chain.deployment().market, chain.devnet.admin.clone())
            .params()
            .call()
            .await
            .unwrap(),
    );

    let paid = job(JOB_PAID).await;
    assert_eq!(
        (paid.status, paid.completion),
        (JobStatus::Completed, Some(Completion::Accepted))
    );
    let (payout, fee) = (paid.payout.clone().unwrap(), paid.fee.clone().unwrap());
    assert_eq!(
        payout.parse::<u64>().unwrap() + fee.parse::<u64>().unwrap(),
        50 * GUSD,
        "the bounty is the payout and the fee"
    );
    assert_eq!(
        job(JOB_CANCELLED).await.refund,
        Some((50 * GUSD).to_string())
    );

    // The reject bars node 1 and charges it by the time it held the job: what its stake
    // lost (nothing when it gave the job back within the second it got it).
    let rejected = job(JOB_REJECTED).await;
    assert_eq!(rejected.status, JobStatus::Open);
    assert_eq!(rejected.barred_nodes, [NODE_EXITING]);
    assert_eq!((rejected.faults, rejected.barred), (0, 1));
    assert_eq!(rejected.reason.as_deref(), Some("image not found"));
    let node_1 = chain.node(NODE_EXITING).await;
    let charge = U256::from(500 * GUSD) - U256::from(node_1.stake.to::<u128>());
    assert_eq!(rejected.charges.len(), 1);
    assert_eq!(
        (rejected.charges[0].node_id, rejected.charges[0].cause),
        (NODE_EXITING, ChargeCause::Reject)
    );
    assert_eq!(rejected.charges[0].amount, charge.to_string());

    // The open dispute: the bond the policy sets, node 2's exposure held, the arbiter's
    // deadline.
    let disputed = job(JOB_DISPUTED).await;
    let dispute = disputed.dispute.clone().expect("the dispute");
    assert_eq!(disputed.status, JobStatus::Disputed);
    assert_eq!(dispute.bond, policy.bond(20 * u128::from(GUSD)).to_string());
    let node_2 = chain.node(NODE_DISPUTED).await;
    assert_eq!(dispute.exposure, node_2.lockedStake.to_string());
    assert_eq!(
        dispute.exposure,
        (10 * GUSD).to_string(),
        "a tenth of node 2's free stake"
    );
    assert_eq!(disputed.until, Some(dispute.deadline));
    assert_eq!(dispute.outcome, None);

    // The lost one: bounty and bond back to the submitter, the exposure (a tenth of what
    // was free then) slashed.
    let lost = job(JOB_DISPUTE_LOST).await;
    assert_eq!(
        (lost.status, lost.failure, lost.refund.as_deref()),
        (
            JobStatus::Failed,
            Some(Failure::DisputeLost),
            Some((50 * GUSD).to_string().as_str())
        )
    );
    let outcome = lost.dispute.clone().unwrap().outcome.expect("decided");
    assert!(!outcome.provider_won && !outcome.lapsed);
    let bond = policy.bond(50 * u128::from(GUSD));
    assert_eq!(outcome.bond_to_submitter, bond.to_string());
    let slash = (9 * GUSD).to_string();
    assert_eq!(lost.charges.len(), 1);
    assert_eq!(
        (lost.charges[0].cause, lost.charges[0].amount.as_str()),
        (ChargeCause::DisputeLost, slash.as_str())
    );
    let node = store.node(NODE_DISPUTED).await.unwrap().unwrap();
    assert_eq!(
        (node.status, node.inactive_since),
        (NodeStatus::Inactive, None),
        "a slash below the minimum stake stops new work only"
    );
    assert_eq!(node.disputes.len(), 1);
    assert_eq!(node.disputes[0].job_id, JOB_DISPUTED);
    let slashes = store.slashes(NODE_DISPUTED).await.unwrap();
    assert_eq!(slashes.len(), 1);
    assert_eq!(
        (slashes[0].job_id, slashes[0].amount.as_str()),
        (JOB_DISPUTE_LOST, slash.as_str())
    );

    // The provider of job 1 withdrew its pay, which swept the fee to the treasury.
    let node = store.node(NODE_EXITING).await.unwrap().unwrap();
    assert_eq!(
        (node.earnings.as_str(), node.earnings_withdrawn.as_str()),
        ("0", payout.as_str())
    );
    assert_eq!(
        (node.fees_owed.as_str(), node.fees_swept.as_str()),
        ("0", fee.as_str())
    );
    assert_eq!(node.rejected_jobs, 1);
    assert!(node.unbonding_ends_at.is_some());

    // The submitter: two refunds, two bonds posted and one returned, a deposit.
    let submitter = format!("{:#x}", chain.address(SUBMITTER));
    let account = store
        .account(&submitter)
        .await
        .unwrap()
        .expect("the submitter");
    assert_eq!(account.jobs_posted, 5);
    assert_eq!(account.deposited, DEPOSIT.to_string());
    assert_eq!(account.refunded, (100 * GUSD).to_string());
    let bonds = policy.bond(20 * u128::from(GUSD)) + bond;
    assert_eq!(account.bonds_posted, bonds.to_string());
    assert_eq!(account.bonds_returned, bond.to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_projection_equals_the_chain_and_rebuilds_the_same() {
    let chain = chain_with_market().await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("api.db").display());
    let store = project_to_head(&chain, &url).await;
    assert_matches_chain(&chain, &store).await;
    assert_market_rows(&chain, &store).await;
    let timeline: Vec<String> = store
        .timeline(JOB_PAID)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(
        timeline,
        [
            "JobPosted",
            "JobAssigned",
            "ResultSubmitted",
            "JobCompleted"
        ],
        "job 1's timeline"
    );
    let jobs = store.all_jobs().await.unwrap();
    let nodes = store.all_nodes().await.unwrap();
    let accounts = store.all_accounts().await.unwrap();

    // A restart resumes from the checkpoint and changes nothing.
    let checkpoint = store.checkpoint().await.unwrap();
    drop(store);
    let again = project_to_head(&chain, &url).await;
    assert!(again.checkpoint().await.unwrap() >= checkpoint);
    assert_eq!(again.all_jobs().await.unwrap(), jobs);

    // A database whose newest block is not the stream's commit at its sequence (here a
    // row changed by hand, and the block's hash; as after the stream was made again, or
    // with another network's database) is not read on from: it is emptied and the stream
    // projected again from its start, giving the same rows.
    {
        let pool = again.pool();
        let (block, _, _) = again.newest_block().await.unwrap().expect("a block");
        sqlx::query("UPDATE blocks SET hash = $1 WHERE number = $2")
            .bind(format!("{:#x}", B256::repeat_byte(0xee)))
            .bind(block as i64)
            .execute(pool)
            .await
            .unwrap();
        sqlx::query("UPDATE jobs SET body = $1 WHERE job_id = $2")
            .bind("{}")
            .bind(JOB_PAID as i64)
            .execute(pool)
            .await
            .unwrap();
    }
    drop(again);
    let refolded = project_to_head(&chain, &url).await;
    assert_eq!(refolded.all_jobs().await.unwrap(), jobs);
    assert_eq!(refolded.all_nodes().await.unwrap(), nodes);
    assert_eq!(refolded.all_accounts().await.unwrap(), accounts);
    drop(refolded);

    // A rebuild from an empty database gives the same rows.
    let rebuilt_url = format!("sqlite://{}", dir.path().join("rebuilt.db").display());
    let rebuilt = project_to_head(&chain, &rebuilt_url).await;
    assert_eq!(rebuilt.all_jobs().await.unwrap(), jobs);
    assert_eq!(rebuilt.all_nodes().await.unwrap(), nodes);
    assert_eq!(rebuilt.all_accounts().await.unwrap(), accounts);
}

/// A range's fold goes on while the events folded before it are inserted, and stops
/// for the insert where an event reads (or writes) the database: a row not fetched, a
/// policy, a slash's treasury (read from the events before it), a policy's announcement.
/// With an insert every event or two, every kind of the chain's events is folded while
/// one runs or right after one: the rows are still the chain's, and the same as with
/// the usual inserts, and so are the timelines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn folding_while_the_events_before_are_inserted_gives_the_chain_s_rows() {
    let chain = chain_with_market().await;
    let dir = tempfile::tempdir().unwrap();
    let usual = project_to_head(&chain, &sqlite_url(&dir, "usual.db")).await;
    let treasury = JobMarket::new(chain.deployment().market, chain.devnet.admin.clone())
        .params()
        .call()
        .await
        .unwrap()
        .treasury
        .to_string();
    for events in [1, 2] {
        let store = Store::open(&sqlite_url(&dir, &format!("by-{events}.db")))
            .await
            .unwrap()
            .with_events_per_insert(events);
        let store = project_store_to_head(&chain, store).await;
        assert_matches_chain(&chain, &store).await;
        assert_market_rows(&chain, &store).await;
        // The lost dispute's slash went to the treasury the policy before it named.
        let lost = store.job(JOB_DISPUTE_LOST).await.unwrap().unwrap();
        assert_eq!(
            lost.attempt_rows[0].slashed_to.as_deref(),
            Some(treasury.as_str()),
            "{:?}",
            lost.attempt_rows
        );
        assert_eq!(
            store.all_jobs().await.unwrap(),
            usual.all_jobs().await.unwrap()
        );
        assert_eq!(
            store.all_nodes().await.unwrap(),
            usual.all_nodes().await.unwrap()
        );
        assert_eq!(
            store.all_accounts().await.unwrap(),
            usual.all_accounts().await.unwrap()
        );
        for job in JOB_PAID..=JOB_DISPUTE_LOST {
            assert_eq!(
                store.timeline(job).await.unwrap(),
                usual.timeline(job).await.unwrap(),
                "job {job}'s timeline, an insert every {events} events"
            );
        }
    }
}

fn sqlite_url(dir: &tempfile::TempDir, file: &str) -> String {
    format!("sqlite://{}", dir.path().join(file).display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_projection_equals_the_chain_and_the_sqlite_one() {
    let chain = chain_with_market().await;
    let postgres = Postgres::start().expect("postgres starts");
    let store = project_to_head(&chain, &postgres.url()).await;
    assert_matches_chain(&chain, &store).await;

    let dir = tempfile::tempdir().unwrap();
    let sqlite = project_to_head(
        &chain,
        &format!("sqlite://{}", dir.path().join("api.db").display()),
    )
    .await;
    assert_eq!(
        store.all_jobs().await.unwrap(),
        sqlite.all_jobs().await.unwrap()
    );
    assert_eq!(
        store.all_nodes().await.unwrap(),
        sqlite.all_nodes().await.unwrap()
    );
    assert_eq!(
        store.all_accounts().await.unwrap(),
        sqlite.all_accounts().await.unwrap()
    );
    assert_eq!(store.stats().await.unwrap(), sqlite.stats().await.unwrap());
    for node in [NODE_EXITING, NODE_DISPUTED] {
        assert_eq!(
            store.slashes(node).await.unwrap(),
            sqlite.slashes(node).await.unwrap()
        );
    }
    assert_eq!(
        store.timeline(JOB_DISPUTE_LOST).await.unwrap(),
        sqlite.timeline(JOB_DISPUTE_LOST).await.unwrap()
    );
    // A job's detail (one statement, with SQL that differs by backend) is the same on
    // both and equals its parts read one by one.
    let reports = crate::http::worker_reports(chain.devnet.deployment.chain_id);
    // (The hostile one among them does not decode: it is skipped, as the reader does.)
    let batch: Vec<(u64, gantry_api::reports::Report)> = reports
        .iter()
        .filter_map(|(subject, payload)| gantry_api::reports::Report::decode(subject, payload))
        .map(|(_node, report)| report)
        .enumerate()
        .map(|(i, report)| (i as u64 + 1, report))
        .collect();
    for store in [&store, &sqlite] {
        store
            .apply_reports(&batch, batch.len() as u64)
            .await
            .unwrap();
    }
    // The document the database builds for GET /v1/jobs/{id}: the same JSON on both
    // backends, and what the separate reads return.
    for job in JOB_PAID..=JOB_DISPUTE_LOST {
        let document = store.job_document(job).await.unwrap().expect("the job");
        let on_sqlite = sqlite.job_document(job).await.unwrap().expect("the job");
        let value: serde_json::Value = serde_json::from_slice(&document.json).unwrap();
        assert_eq!(
            value,
            serde_json::from_slice::<serde_json::Value>(&on_sqlite.json).unwrap()
        );
        assert_eq!(document.status, on_sqlite.status);
        assert_eq!(value["pending"], serde_json::Value::Null);
        let detail: JobDetail = serde_json::from_value(value).unwrap();
        // The row, its attempts completed by the workers' failure reports.
        let mut row = store.job(job).await.unwrap().unwrap();
        let completions = store.completions(job).await.unwrap();
        with_failure_reports(&mut row.attempt_rows, &completions);
        assert_eq!(detail.job, row);
        assert_eq!(detail.job.status, document.status);
        assert_eq!(detail.timeline, store.timeline(job).await.unwrap());
        assert_eq!(detail.progress, store.progress(job).await.unwrap());
        assert_eq!(detail.completions, store.completions(job).await.unwrap());
    }
    // Job 4's result was the worker's failure report: its attempt failed by itself.
    let document = store.job_document(JOB_DISPUTED).await.unwrap().unwrap();
    let detail: JobDetail = serde_json::from_slice(&document.json).unwrap();
    assert_eq!(
        detail.job.attempt_rows[0].outcome,
        AttemptOutcome::FailedByItself
    );
    let document = store.job_document(JOB_PAID).await.unwrap().unwrap();
    let detail: JobDetail = serde_json::from_slice(&document.json).unwrap();
    assert_eq!(detail.completions.len(), 1);
    assert_eq!(detail.progress.unwrap().epoch, Some(3));
    assert_eq!(store.job_document(99).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reorg_is_rolled_back_to_the_chain_s_state() {
    use alloy::providers::Provider;
    use futures::StreamExt;

    let chain = chain_with_market().await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("sqlite://{}", dir.path().join("api.db").display()))
        .await
        .unwrap();
    let chain_id = chain.devnet.deployment.chain_id;
    let js = chain.jetstream().await;
    let (tx, mut rx) = tokio::sync::watch::channel(Progress::default());
    let stop = CancellationToken::new();
    let task = tokio::spawn(project::run(
        js.clone(),
        chain_id,
        store.clone(),
        tx,
        gantry_api::live::Live::default(),
        stop.clone(),
    ));
    let admin = &chain.devnet.admin;
    let head = admin.get_block_number().await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), rx.wait_for(|p| p.block >= head))
        .await
        .expect("projected to the head")
        .unwrap();
    // The last blocks hold the two disputes and the decision of one: job 5 failed, its
    // bounty and bond credited back, node 2 slashed and inactive with stake held.
    let submitter = format!("{:#x}", chain.address(SUBMITTER));
    let credits = |store: Store| {
        let submitter = submitter.clone();
        async move { store.account(&submitter).await.unwrap().unwrap().credits }
    };
    let credits_before = credits(store.clone()).await;
    assert_eq!(
        store.job(JOB_DISPUTE_LOST).await.unwrap().unwrap().status,
        JobStatus::Failed
    );
    let node = store.node(NODE_DISPUTED).await.unwrap().unwrap();
    assert_eq!(
        (node.status, node.locked_stake.as_str()),
        (NodeStatus::Inactive, "10000000")
    );

    // Replace the last 3 blocks with empty ones, and wait for the indexer to publish the
    // new head's commit: read from the stream (a core subscription would see the
    // indexer's atomic batch before the server stored it).
    let mut commits = js
        .get_stream(gantry_protocol::names::stream_name(chain_id))
        .await
        .unwrap()
        .create_consumer(async_nats::jetstream::consumer::pull::OrderedConfig {
            filter_subject: gantry_protocol::names::block_commit(chain_id, head),
            deliver_policy: async_nats::jetstream::consumer::DeliverPolicy::New,
            ..Default::default()
        })
        .await
        .unwrap()
        .messages()
        .await
        .unwrap();
    let _: serde_json::Value = admin
        .raw_request(
            "anvil_reorg".into(),
            (3u64, Vec::<serde_json::Value>::new()),
        )
        .await
        .expect("anvil_reorg");
    let new_head = admin
        .get_block(alloy::eips::BlockId::latest())
        .await
        .unwrap()
        .unwrap()
        .header
        .hash;
    let recommitted = async {
        loop {
            let message = commits.next().await.unwrap().unwrap();
            let commit: gantry_protocol::envelope::BlockCommit =
                serde_json::from_slice(&message.payload).unwrap();
            if commit.block_hash == new_head {
                return message.info().unwrap().stream_sequence;
            }
        }
    };
    let last = tokio::time::timeout(Duration::from_secs(60), recommitted)
        .await
        .expect("the indexer publishes the new branch");
    tokio::time::timeout(
        Duration::from_secs(60),
        rx.wait_for(|p| p.checkpoint >= last),
    )
    .await
    .expect("the projection follows the new branch")
    .unwrap();
    stop.cancel();
    task.await.unwrap().unwrap();

    // Undone, and refolded from the events that remain: both jobs wait out their
    // challenge window again, node 2 is active and holds nothing, the credits are back.
    for job in [JOB_DISPUTED, JOB_DISPUTE_LOST] {
        let row = store.job(job).await.unwrap().unwrap();
        assert_eq!(
            (row.status, row.dispute),
            (JobStatus::Submitted, None),
            "job {job}"
        );
        assert!(row.charges.is_empty() && row.refund.is_none(), "job {job}");
    }
    let node = store.node(NODE_DISPUTED).await.unwrap().unwrap();
    assert_eq!(
        (
            node.status,
            node.locked_stake.as_str(),
            node.slashed.as_str()
        ),
        (NodeStatus::Active, "0", "0")
    );
    assert!(node.disputes.is_empty());
    assert!(store.slashes(NODE_DISPUTED).await.unwrap().is_empty());
    assert_ne!(credits(store.clone()).await, credits_before);
    assert_matches_chain(&chain, &store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_sharing_one_postgres_apply_each_block_once_and_all_feed_live() {
    let chain = chain_with_market().await;
    let postgres = Postgres::start().expect("postgres starts");
    let chain_id = chain.devnet.deployment.chain_id;
    let head = alloy::providers::Provider::get_block_number(&chain.devnet.admin)
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let mut replicas = Vec::new();
    let mut feeds = Vec::new();
    for _ in 0..2 {
        let store = Store::open(&postgres.url()).await.unwrap();
        let js = chain.jetstream().await;
        let live = gantry_api::live::Live::default();
        feeds.push(live.subscribe());
        let (tx, rx) = tokio::sync::watch::channel(Progress::default());
        let task = tokio::spawn(project::run(
            js,
            chain_id,
            store.clone(),
            tx,
            live,
            stop.clone(),
        ));
        replicas.push((store, rx, task));
    }
    for (_, rx, _) in &mut replicas {
        tokio::time::timeout(Duration::from_secs(60), rx.wait_for(|p| p.block >= head))
            .await
            .expect("each replica reaches the head")
            .unwrap();
    }
    // Each replica keeps job 3's document ready; one of them will apply its cancel, the
    // other finds it applied: both must forget what they kept.
    for (store, _, _) in &replicas {
        let kept = store.job_document(JOB_REJECTED).await.unwrap().unwrap();
        assert_ne!(kept.status, JobStatus::Cancelled);
    }
    let state = chain.job(JOB_REJECTED).await;
    let market = chain.market(SUBMITTER);
    let cancel = market.cancel(JOB_REJECTED, state.terms.pack(), state.state.pack());
    gantry_testkit::confirm_receipt("cancel", cancel.send().await)
        .await
        .unwrap();
    // Live, a block reaches both replicas' feeds whichever applied it: the other reads
    // what was stored. (Catching up, a replica feeds what it projects from the shared
    // checkpoint it starts at: blocks the other applied before that are not replayed.)
    let job = post_job(&chain, 10 * GUSD).await;
    let head = alloy::providers::Provider::get_block_number(&chain.devnet.admin)
        .await
        .unwrap();
    for feed in &mut feeds {
        tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                let event = feed.recv().await.expect("the feed keeps up");
                if let gantry_api::live::LiveEvent::Job(row) = &*event
                    && row.job_id == job
                {
                    break;
                }
            }
        })
        .await
        .expect("each replica's feed has the new job");
    }
    for (_, rx, _) in &mut replicas {
        tokio::time::timeout(Duration::from_secs(60), rx.wait_for(|p| p.block >= head))
            .await
            .expect("each replica reaches the new head")
            .unwrap();
    }
    for (store, _, _) in &replicas {
        let answered = store.job_document(JOB_REJECTED).await.unwrap().unwrap();
        let built = store
            .build_job_document(JOB_REJECTED)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(answered.status, JobStatus::Cancelled);
        assert_eq!(answered.json, built.json);
    }
    stop.cancel();
    let dir = tempfile::tempdir().unwrap();
    let alone = project_to_head(
        &chain,
        &format!("sqlite://{}", dir.path().join("api.db").display()),
    )
    .await;
    let events = |store: &Store| {
        let pool = store.pool().clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM events")
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    for (store, _, task) in replicas {
        task.await.unwrap().expect("no replica fails");
        assert_matches_chain(&chain, &store).await;
        assert_eq!(
            events(&store).await,
            events(&alone).await,
            "each event once"
        );
        assert_eq!(
            store.all_jobs().await.unwrap(),
            alone.all_jobs().await.unwrap()
        );
    }
}

/// Two projectors share a database; one finds the projection is not of the stream and
/// empties it (a new epoch): the other, still reading the old stream, can apply nothing
/// more (it stops, and its restart reads on from the new checkpoint) and never writes a
/// block into the emptied projection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_projector_whose_projection_was_emptied_by_another_writes_nothing_more() {
    use gantry_api::store::StoreError;
    use gantry_protocol::envelope::{BlockCommit, ENVELOPE_VERSION};
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("shared.db").display());
    let old = Store::open(&url).await.unwrap();
    let new = Store::open(&url).await.unwrap();
    let commit = |number: u64| BlockCommit {
        v: ENVELOPE_VERSION,
        chain_id: 1,
        block_number: number,
        block_hash: B256::with_last_byte(number as u8),
        parent_hash: B256::with_last_byte(number as u8 - 1),
        block_timestamp: 1_000 + number,
        event_count: 0,
    };
    old.apply_block(&[], &commit(1), 1).await.unwrap();
    assert!(new.empty_projection().await.unwrap());
    assert_eq!(new.checkpoint().await.unwrap(), 0);
    assert!(matches!(
        old.apply_block(&[], &commit(2), 2).await,
        Err(StoreError::Superseded(1))
    ));
    assert_eq!(new.newest_block().await.unwrap(), None, "nothing written");
    // Restarted, it writes under the new epoch (the other emptied it first).
    assert!(!old.empty_projection().await.unwrap());
    old.apply_block(&[], &commit(1), 1).await.unwrap();
    assert_eq!(new.checkpoint().await.unwrap(), 1);
}

/// A stored event reads back as it was published: its fields (a `JobPosted`'s spec kept
/// as bytes, its hex put back), on SQLite byte for byte in the job's document, on both
/// databases in the timeline (a reorg's refold reads them as the timeline does: the reorg
/// test holds it to the chain).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_event_reads_back_as_published() {
    use alloy::primitives::{Bytes, aliases::U96};
    use gantry_protocol::envelope::{BlockCommit, ENVELOPE_VERSION, EventEnvelope};
    use gantry_protocol::events::{ContractKind, DecodedEvent, event_name};
    use gantry_protocol::market::Terms;

    let submitter = Address::repeat_byte(0x30);
    let terms = Terms {
        submitter,
        bounty: 5_000_000,
        spec_hash: B256::repeat_byte(0x11),
        requirements: gantry_protocol::eligibility::Requirements::from(
            &gantry_testkit::scenario::h100_requirements(),
        ),
        deadline: 1_750_086_400,
        policy: 1,
        verification: gantry_protocol::market::Verification::NONE,
    };
    // A spec of the example's bytes, one of no bytes (`0x`: an empty blob, not NULL), and
    // bytes that are no spec and hold a NUL (shown as text: PostgreSQL's `jsonb`, which
    // the document is built with, takes no `\u0000`).
    let specs = [
        gantry_testkit::scenario::example_spec(),
        Vec::new(),
        b"{\"image\":\"a\0b\"}".to_vec(),
    ];
    let events: Vec<EventEnvelope> = specs
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let job = i as u64 + 1;
            let posted = JobMarket::JobPosted {
                jobId: job,
                submitter,
                terms: terms.pack(),
                fromCredits: U96::ZERO,
                spec: Bytes::from(spec.clone()),
            };
            EventEnvelope {
                v: ENVELOPE_VERSION,
                chain_id: 31_337,
                block_number: 1,
                block_hash: B256::repeat_byte(0xb1),
                block_timestamp: 1_750_000_012,
                tx_hash: B256::repeat_byte(0x7a),
                log_index: i as u64,
                event: DecodedEvent {
                    contract: ContractKind::Market,
                    name: event_name::<JobMarket::JobPosted>().into(),
                    key: job.to_string(),
                    data: serde_json::to_value(posted).unwrap(),
                },
            }
        })
        .collect();
    let commit = BlockCommit {
        v: ENVELOPE_VERSION,
        chain_id: 31_337,
        block_number: 1,
        block_hash: events[0].block_hash,
        parent_hash: B256::ZERO,
        block_timestamp: events[0].block_timestamp,
        event_count: events.len() as u32,
    };
    let dir = tempfile::tempdir().unwrap();
    let postgres = Postgres::start().expect("postgres starts");
    let sqlite_url = format!("sqlite://{}", dir.path().join("api.db").display());
    for url in [sqlite_url.as_str(), &postgres.url()] {
        let store = Store::open(url).await.expect("store opens");
        store
            .apply_block(&events, &commit, 1)
            .await
            .expect("block applied");
        for (i, event) in events.iter().enumerate() {
            let job = i as u64 + 1;
            let timeline = store.timeline(job).await.unwrap();
            assert_eq!(timeline.len(), 1, "{url} job {job}");
            assert_eq!(timeline[0].data, event.event.data, "{url} job {job}");
            assert_eq!(timeline[0].tx, format!("{:#x}", event.tx_hash), "{url}");
            let document = store
                .build_job_document(job)
                .await
                .unwrap()
                .expect("the job");
            // On SQLite the document holds the event's JSON as published, byte for byte;
            // PostgreSQL's jsonb orders keys its own way: equal as JSON there.
            if url == sqlite_url {
                let published = format!(
                    "\"data\":{}",
                    serde_json::to_string(&event.event.data).unwrap()
                );
                let text = String::from_utf8(document.json.to_vec()).unwrap();
                assert!(
                    text.contains(&published),
                    "the document's timeline has the event as published: {text}"
                );
            }
            let parsed: serde_json::Value = serde_json::from_slice(&document.json).unwrap();
            assert_eq!(
                parsed["timeline"][0]["data"], event.event.data,
                "{url} job {job}: the document's event"
            );
            if job == 3 {
                assert_eq!(parsed["specText"], "{\"image\":\"a\u{FFFD}b\"}", "{url}");
            }
        }
    }
}

/// A node's strings may hold a NUL (a result's URI here, as the market emits it): the
/// job's document still builds on PostgreSQL, whose `jsonb` takes no `\u0000` (it
/// failed there, 22P05, so the submitter's job had no document), showing it as U+FFFD;
/// SQLite keeps it as it is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_s_string_holding_a_nul_leaves_the_job_s_document_readable() {
    use alloy::primitives::{
        Bytes,
        aliases::{U40, U96},
    };
    use gantry_protocol::envelope::{BlockCommit, ENVELOPE_VERSION, EventEnvelope};
    use gantry_protocol::events::{ContractKind, DecodedEvent, event_name};
    use gantry_protocol::market::Terms;

    let submitter = Address::repeat_byte(0x30);
    let requirements = gantry_testkit::scenario::h100_requirements();
    let terms = Terms {
        submitter,
        bounty: 5_000_000,
        spec_hash: B256::repeat_byte(0x11),
        requirements: gantry_protocol::eligibility::Requirements::from(&requirements),
        deadline: 1_750_086_400,
        policy: 1,
        verification: gantry_protocol::market::Verification::NONE,
    };
    let at = 1_750_000_012;
    let data = [
        (
            event_name::<JobMarket::JobPosted>(),
            serde_json::to_value(JobMarket::JobPosted {
                jobId: 1,
                submitter,
                terms: terms.pack(),
                fromCredits: U96::ZERO,
                spec: Bytes::from(gantry_testkit::scenario::example_spec()),
            }),
        ),
        (
            event_name::<JobMarket::JobAssigned>(),
            serde_json::to_value(JobMarket::JobAssigned {
                jobId: 1,
                nodeId: 1,
                claimed: false,
                until: U40::from(at + 3_600),
            }),
        ),
        (
            event_name::<JobMarket::ResultSubmitted>(),
            serde_json::to_value(JobMarket::ResultSubmitted {
                jobId: 1,
                resultHash: B256::repeat_byte(7),
                resultURI: "ipfs://out\0x".into(),
                until: U40::from(at + 7_200),
            }),
        ),
    ];
    let events: Vec<EventEnvelope> = data
        .into_iter()
        .enumerate()
        .map(|(i, (name, data))| EventEnvelope {
            v: ENVELOPE_VERSION,
            chain_id: 31_337,
            block_number: 1,
            block_hash: B256::repeat_byte(0xb1),
            block_timestamp: at,
            tx_hash: B256::repeat_byte(0x7a),
            log_index: i as u64,
            event: DecodedEvent {
                contract: ContractKind::Market,
                name: name.into(),
                key: "1".into(),
                data: data.unwrap(),
            },
        })
        .collect();
    let commit = BlockCommit {
        v: ENVELOPE_VERSION,
        chain_id: 31_337,
        block_number: 1,
        block_hash: B256::repeat_byte(0xb1),
        parent_hash: B256::ZERO,
        block_timestamp: at,
        event_count: events.len() as u32,
    };
    let dir = tempfile::tempdir().unwrap();
    let postgres = Postgres::start().expect("postgres starts");
    let sqlite_url = format!("sqlite://{}", dir.path().join("api.db").display());
    for (url, shown) in [
        (sqlite_url.as_str(), "ipfs://out\0x"),
        (&postgres.url(), "ipfs://out\u{FFFD}x"),
    ] {
        let store = Store::open(url).await.expect("store opens");
        store.apply_block(&events, &commit, 1).await.unwrap();
        let job = store.job(1).await.unwrap().expect("the job");
        assert_eq!(job.result_uri.as_deref(), Some("ipfs://out\0x"), "{url}");
        let document = store
            .build_job_document(1)
            .await
            .unwrap()
            .expect("the job's document");
        let parsed: serde_json::Value = serde_json::from_slice(&document.json).unwrap();
        assert_eq!(parsed["resultUri"], shown, "{url}");
        assert_eq!(parsed["timeline"][2]["data"]["resultURI"], shown, "{url}");
    }
}
