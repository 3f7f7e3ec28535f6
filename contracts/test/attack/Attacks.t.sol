// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "forge-std/Vm.sol";
import {Base} from "../Base.t.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {JobRequirements, JobState, JobStatus, JobTerms, NodeInfo} from "../../src/types/Types.sol";

/// @notice The attack classes of the threat model (contracts/README.md), each tried as the
/// attacker would, asserting that it fails or costs what the rules say.
contract SubmitterFarmsStake is Base {
    using JobView for JobState;

    /// A deadline that leaves no room for one attempt is refused at posting.
    function test_aDeadlineShorterThanTheRuntime_isRefused() public {
        uint40 deadline = uint40(block.timestamp + RUNTIME - 1);
        vm.prank(submitter);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.JobMarket_DeadlineTooSoon.selector, deadline, block.timestamp + RUNTIME)
        );
        market.postJob(h100Job(), BOUNTY, deadline, spec());
    }

    /// A job whose remaining time no longer fits an attempt is never assigned (so its node
    /// can never run out of time on it), and anyone can refund it at once.
    function test_anAttemptThatNoLongerFits_isNotAssigned_andTheJobIsRefunded() public {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob(h100Job(), BOUNTY, uint40(block.timestamp + 2 * RUNTIME));
        vm.warp(block.timestamp + RUNTIME + 1);
        vm.prank(matcher);
        vm.expectRevert();
        market.assign(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
        expire(jobId);
        assertEq(market.creditOf(submitter), BOUNTY, "the bounty, never more");
        assertEq(node(nodeId).stake, STAKE, "nobody was slashed");
        assertReplay();
    }

    /// A node reclaimed for a real fault is slashed, but the slash goes to the treasury:
    /// the submitter ends with its bounty, never more.
    function test_aReclaimSlash_goesToTheTreasury_notToTheSubmitter() public {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob(h100Job(), BOUNTY, uint40(block.timestamp + RUNTIME + 10));
        assign(jobId, nodeId);
        vm.warp(jobs[jobId].state.until() + 1);
        reclaim(jobId);
        assertEq(uint8(status(jobId)), uint8(JobStatus.Failed), "no attempt fits any more: failed and refunded");
        assertEq(market.creditOf(submitter), BOUNTY);
        assertEq(market.treasuryBalance(), STAKE * SLASH_BPS / 10_000);
        assertEq(node(nodeId).stake, STAKE - STAKE * SLASH_BPS / 10_000);
        assertReplay();
    }

    /// A job that runs to its own time limit is answered with a result before `until`
    /// (the job's fault, not the node's): the node is paid and not slashed.
    function test_aJobRunningToItsLimit_isAnsweredInTime_andTheNodeIsPaid() public {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob();
        assign(jobId, nodeId);
        vm.warp(jobs[jobId].state.until());
        submit(jobId);
        finalize(jobId);
        assertEq(node(nodeId).stake, STAKE);
        assertEq(node(nodeId).earnings, BOUNTY - BOUNTY * FEE_BPS / 10_000);
        assertReplay();
    }
}

