//! Money: a cancelled job's refund shows in `balance` and `withdraw` pays it out; a
//! dispute posts the bond (approving exactly that); `accept` pays the provider; the
//! arbiter decides disputes both ways and a lapsed one is settled; the operator withdraws
//! the node's earnings; reverts read as sentences with their exit codes.

use alloy::primitives::{B256, U256};
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{ADMIN, AGENT, MATCHER, OPERATOR, OTHER, SUBMITTER};
use gantry_testkit::{GUSD, scenario};

use crate::harness::{Gantry, Net, Output};

/// Has node 1 (served by [`AGENT`]) take job `job` and submit a result for it.
async fn answered(net: &Net, job: u64) {
    net.assign(MATCHER, job, 1).await;
    net.submit_result(AGENT, job, B256::repeat_byte(7), "nats://x/y")
        .await;
}

/// Registers node 1: [`OPERATOR`]'s H100 node, served by [`AGENT`], 500 gUSD staked.
async fn register_node(net: &Net) -> u64 {
    net.register_node(
        OPERATOR,
        net.address(AGENT),
        scenario::h100_node(),
        500 * GUSD,
    )
    .await
}

/// `gantry job resolve <job> <flags>` as `gantry`.
async fn resolve(gantry: &Gantry, job: u64, flags: &[&str]) -> Output {
    let job = job.to_string();
    gantry
        .run(&[&["job", "resolve", &job][..], flags].concat())
        .await
}

