// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {AttackBase} from "./AttackBase.sol";
import {JobView} from "../JobView.sol";
import {JobState, JobStatus, JobTerms, MarketParams} from "../../src/types/Types.sol";

/// @notice A consumer of the chain stream that trusts only the events must be able to say
/// who is owed what at every block. One long scenario, every outcome the market has (paid by
/// accept, by finalize, by batch; disputes won, lost and lapsed; rejects, reclaims for
/// runtime and for inactivity; failures out of attempts and out of time; cancel, expire;
/// credits, deposits, fees swept, earnings, treasury and stakes withdrawn; a policy change
/// mid-way), and after every step the balances replayed from the events equal the
/// contract's, each job's folded state is its stored word (0 once settled), and the market
/// holds exactly what it owes.
contract EventsTellTheTruth is AttackBase {
    using JobView for JobTerms;
    using JobView for JobState;

    address internal alice;
    uint64 internal a;
    uint64 internal b;
    uint64 internal c;

    function test_aLongMixedScenario_replaysToTheBalancesAfterEveryStep() public {
        a = registerNode();
        b = nodeOf("b", OTHER_AGENT_KEY);
        c = selfNode(0);
        alice = newSubmitter("alice");
        check();

        // Credits: a deposit, a job wholly from credits, one partly.
        vm.prank(alice);
        market.deposit(200e6);
        sync();
        check();
        uint64 fromCredits = postAs(alice, h100Job(), 150e6, uint40(block.timestamp + 1 days));
        check();
        uint64 partly = postAs(alice, h100Job(), 100e6, uint40(block.timestamp + 1 days));
        check();
        assertEq(market.creditOf(alice), 0);

        // Paid: accepted, finalized.
        assign(fromCredits, a);
        check();
        submit(fromCredits);
        check();
        accept(fromCredits);
        check();
        claim(partly, b);
        check();
        submit(partly);
        check();
        finalize(partly);
        check();

        // Disputes: won by the provider, lost by it, lapsed.
        uint64 won = runToResult(a);
        dispute(won);
        check();
        resolve(won, true);
        check();
        uint64 lost = runToResult(b);
        dispute(lost);
        check();
        resolve(lost, false);
        check();
        uint64 lapsed = runToResult(c);
        dispute(lapsed);
        check();
        settleDispute(lapsed);
        check();

        // A job through a reject (charged), a reclaim for its runtime, then paid.
        uint64 bumpy = postJob(h100Job(), BOUNTY, uint40(block.timestamp + 10 * RUNTIME));
        claim(bumpy, a);
        rejectAt(bumpy, block.timestamp + 20 minutes);
        check();
        claim(bumpy, b);
        vm.warp(untilOf(bumpy) + 1);
        reclaim(bumpy);
        check();
        claim(bumpy, c);
        submit(bumpy);
        finalize(bumpy);
        check();

        // Refunds: cancelled, expired.
        uint64 cancelled = postAs(alice, h100Job(), BOUNTY, uint40(block.timestamp + 1 days));
        cancel(cancelled);
        check();
        uint64 expired = postJob(h100Job(), BOUNTY, uint40(block.timestamp + RUNTIME));
        vm.warp(block.timestamp + 1);
        expire(expired);
        check();
        // The lost dispute's refund went into the next jobs (credits first); the expiry's is left.
        assertEq(market.creditOf(submitter), BOUNTY);
        vm.prank(submitter);
        market.withdraw();
        sync();
        check();

        // A new policy mid-way: a job under it fails out of attempts after one reclaim of an
        // inactive node; another fails out of time after a reject.
        MarketParams memory p = marketParams();
        p.protocolFeeBps = 500;
        p.slashBps = 2_000;
        p.maxAttempts = 1;
        setParams(p);
        check();
        uint64 outOfAttempts = postJob();
        heartbeat(a);
        claim(outOfAttempts, a);
        goSilent(a);
        reclaim(outOfAttempts);
        check();
        assertStatus(outOfAttempts, JobStatus.Failed);
        uint64 outOfTime = postJob(h100Job(), BOUNTY, uint40(block.timestamp + RUNTIME + 60));
        claim(outOfTime, b);
        rejectAt(outOfTime, block.timestamp + 61);
        check();
        assertStatus(outOfTime, JobStatus.Failed);

        // Batches, under the new fee.
        heartbeat(a);
        uint64 one = postJob();
        uint64 two = postJob();
        assignBatch(batchOf(one, a, two, c));
        check();
        submit(one);
        submit(two);
        vm.warp(untilOf(two));
        (uint64[] memory ids, JobState[] memory states) = idsAndStates(one, two);
        vm.prank(stranger);
        market.finalizeBatch(ids, states);
        sync();
        check();

        // Money out: fees swept, earnings, treasury, credits; stakes topped up and unbonded.
        uint64[] memory all = new uint64[](3);
        (all[0], all[1], all[2]) = (a, b, c);
        nodes.sweepFees(all);
        sync();
        check();
        vm.prank(operator);
        nodes.withdrawEarnings(a);
        sync();
        check();
        vm.prank(agentOf[c]);
        nodes.withdrawEarnings(c);
        sync();
        check();
        uint256 owedToTreasury = market.treasuryBalance();
        assertGt(owedToTreasury, 0);
        market.withdrawTreasury();
        sync();
        check();
        assertEq(token.balanceOf(treasury), owedToTreasury, "what the events said the treasury was owed");
        vm.prank(alice);
        market.withdraw();
        sync();
        check();
        vm.prank(makeAddr("b"));
        nodes.topUpStake(b, 50e6);
        sync();
        check();
        vm.prank(agentOf[c]);
        nodes.beginExit(c);
        vm.warp(block.timestamp + UNBONDING);
        vm.prank(agentOf[c]);
        nodes.withdrawStake(c);
        sync();
        check();
    }

    /// A job posted and run to its result on `nodeId`.
    function runToResult(uint64 nodeId) internal returns (uint64 jobId) {
        jobId = postJob();
        assign(jobId, nodeId);
        submit(jobId);
        check();
    }

    /// The replay equals the contract, and every job's folded state is its stored word.
    function check() internal view {
        assertReplay();
        for (uint64 id = 1; id <= lastJob; ++id) {
            JobStatus s = jobs[id].state.status();
            if (JobView.isSettled(s)) {
                assertEq(market.jobHash(id), bytes32(0), "a settled job's word is 0");
            } else {
                assertEq(market.jobHash(id), keccak256(abi.encode(jobs[id].state)), "the folded state is the word");
            }
        }
    }
}