contract FreeFailing is Base {
    using JobView for JobState;

    /// Claim and reject at once: the node is barred from that job, no attempt is used, and
    /// the charge is nothing (no time held).
    function test_claimAndRejectAtOnce_barsTheNode_usesNoAttempt() public {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob();
        claim(jobId, nodeId);
        reject(jobId);
        assertEq(uint8(status(jobId)), uint8(JobStatus.Open));
        assertEq(jobs[jobId].state.faults(), 0, "no attempt used");
        assertTrue(market.isBarred(jobId, nodeId));
        assertEq(node(nodeId).stake, STAKE, "nothing held, nothing charged");
        vm.prank(agent);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_Barred.selector, jobId, nodeId));
        market.claim(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
        assertReplay();
    }

    /// Holding the job to the last second and rejecting costs one slash of the free stake,
    /// to the treasury.
    function test_holdingToTheLastSecond_thenRejecting_costsOneSlash() public {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob();
        claim(jobId, nodeId);
        vm.warp(jobs[jobId].state.until());
        reject(jobId);
        uint256 slash = uint256(STAKE) * SLASH_BPS / 10_000;
        assertEq(node(nodeId).stake, STAKE - slash);
        assertEq(market.treasuryBalance(), slash);
        assertEq(market.creditOf(submitter), 0, "the submitter gains nothing from it");
        assertReplay();
    }

    /// Halfway through: half a slash.
    function testFuzz_theRejectCharge_growsWithTheTimeHeld(uint32 held) public {
        held = uint32(bound(held, 0, RUNTIME));
        uint64 nodeId = registerNode();
        uint64 jobId = postJob();
        claim(jobId, nodeId);
        vm.warp(block.timestamp + held);
        reject(jobId);
        uint256 charge = (uint256(STAKE) * SLASH_BPS / 10_000) * held / RUNTIME;
        assertEq(node(nodeId).stake, STAKE - charge);
        assertReplay();
    }

    /// Past its runtime a node cannot reject: that is a fault, reclaimed with the slash.
    function test_afterTheRuntime_aRejectIsRefused() public {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob();
        claim(jobId, nodeId);
        vm.warp(jobs[jobId].state.until() + 1);
        vm.prank(agent);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_MustBeReclaimed.selector, jobId));
        market.reject(jobId, jobs[jobId].terms, jobs[jobId].state, "too late");
    }

    /// A node marked inactive during the attempt cannot launder the fault: a heartbeat
    /// brings it back, but the job stays reclaimable and the reject refused.
    function test_aHeartbeatAfterGoingInactive_doesNotReopenReject() public {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob();
        claim(jobId, nodeId);
        vm.warp(block.timestamp + HEARTBEAT_TIMEOUT + 1);
        vm.prank(stranger);
        nodes.markInactive(nodeId);
        vm.prank(agent);
        nodes.heartbeat(nodeId);
        vm.prank(agent);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_MustBeReclaimed.selector, jobId));
        market.reject(jobId, jobs[jobId].terms, jobs[jobId].state, "launder");
        reclaim(jobId);
        assertEq(node(nodeId).stake, STAKE - STAKE * SLASH_BPS / 10_000);
        assertEq(jobs[jobId].state.faults(), 1);
        assertReplay();
    }

    /// N colluding nodes each take and give back the job: each is barred; once no attempt
    /// fits, the job is refunded in full.
    function test_colludingNodes_delayAJob_atMostOnceEach_andItIsRefunded() public {
        uint64 jobId = postJob(h100Job(), BOUNTY, uint40(block.timestamp + 3 * RUNTIME));
        for (uint256 i; i < 3; ++i) {
            address owner = makeAddr(string(abi.encode("colluder", i)));
            fund(owner, 1_000e6);
            uint64 nodeId = registerNode(owner, 0xC0 + i, h100Node(), STAKE);
            if (status(jobId) != JobStatus.Open) break;
            claim(jobId, nodeId);
            vm.warp(block.timestamp + RUNTIME / 2);
            reject(jobId);
        }
        // Each held it half a runtime: half a slash each, to the treasury.
        assertEq(market.treasuryBalance(), 3 * ((uint256(STAKE) * SLASH_BPS / 10_000) / 2));
        vm.warp(block.timestamp + RUNTIME);
        if (status(jobId) == JobStatus.Open) expire(jobId);
        assertEq(market.creditOf(submitter), BOUNTY, "refunded in full");
        assertReplay();
    }
}

contract AgentHijack is Base {
    /// Naming a victim's agent without its signature is refused.
    function test_registeringAVictimsAgent_withoutItsConsent_isRefused() public {
        vm.prank(operator);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_BadConsent.selector, agent));
        nodes.register(h100Node(), "ipfs://x", STAKE, agent, block.timestamp + 1 hours, new bytes(65));
    }

    /// A consent signed for one operator does not bind the agent to another.
    function test_aConsentForAnotherOperator_isRefused() public {
        bytes memory consent = signConsent(operator, AGENT_KEY, block.timestamp + 1 hours);
        fund(stranger, 1_000e6);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_BadConsent.selector, agent));
        nodes.register(h100Node(), "ipfs://x", STAKE, agent, block.timestamp + 1 hours, consent);
    }

    /// A consent works once: replaying it registers nothing more.
    function test_aConsent_cannotBeReplayed() public {
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory consent = signConsent(operator, AGENT_KEY, deadline);
        vm.prank(operator);
        nodes.register(h100Node(), "ipfs://x", STAKE, agent, deadline, consent);
        vm.prank(operator);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_BadConsent.selector, agent));
        nodes.register(h100Node(), "ipfs://x", STAKE, agent, deadline, consent);
    }

    /// An expired consent is refused.
    function test_anExpiredConsent_isRefused() public {
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory consent = signConsent(operator, AGENT_KEY, deadline);
        vm.warp(deadline + 1);
        vm.prank(operator);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_ConsentExpired.selector, deadline));
        nodes.register(h100Node(), "ipfs://x", STAKE, agent, deadline, consent);
    }

    /// Rotating to a victim's key needs its consent too.
    function test_rotatingToAVictimsAgent_withoutItsConsent_isRefused() public {
        uint64 nodeId = registerNode();
        vm.prank(operator);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_BadConsent.selector, otherAgent));
        nodes.setAgent(nodeId, otherAgent, block.timestamp + 1 hours, new bytes(65));
    }
}

