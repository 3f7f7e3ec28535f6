//! A `TestNet` starts what a test asks for: with the services in this process it runs
//! the market (a posted job is assigned by the matcher it started, as the account it
//! granted the role); with PostgreSQL alone, it has no NATS.

use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{KEEPER, NODES, SECOND_MATCHER, SUBMITTER};
use gantry_testkit::{JobPost, TestNet, scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_posted_job_is_assigned_by_the_matcher_the_net_started() {
    let net = TestNet::builder()
        .indexer()
        .matcher(SECOND_MATCHER)
        .keeper(KEEPER)
        .start()
        .await
        .expect("the test net starts");
    let node = net.register_own_node(NODES[0], scenario::h100_node()).await;
    net.fund_submitter().await;
    let job = net.post_job(SUBMITTER, JobPost::default()).await;

    net.wait_for_status(job, JobStatus::Assigned).await;
    assert_eq!(net.job(job).await.state.node_id, node);
    assert_eq!(net.node(node).await.operator, net.address(NODES[0]));
}

#[tokio::test]
async fn a_test_net_starts_what_it_is_asked_for_and_nothing_else() {
    let net = TestNet::builder()
        .postgres()
        .start()
        .await
        .expect("the test net starts");
    assert_eq!(net.postgres().psql("select 1").expect("psql"), "1");
    assert!(net.now().await > 0, "the chain runs");
    let nats = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| net.nats().url()));
    assert!(nats.is_err(), "no NATS unless asked for");
}

/// The deployment offers verified jobs (its rules set, `dev_verify_params`), and the
/// shared fold reads a verified job as the market stores it: its five-word state hashes to
/// the market's word (`job` checks that), Committing until the end of its commit phase.
/// No call of the market's own reaches it. Its seats, folded by `market::Seat` from their
/// events, and seals made by `market::seal` are what the market takes: the three seats
/// commit, reveal one digest and are paid.
#[tokio::test]
async fn a_verified_job_folds_to_the_markets_word_and_no_market_call_reaches_it() {
    use alloy::primitives::{U256, aliases::U96};
    use gantry_protocol::bindings::Verification;
    use gantry_testkit::{GUSD, confirm_receipt};

    let net = TestNet::builder()
        .start()
        .await
        .expect("the test net starts");
    let nodes = net.wasm_pool().await;
    assert_eq!(
        net.registry(KEEPER).poolSize().call().await.unwrap(),
        U256::from(3)
    );
    let id = net.post_replicated().await;
    let job = net.job(id).await;
    assert_eq!(job.state.status, JobStatus::Committing);
    assert_eq!(
        job.state.until,
        job.terms.deadline - 60,
        "until: the end of the commit phase"
    );
    assert_eq!(job.terms.verification.size, 3);
    assert_eq!(job.terms.escrow(), 15 * u128::from(GUSD));
    let verified = job.state.verified.expect("a verified job's words");
    assert_eq!(verified.draw.seat_stake, u128::from(20 * GUSD));
    assert!(verified.draw.draw_block > 0, "the first draw is armed");

    // Anyone draws the round from its block: three seats, of the three members, each
    // locking its seat stake; the fold follows (`job` checks the hash again).
    use alloy::providers::Provider;
    net.provider(KEEPER)
        .raw_request::<_, ()>("anvil_mine".into(), (U256::from(2),))
        .await
        .expect("anvil mines");
    confirm_receipt(
        "draw",
        Verification::new(net.devnet.deployment.market, net.provider(KEEPER))
            .draw(
                id,
                job.terms.pack().into(),
                job.state.pack_verified().unwrap(),
            )
            // What a draw costs depends on its block's seed (how many samples it takes):
            // an estimate made under another seed can fall short.
            .gas(1_000_000)
            .send()
            .await,
    )
    .await
    .expect("drawn");
    let drawn = net.job(id).await;
    let verified = drawn.state.verified.expect("verified");
    let mut seated: Vec<u64> = (0..3).map(|i| verified.seat(i)).collect();
    seated.sort_unstable();
    assert_eq!(seated, nodes, "the three members hold the three seats");
    assert_eq!(drawn.state.verified.unwrap().draw.rounds, 1);
    for node in &nodes {
        assert_eq!(net.node(*node).await.lockedStake, U96::from(20 * GUSD));
    }

    // The market's own calls take a two-word state, which never hashes to a verified
    // job's word.
    let Err(stale) = net
        .market(SUBMITTER)
        .cancel(id, drawn.terms.pack(), drawn.state.pack())
        .call()
        .await
    else {
        panic!("a market call on a verified job went through");
    };
    assert!(
        matches!(
            stale.as_decoded_interface_error::<gantry_protocol::bindings::JobMarket::JobMarketErrors>(),
            Some(gantry_protocol::bindings::JobMarket::JobMarketErrors::JobMarket_StaleState(_))
        ),
        "{stale}"
    );

    // Each seat's agent commits the seal of one digest; the seats, folded from the job's
    // events by `market::Seats`, open the reveals; each reveals; anyone decides.
    use gantry_protocol::market::Seat;
    let market = net.devnet.deployment.market;
    let digest = |_| alloy::primitives::keccak256("the module's output");
    let terms: Verification::JobTerms = drawn.terms.pack().into();
    let seats = net.seats(id).await;
    assert!(seats.0[..3].iter().all(|s| s.phase == Seat::SEATED));
    net.commit_seats(id, &nodes, digest).await;
    let seats = net.seats(id).await;
    assert!(seats.0[..3].iter().all(|s| s.phase == Seat::COMMITTED));
    confirm_receipt(
        "openReveals",
        Verification::new(market, net.provider(KEEPER))
            .openReveals(
                id,
                terms.clone(),
                drawn.state.pack_verified().unwrap(),
                seats.list(3),
            )
            .send()
            .await,
    )
    .await
    .expect("every seat committed: the reveals open");
    let revealing = net.job(id).await;
    assert_eq!(revealing.state.status, JobStatus::Revealing);
    net.reveal_seats(id, &nodes, digest).await;
    confirm_receipt(
        "decide",
        Verification::new(market, net.provider(KEEPER))
            .decide(
                id,
                terms,
                revealing.state.pack_verified().unwrap(),
                net.seats(id).await.list(3),
            )
            .send()
            .await,
    )
    .await
    .expect("every seat revealed: decided");
    let decided = net.job(id).await;
    assert_eq!(decided.state.status, JobStatus::Completed);
    for node in &nodes {
        let info = net.node(*node).await;
        assert_eq!(info.lockedStake, U96::ZERO, "the seat's lock is released");
        assert_eq!(
            info.earnings,
            U96::from(5 * GUSD - 5 * GUSD / 40),
            "paid, less the fee"
        );
    }
}

