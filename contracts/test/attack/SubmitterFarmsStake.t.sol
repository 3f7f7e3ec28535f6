// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {AttackBase} from "./AttackBase.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {JobRequirements, JobState, JobStatus, JobTerms} from "../../src/types/Types.sol";

/// @notice A submitter tries to make nodes lose stake and to collect it: a deadline the
/// attempt cannot meet, a deadline that shrinks under a waiting job, a job that runs to its
/// limit, a fault it provokes or waits for. The rules: an attempt is only ever given when it
/// fits before the deadline, a node that answers by `until` is never slashed, and every
/// slash goes to the treasury: the submitter ends with its own money, never more.
contract SubmitterFarmsStake is AttackBase {
    using JobView for JobTerms;
    using JobView for JobState;

    // ---------------------------------------------------------------- deadlines

    /// A deadline that leaves no room for a whole attempt is refused at posting.
    function testFuzz_aDeadlineBeforeOneRuntime_isRefused(uint32 maxRuntime, uint32 short) public {
        maxRuntime = uint32(bound(maxRuntime, 1, market.MAX_RUNTIME()));
        short = uint32(bound(short, 1, maxRuntime));
        uint40 deadline = uint40(block.timestamp + maxRuntime - short);
        vm.prank(submitter);
        vm.expectRevert(
            abi.encodeWithSelector(
                IJobMarket.JobMarket_DeadlineTooSoon.selector, deadline, block.timestamp + maxRuntime
            )
        );
        market.postJob(runtimeJob(maxRuntime), BOUNTY, deadline, spec());
    }

    /// A deadline of exactly one runtime is accepted, and the attempt given at once gets all
    /// of it: the node answers at the last second and is paid.
    function test_aDeadlineOfExactlyOneRuntime_givesTheAttemptAllOfIt() public {
        uint64 nodeId = registerNode();
        uint40 deadline = uint40(block.timestamp + RUNTIME);
        uint64 jobId = postJob(h100Job(), BOUNTY, deadline);
        claim(jobId, nodeId);
        assertEq(untilOf(jobId), deadline, "the attempt ends at the deadline, not before");
        vm.warp(deadline);
        submit(jobId);
        finalize(jobId);
        assertEq(node(nodeId).stake, STAKE, "not slashed");
        assertEq(node(nodeId).earnings, BOUNTY - FEE, "paid");
        assertReplay();
    }

    /// The deadline shrinks while the job waits: once an attempt no longer fits, neither the
    /// matcher nor an agent can take it (so no node can be caught out of time), and anyone
    /// refunds it; nobody is slashed.
    function test_aShrinkingDeadline_refusesTheAttempt_andTheJobIsRefunded() public {
        uint64 nodeId = registerNode();
        uint256 initial = wealth(submitter);
        uint40 deadline = uint40(block.timestamp + RUNTIME + 100);
        uint64 fits = postJob(h100Job(), BOUNTY, deadline);
        uint64 late = postJob(h100Job(), BOUNTY, deadline);

        vm.warp(block.timestamp + 100); // the last second at which an attempt fits
        assign(fits, nodeId);
        assertEq(untilOf(fits), deadline, "the whole runtime, ending at the deadline");

        vm.warp(block.timestamp + 1);
        bytes memory doesNotFit =
            abi.encodeWithSelector(IJobMarket.JobMarket_DoesNotFit.selector, late, block.timestamp + RUNTIME, deadline);
        expectCannotTake(late, nodeId, doesNotFit);
        expire(late);

        vm.warp(deadline);
        submit(fits);
        finalize(fits);
        assertEq(node(nodeId).stake, STAKE, "nobody slashed");
        assertEq(wealth(submitter), initial - BOUNTY, "one bounty paid for one result, the other back");
        assertReplay();
    }

    // ---------------------------------------------------------------- runtime

    /// A job that runs until its own limit is the job's fault: the node answers with a
    /// result by `until`, nobody can reclaim it at `until`, and it is paid.
    function test_aJobThatRunsToItsMaxRuntime_isAnsweredAtUntil_andPaid() public {
        (uint64 jobId, uint64 nodeId) = assignedJob();
        vm.warp(untilOf(jobId));
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotReclaimable.selector, jobId));
        market.reclaim(jobId, jobs[jobId].terms, jobs[jobId].state);
        submit(jobId);
        finalize(jobId);
        assertEq(node(nodeId).stake, STAKE);
        assertEq(node(nodeId).earnings, BOUNTY - FEE);
        assertEq(market.treasuryBalance(), 0);
        assertReplay();
    }

    /// The submitter cannot provoke the fault of a healthy node: no reclaim before `until`,
    /// no markInactive before the heartbeat timeout.
    function test_theSubmitter_cannotProvokeAFault() public {
        (uint64 jobId, uint64 nodeId) = claimedJob();
        vm.warp(block.timestamp + HEARTBEAT_TIMEOUT);
        vm.startPrank(submitter);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotReclaimable.selector, jobId));
        market.reclaim(jobId, jobs[jobId].terms, jobs[jobId].state);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_HeartbeatNotExpired.selector, nodeId, block.timestamp)
        );
        nodes.markInactive(nodeId);
        vm.stopPrank();
    }

    // ---------------------------------------------------------------- who gets the slash

    /// Three nodes fault on the job one after the other (each runs past its runtime): each
    /// is slashed once, to the treasury; the job fails out of attempts and the submitter
    /// gets its bounty back, not a unit more; the keeper who reclaimed gets nothing.
    function test_reclaimSlashes_goToTheTreasury_theSubmitterGetsItsBountyOnly() public {
        uint256 initial = wealth(submitter);
        uint64 jobId = postJob(h100Job(), BOUNTY, uint40(block.timestamp + 10 * RUNTIME));
        for (uint256 i; i < MAX_ATTEMPTS; ++i) {
            uint64 nodeId = nodeOf(string.concat("faulty", vm.toString(i)), 0xFA00 + i);
            claim(jobId, nodeId);
            vm.warp(untilOf(jobId) + 1);
            reclaim(jobId);
            assertEq(node(nodeId).stake, STAKE - SLASH, "one slash");
        }
        assertStatus(jobId, JobStatus.Failed);
        assertEq(market.treasuryBalance(), uint256(MAX_ATTEMPTS) * SLASH, "every slash to the treasury");
        assertEq(market.creditOf(submitter), BOUNTY, "the bounty, never more");
        assertEq(wealth(submitter), initial);
        assertEq(wealth(stranger), 0, "the keeper gains nothing");
        assertReplay();
    }

    /// Whatever mix of faults, rejects and a lost dispute the job goes through, the
    /// submitter ends with exactly what it had: slashes and charges go to the treasury.
    function testFuzz_whateverTheFaults_theSubmitterEndsWithItsOwnMoney(uint256 seed) public {
        uint256 initial = wealth(submitter);
        uint64 jobId = postJob(h100Job(), BOUNTY, uint40(block.timestamp + 20 * RUNTIME));
        for (uint256 i; i < 6 && status(jobId) == JobStatus.Open; ++i) {
            uint64 nodeId = nodeOf(string.concat("node", vm.toString(i)), 0xF000 + i);
            claim(jobId, nodeId);
            uint256 kind = (seed >> (8 * i)) % 4;
            if (kind == 0) {
                vm.warp(untilOf(jobId) + 1 + ((seed >> (8 * i + 2)) % 1000));
                reclaim(jobId);
            } else if (kind == 1) {
                goSilent(nodeId);
                reclaim(jobId);
            } else if (kind == 2) {
                rejectAt(jobId, block.timestamp + ((seed >> (8 * i + 2)) % (RUNTIME + 1)));
            } else {
                submit(jobId);
                dispute(jobId);
                resolve(jobId, false);
            }
        }
        if (status(jobId) == JobStatus.Open) cancel(jobId);
        assertTrue(uint8(status(jobId)) >= uint8(JobStatus.Failed), "refunded");
        assertEq(wealth(submitter), initial, "its own money, never more");
        assertEq(wealth(stranger), 0);
        assertReplay();
    }

    /// The submitter wins its dispute: bounty and bond come back; the node's held exposure
    /// is slashed to the treasury, not to the submitter.
    function test_aDisputeWon_refundsBountyAndBond_theExposureGoesToTheTreasury() public {
        uint256 initial = wealth(submitter);
        (uint64 jobId, uint64 nodeId) = submittedJob();
        dispute(jobId);
        uint96 exposure = node(nodeId).lockedStake;
        assertEq(exposure, SLASH);
        resolve(jobId, false);
        assertEq(market.creditOf(submitter), BOUNTY + DISPUTE_BOND);
        assertEq(wealth(submitter), initial, "never more than it paid in");
        assertEq(market.treasuryBalance(), exposure);
        assertStakeAndReplay(nodeId, STAKE - exposure);
    }

    // ---------------------------------------------------------------- questionable

    /// QUESTIONABLE (reported): nothing bounds a job's max runtime from below. A submitter
    /// posts a job with a one-second runtime; an honest matcher assigns it to an eligible
    /// node; the worker sees the assignment a block later and can neither answer
    /// (`RuntimeOver`) nor give it back (`MustBeReclaimed`): anyone reclaims it with a full
    /// slash. The submitter gains nothing (the slash goes to the treasury, its bounty comes
    /// back), but it makes an honest node lose one slash per job for the cost of gas.
    function test_aOneSecondRuntime_costsTheAssignedNodeASlash() public {
        uint64 nodeId = registerNode();
        uint256 initial = wealth(submitter);
        uint64 jobId = postJob(runtimeJob(1), BOUNTY, uint40(block.timestamp + 1 days));
        assign(jobId, nodeId);
        vm.warp(block.timestamp + BLOCK);
        vm.startPrank(agent);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_RuntimeOver.selector, jobId, untilOf(jobId)));
        market.submitResult(jobId, jobs[jobId].state, bytes32(uint256(1)), "");
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_MustBeReclaimed.selector, jobId));
        market.reject(jobId, jobs[jobId].terms, jobs[jobId].state, "cannot run in a second");
        vm.stopPrank();
        reclaim(jobId);
        assertEq(node(nodeId).stake, STAKE - SLASH, "an honest node slashed for a job it could not do");
        cancel(jobId);
        assertEq(wealth(submitter), initial, "the submitter gains nothing");
        assertReplay();
    }
}