contract LockedForever is Base {
    using JobView for JobState;

    /// The arbiter never acts: after the dispute period anyone applies the default (the
    /// result stands, the bond goes back), and only the exposure was ever held.
    function test_anUnresolvedDispute_endsAtItsDeadline_withTheDefault() public {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        dispute(jobId);
        NodeInfo memory held = node(nodeId);
        assertEq(held.lockedStake, STAKE * SLASH_BPS / 10_000, "one slash of exposure, not the stake");
        vm.prank(stranger);
        vm.expectRevert();
        market.settleDispute(jobId, jobs[jobId].terms, jobs[jobId].state);
        settleDispute(jobId);
        assertEq(uint8(status(jobId)), uint8(JobStatus.Completed));
        assertEq(node(nodeId).lockedStake, 0);
        assertEq(market.creditOf(submitter), DISPUTE_BOND, "the bond back");
        assertReplay();
    }

    /// While a dispute is open, the node can still exit with everything but the exposure.
    function test_aPendingDispute_holdsOnlyItsExposure() public {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        dispute(jobId);
        vm.prank(operator);
        nodes.beginExit(nodeId);
        vm.warp(block.timestamp + UNBONDING);
        uint256 before = token.balanceOf(operator);
        vm.prank(operator);
        nodes.withdrawStake(nodeId);
        uint256 exposure = uint256(STAKE) * SLASH_BPS / 10_000;
        assertEq(token.balanceOf(operator) - before, STAKE - exposure);
        sync();
        assertReplay();
        // The dispute (its deadline long passed) settles, and the rest comes out.
        vm.prank(stranger);
        market.settleDispute(jobId, jobs[jobId].terms, jobs[jobId].state);
        sync();
        vm.prank(operator);
        nodes.withdrawStake(nodeId);
        sync();
        assertEq(token.balanceOf(operator) - before, STAKE);
        assertReplay();
    }
}

contract StaleOrForgedState is Base {
    using JobView for JobState;

    function test_aForgedBounty_isRefused() public {
        (uint64 jobId,) = submittedJob();
        JobState memory forged = jobs[jobId].state;
        forged.fields += uint256(1_000e6) << 48;
        vm.warp(forged.until());
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, jobId));
        market.finalize(jobId, forged);
    }

    function test_forgedTerms_areRefused() public {
        uint64 jobId = postJob();
        JobTerms memory forged = jobs[jobId].terms;
        forged.party = (uint256(uint160(stranger)) << 96) | uint96(forged.party);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongTerms.selector, jobId));
        market.cancel(jobId, forged, jobs[jobId].state);
    }

    function test_anOldState_afterATransition_isRefused() public {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob();
        JobState memory open = jobs[jobId].state;
        assign(jobId, nodeId);
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, jobId));
        market.cancel(jobId, jobs[jobId].terms, open);
    }

    function test_aJob_isSettledOnce() public {
        (uint64 jobId,) = submittedJob();
        JobState memory submitted = jobs[jobId].state;
        finalize(jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, jobId));
        market.finalize(jobId, submitted);
        assertEq(market.jobHash(jobId), bytes32(0));
        assertReplay();
    }
}

contract OversizedPayload is Base {
    function test_aSpecOverTheLimit_isRefused() public {
        bytes memory big = new bytes(16_385);
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_SpecTooLarge.selector, 16_385, 16_384));
        market.postJob(h100Job(), BOUNTY, uint40(block.timestamp + 1 days), big);
    }

    function test_aResultUriOverTheLimit_isRefused() public {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob();
        assign(jobId, nodeId);
        vm.prank(agent);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_TextTooLong.selector, 257, 256));
        market.submitResult(jobId, jobs[jobId].state, bytes32(uint256(1)), string(new bytes(257)));
    }

    function test_aMetadataUriOverTheLimit_isRefused() public {
        vm.prank(agent);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_TextTooLong.selector, 257, 256));
        nodes.register(h100Node(), string(new bytes(257)), STAKE, agent, 0, "");
    }

    /// The largest JobPosted the market allows: its log data stays far under the stream's
    /// message limit (the indexer's MAX_EVENT_BYTES, 256 KiB, as hex JSON).
    function test_theLargestEvent_fitsTheStream() public {
        bytes memory largest = new bytes(16_384);
        vm.recordLogs();
        vm.prank(submitter);
        market.postJob(h100Job(), BOUNTY, uint40(block.timestamp + 1 days), largest);
        uint256 size;
        Vm.Log[] memory logs = vm.getRecordedLogs();
        for (uint256 i; i < logs.length; ++i) {
            if (logs[i].topics[0] == IJobMarket.JobPosted.selector) size = logs[i].data.length;
        }
        assertGt(size, 16_384);
        assertLt(size * 2 + 2_048, 256 * 1024, "hex in JSON, with the envelope, under MAX_EVENT_BYTES");
    }
}
