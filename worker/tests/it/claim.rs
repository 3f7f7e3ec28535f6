//! Claim mode: with no matcher at all, a worker with `auto_accept` claims the open jobs
//! it fits and pays enough, and leaves the others; a busy one claims the next job only
//! once a slot frees (its running job's container is gone).

use futures::StreamExt;
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{ADMIN, NODES};
use gantry_worker::docker::JOB_LABEL;

use crate::harness::{Net, RunningWorker, Services, cpu_job, shell};
use crate::scripts::of_job;

/// A chain with no matcher, the submitter funded, and a worker on `NODES[0]` configured
/// with `config` (claim mode).
async fn claiming_worker(config: &str) -> (Net, RunningWorker) {
    let net = Net::start_with(|p| p, Services::NO_MATCHER).await;
    net.fund_submitter().await;
    let worker = net.spawn_worker(NODES[0], config).await;
    (net, worker)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_in_claim_mode_claims_what_it_fits() {
    let (net, worker) = claiming_worker(
        "auto_accept = true\nauto_accept_min_payment = \"10000000\"\naccept_inference = false",
    )
    .await;

    // Too much memory for this machine, an inference job, a bounty under the minimum:
    // never claimed.
    let too_big = net.post(cpu_job(4 << 20), &shell("true", 30)).await;
    let mut inference = shell("true", 30);
    inference.kind = gantry_protocol::spec::JobKind::Inference;
    let not_taken = net.post(cpu_job(64), &inference).await;
    let fits = net
        .post(cpu_job(64), &shell("echo claimed > /outputs/x", 30))
        .await;
    net.wait_for_status(fits, JobStatus::Submitted).await;

    let claims = of_job(net.market(ADMIN).JobAssigned_filter(), fits).await;
    let (assigned, _) = claims.last().expect("JobAssigned");
    assert!(
        assigned.claimed,
        "claimed by the agent, not assigned by a matcher"
    );
    assert_eq!(assigned.nodeId, worker.node_id);
    assert_eq!(net.job(too_big).await.state.status, JobStatus::Open);
    assert_eq!(net.job(not_taken).await.state.status, JobStatus::Open);
    assert!(worker.stop().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_busy_worker_in_claim_mode_claims_the_next_job_when_a_slot_frees() {
    let (net, worker) = claiming_worker("auto_accept = true\nmax_concurrent = 1").await;
    // The engine's container events, in its order: (action, job id).
    let mut events = net
        .docker()
        .events(None::<bollard::query_parameters::EventsOptions>);
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<(String, String)>::new()));
    let recording = {
        let seen = seen.clone();
        tokio::spawn(async move {
            while let Some(Ok(event)) = events.next().await {
                let (Some(action), Some(actor)) = (event.action, event.actor) else {
                    continue;
                };
                let job = actor
                    .attributes
                    .and_then(|a| a.get(JOB_LABEL).cloned())
                    .unwrap_or_default();
                seen.lock().unwrap().push((action, job));
            }
        })
    };

    // The one slot is taken by a job that runs for a while; a second job posted meanwhile
    // waits for it instead of being claimed at once.
    let first = net.post(cpu_job(64), &shell("sleep 6", 60)).await;
    net.wait_for_status(first, JobStatus::Assigned).await;
    let second = net.post(cpu_job(64), &shell("true", 60)).await;
    net.wait_for_status(second, JobStatus::Submitted).await;

    let market = net.market(ADMIN);
    let assigned = of_job(market.JobAssigned_filter(), second).await;
    let (second_assigned, _) = assigned.last().expect("JobAssigned");
    assert!(second_assigned.claimed);
    assert_eq!(second_assigned.nodeId, worker.node_id);
    // One at a time: the second job's container started after the first's ended.
    recording.abort();
    let seen = seen.lock().unwrap().clone();
    let at = |action: &str, job: u64| {
        seen.iter()
            .position(|(a, j)| a == action && *j == job.to_string())
            .unwrap_or_else(|| panic!("no {action} of job {job}'s container in {seen:?}"))
    };
    assert!(
        at("die", first) < at("start", second),
        "the second job started before the first ended: {seen:?}"
    );
    assert!(worker.stop().success());
}