/// A refereed job's undisputed life on anvil, every call taking the state the shared fold
/// made of the job's events (`job` checks its hash): placed by the matcher with the
/// provider's hold locked, answered with the result's seal (the fold keeps it), accepted,
/// paid.
#[tokio::test]
async fn a_refereed_job_is_placed_answered_and_paid_through_the_shared_fold() {
    use alloy::primitives::aliases::U96;
    use alloy::providers::Provider;
    use gantry_protocol::bindings::{Referees, Verification};
    use gantry_testkit::accounts::MATCHER;
    use gantry_testkit::{GUSD, confirm_receipt};

    let (net, provider, id) = refereed_job().await;
    let market = net.devnet.deployment.market;
    let job = net.job(id).await;
    assert_eq!(job.state.status, JobStatus::Open);
    let terms: Referees::JobTerms = job.terms.pack().into();
    let state = |s: Verification::VerifiedState| Referees::VerifiedState::from(s);

    confirm_receipt(
        "assignRefereed",
        Referees::new(market, net.provider(MATCHER))
            .assignRefereed(
                id,
                provider,
                terms.clone(),
                state(job.state.pack_verified().unwrap()),
            )
            .send()
            .await,
    )
    .await
    .expect("the matcher places it");
    let assigned = net.job(id).await;
    assert_eq!(assigned.state.status, JobStatus::Assigned);
    // The hold: the seat stake (20 gUSD, the devnet's floor) and three bounties.
    assert_eq!(net.node(provider).await.lockedStake, U96::from(35 * GUSD));

    // The digest stays off the chain until a dispute's referees committed: the provider
    // submits its seal (`market::seal`, the provider's seat number).
    let chain_id = net.provider(KEEPER).get_chain_id().await.unwrap();
    let sealed = gantry_protocol::market::seal(
        chain_id,
        market,
        id,
        gantry_protocol::market::PROVIDER_SEAT,
        provider,
        alloy::primitives::keccak256("the module's output"),
        alloy::primitives::keccak256("the provider's salt"),
    );
    confirm_receipt(
        "submitRefereedResult",
        Referees::new(market, net.provider(NODES[1]))
            .submitRefereedResult(
                id,
                terms.clone(),
                state(assigned.state.pack_verified().unwrap()),
                sealed,
                "gantry://results/1".into(),
            )
            .send()
            .await,
    )
    .await
    .expect("the provider answers");
    let submitted = net.job(id).await;
    assert_eq!(submitted.state.status, JobStatus::Submitted);
    assert_eq!(submitted.state.verified.unwrap().result, sealed);

    confirm_receipt(
        "acceptVerified",
        Referees::new(market, net.provider(SUBMITTER))
            .acceptVerified(id, terms, state(submitted.state.pack_verified().unwrap()))
            .send()
            .await,
    )
    .await
    .expect("the submitter accepts");
    assert_eq!(net.job(id).await.state.status, JobStatus::Completed);
    let info = net.node(provider).await;
    assert_eq!(info.lockedStake, U96::ZERO, "the hold is released");
    assert_eq!(info.earnings, U96::from(5 * GUSD - 5 * GUSD / 40));
}