/// Posts a CPU job with `bounty` (whole gUSD) through the CLI as `account`.
async fn submit(net: &Net, account: usize, bounty: &str) -> u64 {
    let out = net
        .gantry(account)
        .run(&[
            "job", "submit", "--image", "busybox", "--bounty", bounty, "--json", "--", "true",
        ])
        .await
        .ok();
    out.json()["jobId"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_job_is_refunded_into_credits_that_withdraw_pays_out() {
    let net = Net::start().await;
    net.mint(SUBMITTER, 50).await;
    let gantry = net.gantry(SUBMITTER);
    let job = submit(&net, SUBMITTER, "12.5").await;

    let balance = gantry.run(&["balance", "--json"]).await.ok().json();
    assert_eq!(balance["wallet"], "37500000");
    assert_eq!(balance["credits"], "0");
    assert_eq!(balance["symbol"], "gUSD");

    let out = gantry.run(&["job", "cancel", &job.to_string()]).await.ok();
    assert!(
        out.stdout.contains("cancelled: 12.5 gUSD credited to you"),
        "{out:#?}"
    );
    let balance = gantry.run(&["balance", "--json"]).await.ok().json();
    assert_eq!(balance["credits"], "12500000");
    let text = gantry.run(&["balance"]).await.ok().stdout;
    assert!(text.contains("credits  12.5 gUSD"), "{text}");

    // Reverts decoded: the status, an unknown job.
    gantry
        .run(&["job", "cancel", &job.to_string()])
        .await
        .failed(
            4,
            &format!("job {job} is cancelled: only an open job can be cancelled"),
        );
    gantry
        .run(&["job", "cancel", "99"])
        .await
        .failed(3, "job 99 does not exist");
    // Someone else's job.
    let other = submit(&net, SUBMITTER, "1").await;
    net.mint(OTHER, 1).await;
    net.gantry(OTHER)
        .run(&["job", "cancel", &other.to_string()])
        .await
        .failed(
            4,
            &format!("job {other} was not posted by {}", net.address(OTHER)),
        );

    // The 1 gUSD job was posted from the credits: 11.5 of the 12.5 are left.
    let withdrawn = gantry.run(&["withdraw", "--json"]).await.ok().json();
    assert_eq!(withdrawn["amount"], "11500000");
    assert_eq!(net.balance(SUBMITTER).await, U256::from(49 * GUSD));
    let balance = gantry.run(&["balance", "--json"]).await.ok().json();
    assert_eq!(balance["credits"], "0");
    gantry
        .run(&["withdraw"])
        .await
        .failed(4, "has no credits to withdraw");
    // A read needs no key, only an address.
    let someone = net
        .gantry_without_key()
        .run(&[
            "balance",
            "--json",
            "--address",
            &net.address(SUBMITTER).to_string(),
        ])
        .await
        .ok()
        .json();
    assert_eq!(someone["wallet"], (49 * GUSD).to_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dispute_posts_exactly_the_bond_and_accept_pays_the_provider() {
    let net = Net::start().await;
    let d = net.devnet.deployment;
    // A node (OPERATOR's, served by AGENT) and two jobs of SUBMITTER's, both assigned and
    // submitted.
    register_node(&net).await;
    net.mint(SUBMITTER, 100).await;
    let (disputed, accepted) = (
        submit(&net, SUBMITTER, "20").await,
        submit(&net, SUBMITTER, "30").await,
    );
    for job in [disputed, accepted] {
        answered(&net, job).await;
    }
    let gantry = net.gantry(SUBMITTER);
    let wallet = net.balance(SUBMITTER).await;

    let out = gantry
        .run(&["job", "dispute", &disputed.to_string(), "--json"])
        .await
        .ok();
    assert_eq!(out.json()["bond"], "10000000");
    assert_eq!(net.job(disputed).await.state.status, JobStatus::Disputed);
    assert_eq!(net.balance(SUBMITTER).await, wallet - U256::from(10 * GUSD));
    let allowance = net.allowance(SUBMITTER, d.market).await;
    assert_eq!(allowance, U256::ZERO, "exactly the bond was approved");

    let out = gantry
        .run(&["job", "accept", &accepted.to_string()])
        .await
        .ok();
    // 30 gUSD less the 2.5 % fee.
    assert!(
        out.stdout
            .contains("29.25 gUSD paid to node 1's operator (fee 0.75 gUSD)"),
        "{out:#?}"
    );
    assert_eq!(net.job(accepted).await.state.status, JobStatus::Completed);
    gantry
        .run(&["job", "dispute", &accepted.to_string()])
        .await
        .failed(4, "is completed: only a submitted job can be disputed");
    gantry
        .run(&["job", "accept", &disputed.to_string()])
        .await
        .failed(4, "is disputed: only a submitted job can be accepted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposit_becomes_credits_that_jobs_are_posted_from_first() {
    let net = Net::start().await;
    net.mint(SUBMITTER, 100).await;
    let gantry = net.gantry(SUBMITTER);

    // Depositing 60 moves them from the wallet into the market's credits,
    let out = gantry.run(&["deposit", "60", "--json"]).await.ok().json();
    assert_eq!(out["credits"], (60 * GUSD).to_string());
    assert_eq!(net.balance(SUBMITTER).await, U256::from(40 * GUSD));

    // a 25 gUSD job is paid from them entirely (the wallet is not touched),
    let job = gantry
        .run(&[
            "job", "submit", "--image", "busybox", "--bounty", "25", "--json", "--", "true",
        ])
        .await
        .ok()
        .json();
    assert_eq!(job["fromCredits"], (25 * GUSD).to_string());
    assert_eq!(net.balance(SUBMITTER).await, U256::from(40 * GUSD));

    // and a 50 gUSD job takes the 35 left, then 15 from the wallet.
    let out = gantry
        .run(&[
            "job", "submit", "--image", "busybox", "--bounty", "50", "--", "true",
        ])
        .await
        .ok();
    assert!(
        out.stdout
            .contains("bounty 50 gUSD (35 gUSD from your credits)"),
        "{out:#?}"
    );
    assert_eq!(net.balance(SUBMITTER).await, U256::from(25 * GUSD));
    let balance = gantry.run(&["balance", "--json"]).await.ok().json();
    assert_eq!(balance["credits"], "0");

    // Nothing to deposit is refused before anything is sent.
    gantry
        .run(&["deposit", "0"])
        .await
        .failed(2, "deposit more than nothing");
    gantry
        .run(&["deposit", "1000"])
        .await
        .failed(4, "exceeds your token balance");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_arbiter_decides_disputes_both_ways_a_lapsed_one_settles_and_the_operator_takes_the_earnings()
 {
    let net = Net::start().await;
    let node = register_node(&net).await;
    net.mint(SUBMITTER, 1_000).await;
    // 200 gUSD: a tenth of the bounty (20) is more than the dev policy's floor (10).
    let jobs = [
        submit(&net, SUBMITTER, "200").await,
        submit(&net, SUBMITTER, "200").await,
        submit(&net, SUBMITTER, "200").await,
    ];
    let [for_submitter, for_provider, lapsing] = jobs;
    let submitter = net.gantry(SUBMITTER);
    let arbiter = net.gantry(ADMIN);
    resolve(&arbiter, for_submitter, &["--provider-wins"])
        .await
        .failed(4, "is open: only a disputed job can be resolved");
    for job in jobs {
        answered(&net, job).await;
        let out = submitter
            .run(&["job", "dispute", &job.to_string(), "--json"])
            .await
            .ok();
        assert_eq!(out.json()["bond"], (20 * GUSD).to_string());
    }
    assert_eq!(net.balance(SUBMITTER).await, U256::from(340 * GUSD));

    // Only the arbiter decides, and it must say how.
    resolve(&submitter, for_submitter, &["--submitter-wins"])
        .await
        .failed(
            4,
            &format!(
                "{} is not the market's arbiter: only the arbiter decides disputes",
                net.address(SUBMITTER)
            ),
        );
    resolve(&arbiter, for_submitter, &[])
        .await
        .failed(2, "--provider-wins");

    // For the submitter: the bounty and the bond are credited back; the node's held stake
    // (a tenth of its free 500) goes to the treasury.
    let decided = resolve(&arbiter, for_submitter, &["--submitter-wins", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(decided["providerWon"], false);
    assert_eq!(decided["refund"], (200 * GUSD).to_string());
    assert_eq!(decided["bondToSubmitter"], (20 * GUSD).to_string());
    assert_eq!(decided["slashed"], (50 * GUSD).to_string());
    assert_eq!(net.job(for_submitter).await.state.status, JobStatus::Failed);
    let balance = submitter.run(&["balance", "--json"]).await.ok().json();
    assert_eq!(balance["credits"], (220 * GUSD).to_string());

    // For the provider: paid (less the 2.5 % fee), and it wins the bond.
    let out = resolve(&arbiter, for_provider, &["--provider-wins"])
        .await
        .ok();
    assert!(
        out.stdout.contains(
            "decided for the provider: node 1 is paid 195 gUSD (fee 5 gUSD) and wins the bond of 20 gUSD"
        ),
        "{out:#?}"
    );
    assert_eq!(
        net.job(for_provider).await.state.status,
        JobStatus::Completed
    );

    // The third: no settling while the arbiter may still decide; once its time is out the
    // arbiter cannot, anyone may settle, the result stands and the bond goes back.
    let stranger = net.gantry(OTHER);
    stranger
        .run(&["job", "settle", &lapsing.to_string()])
        .await
        .failed(4, "the arbiter has until");
    net.advance(300).await;
    resolve(&arbiter, lapsing, &["--submitter-wins"])
        .await
        .failed(4, &format!("the dispute of job {lapsing} lapsed at"));
    let settled = stranger
        .run(&["job", "settle", &lapsing.to_string(), "--json"])
        .await
        .ok()
        .json();
    assert_eq!(settled["lapsed"], true);
    assert_eq!(settled["payout"], (195 * GUSD).to_string());
    assert_eq!(settled["bondToSubmitter"], (20 * GUSD).to_string());
    let balance = submitter.run(&["balance", "--json"]).await.ok().json();
    assert_eq!(balance["credits"], (240 * GUSD).to_string());

    // The operator takes the node's pay: two payouts and the bond it won.
    let earned = U256::from((195 + 195 + 20) * GUSD);
    assert_eq!(U256::from(net.node(node).await.earnings), earned);
    net.gantry(AGENT)
        .run(&["node", "withdraw-earnings", &node.to_string()])
        .await
        .failed(
            4,
            &format!("node {node} is not operated by {}", net.address(AGENT)),
        );
    let wallet = net.balance(OPERATOR).await;
    let paid = net
        .gantry(OPERATOR)
        .run(&["node", "withdraw-earnings", &node.to_string(), "--json"])
        .await
        .ok()
        .json();
    assert_eq!(paid["amount"], earned.to_string());
    assert_eq!(net.balance(OPERATOR).await, wallet + earned);
    net.gantry(OPERATOR)
        .run(&["node", "earnings", &node.to_string()])
        .await
        .failed(4, &format!("node {node} has nothing to withdraw"));
}