/// A refereed dispute no referee can be drawn for (the pool is too small) goes to the
/// arbiter once the provider opened its seal, and when the arbiter lapses the result
/// stands: each step takes the state the shared fold made (`RefereesRequested`,
/// `RefereesDecided`), checked against the market's word.
#[tokio::test]
async fn a_refereed_dispute_without_a_panel_goes_to_the_arbiter_and_lapses() {
    use alloy::primitives::aliases::U96;
    use alloy::providers::Provider;
    use gantry_protocol::bindings::Referees;
    use gantry_testkit::accounts::MATCHER;
    use gantry_testkit::{GUSD, confirm_receipt};

    let (net, provider, id) = refereed_job().await;
    let market = net.devnet.deployment.market;
    let referees = |account: usize| Referees::new(market, net.provider(account));
    let state = |job: &gantry_protocol::market::Job| {
        Referees::VerifiedState::from(job.state.pack_verified().unwrap())
    };
    let job = net.job(id).await;
    let terms: Referees::JobTerms = job.terms.pack().into();
    confirm_receipt(
        "assignRefereed",
        referees(MATCHER)
            .assignRefereed(id, provider, terms.clone(), state(&job))
            .send()
            .await,
    )
    .await
    .expect("placed");
    let job = net.job(id).await;
    let chain_id = net.provider(KEEPER).get_chain_id().await.unwrap();
    let (digest, salt) = (
        alloy::primitives::keccak256("a result"),
        alloy::primitives::keccak256("a salt"),
    );
    let sealed = gantry_protocol::market::seal(
        chain_id,
        market,
        id,
        gantry_protocol::market::PROVIDER_SEAT,
        provider,
        digest,
        salt,
    );
    confirm_receipt(
        "submitRefereedResult",
        referees(NODES[1])
            .submitRefereedResult(
                id,
                terms.clone(),
                state(&job),
                sealed,
                "gantry://results/1".into(),
            )
            .send()
            .await,
    )
    .await
    .expect("answered");
    let job = net.job(id).await;
    confirm_receipt(
        "requestReferees",
        referees(SUBMITTER)
            .requestReferees(id, terms.clone(), state(&job))
            .send()
            .await,
    )
    .await
    .expect("disputed");
    let disputed = net.job(id).await;
    assert_eq!(disputed.state.status, JobStatus::Committing);
    assert_eq!(disputed.state.node_id, provider, "the provider stays named");
    // No referee can be drawn (the pool is under its minimum). In the reveal phase the
    // provider opens its seal; then anyone sends the dispute to the arbiter.
    let verified = disputed.state.verified.unwrap();
    net.advance(verified.draw.commit_end - net.now().await + 1)
        .await;
    confirm_receipt(
        "revealRefereed",
        referees(NODES[1])
            .revealRefereed(id, terms.clone(), state(&disputed), digest, salt)
            .send()
            .await,
    )
    .await
    .expect("the provider reveals");
    assert_eq!(
        net.job(id).await.state,
        disputed.state,
        "the provider's reveal is not the job's word"
    );
    confirm_receipt(
        "decideReferees",
        referees(KEEPER)
            .decideReferees(
                id,
                terms.clone(),
                state(&disputed),
                vec![Referees::Seat::default(); 3],
            )
            .send()
            .await,
    )
    .await
    .expect("decided");
    let arbitrating = net.job(id).await;
    assert_eq!(arbitrating.state.status, JobStatus::Arbitrating);
    assert_eq!(
        net.node(provider).await.lockedStake,
        U96::from(35 * GUSD),
        "the hold kept for the arbiter"
    );
    net.advance(arbitrating.state.until - net.now().await).await;
    confirm_receipt(
        "settleVerified",
        referees(KEEPER)
            .settleVerified(id, terms, state(&arbitrating))
            .send()
            .await,
    )
    .await
    .expect("the arbiter lapsed");
    assert_eq!(net.job(id).await.state.status, JobStatus::Completed);
    let info = net.node(provider).await;
    assert_eq!(info.lockedStake, U96::ZERO);
    assert_eq!(
        info.earnings,
        U96::from(5 * GUSD - 5 * GUSD / 40),
        "the result stands"
    );
}

/// A test net with one WASM node of `NODES[1]`'s and an Open refereed 3-job of the
/// submitter's on it (5 gUSD, 600 s, an hour to run): (net, node, job).
async fn refereed_job() -> (TestNet, u64, u64) {
    use gantry_protocol::bindings::NodeRegistry;
    use gantry_protocol::eligibility::Engines;
    use gantry_protocol::market::Verification as Policy;

    let net = TestNet::builder()
        .start()
        .await
        .expect("the test net starts");
    let wasm = NodeRegistry::NodeCapabilities {
        cpuCores: 4,
        ramMiB: 8_192,
        maxConcurrentJobs: 1,
        engines: Engines::WASM.0,
        ..Default::default()
    };
    let provider = net.register_own_node(NODES[1], wasm).await;
    let id = net.post_verified(Policy::REFEREED, 3, 0).await;
    (net, provider, id)
}

/// The keeper the net started (the liveness service) drives a replicated 3/2 job by itself:
/// it draws the armed round once the chain reaches its block, opens the reveals once the
/// seats committed, and decides once they revealed. The seats' agents only commit and
/// reveal, as workers do; nobody else sends a call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_the_keeper_draws_opens_the_reveals_and_decides() {
    use alloy::primitives::{U256, aliases::U96};
    use alloy::providers::Provider;
    use gantry_testkit::GUSD;

    let net = TestNet::builder()
        .indexer()
        .keeper(KEEPER)
        .start()
        .await
        .expect("the test net starts");
    let nodes = net.wasm_pool().await;
    let id = net.post_replicated().await;
    net.provider(KEEPER)
        .raw_request::<_, ()>("anvil_mine".into(), (U256::from(2),))
        .await
        .expect("anvil mines");
    net.wait_until("the keeper drew the seats", || async {
        net.job(id)
            .await
            .state
            .verified
            .is_some_and(|v| (0..3).all(|i| v.seat(i) != 0))
    })
    .await;

    // Why it waits, where the API reads pending jobs' explanations.
    let explanations = net
        .jetstream()
        .await
        .get_key_value(gantry_protocol::names::pending_bucket(net.chain_id()))
        .await
        .expect("the keeper made the explanations' bucket");
    let explained = |prefix: &'static str| {
        let explanations = explanations.clone();
        move || {
            let explanations = explanations.clone();
            async move {
                explanations
                    .get(id.to_string())
                    .await
                    .ok()
                    .flatten()
                    .and_then(|bytes| {
                        serde_json::from_slice::<gantry_protocol::pending::PendingExplanation>(
                            &bytes,
                        )
                        .ok()
                    })
                    .is_some_and(|p| p.summary.starts_with(prefix))
            }
        }
    };
    net.wait_until(
        "the keeper explains the commit phase",
        explained("replicated: commit phase: 0 of 3 replicas committed"),
    )
    .await;

    let digest = |_| alloy::primitives::keccak256("the module's output");
    net.commit_seats(id, &nodes, digest).await;
    net.wait_for_status(id, JobStatus::Revealing).await;
    net.wait_until(
        "the keeper explains the reveal phase",
        explained("replicated: reveal phase: 0 of 3 commitments opened"),
    )
    .await;
    net.reveal_seats(id, &nodes, digest).await;
    net.wait_for_status(id, JobStatus::Completed).await;
    net.wait_until("the explanation is gone once decided", || async {
        explanations
            .get(id.to_string())
            .await
            .ok()
            .flatten()
            .is_none()
    })
    .await;
    for node in &nodes {
        let info = net.node(*node).await;
        assert_eq!(info.lockedStake, U96::ZERO, "the seat's lock is released");
        assert_eq!(info.earnings, U96::from(5 * GUSD - 5 * GUSD / 40), "paid");
    }
}
