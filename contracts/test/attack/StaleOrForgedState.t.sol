// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {AttackBase} from "./AttackBase.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {Assignment, JobState, JobStatus, JobTerms, NodeStatus} from "../../src/types/Types.sol";

/// @notice Every job call takes the job's state (and terms) from the caller: an attacker
/// passes a forged one (a bigger bounty, itself as submitter, another status, another node,
/// an earlier `until`, a lower fee, a cleared barred count, dirty bits), an old one after
/// the job moved on, or a settled one to settle it again. The rule: the state must hash to
/// the job's stored word and the terms to the state's terms hash; a settled job's word is 0.
contract StaleOrForgedState is AttackBase {
    using JobView for JobTerms;
    using JobView for JobState;

    // ---------------------------------------------------------------- forged state

    /// Every field an attacker would change to be paid more, sooner, or in its place.
    function test_forgedStateFields_areRefused() public {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        uint64 thief = nodeOf("thief", OTHER_AGENT_KEY);
        vm.warp(untilOf(jobId) - 1);
        JobState memory real = jobs[jobId].state;
        JobState[] memory forged = new JobState[](6);
        for (uint256 i; i < forged.length; ++i) {
            forged[i] = JobState(real.terms, real.fields);
        }
        forged[0].fields += uint256(1_000e6) << 48; // a bigger bounty
        forged[1].moved(JobStatus.Submitted, 0, 0, thief, real.until()); // another node paid
        forged[2].moved(JobStatus.Submitted, 0, 0, nodeId, real.until() - 1); // the window closed early
        forged[3].fields &= ~(uint256(type(uint16).max) << 32); // no fee
        forged[4].fields = (forged[4].fields & ~uint256(type(uint32).max)); // no window
        forged[5].terms = keccak256("other terms");
        for (uint256 i; i < forged.length; ++i) {
            vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, jobId));
            market.finalize(jobId, forged[i]);
        }
        vm.warp(untilOf(jobId));
        finalize(jobId);
        assertEq(node(nodeId).earnings, BOUNTY - FEE);
        assertEq(node(thief).earnings, 0);
        assertReplay();
    }

    /// A forged status: the Open job passed as Submitted to have it paid, as Disputed to
    /// have it settled.
    function test_aForgedStatus_isRefused() public {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob();
        JobState memory asSubmitted = jobs[jobId].state;
        asSubmitted.moved(JobStatus.Submitted, 0, 0, nodeId, uint40(block.timestamp));
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, jobId));
        market.finalize(jobId, asSubmitted);
        JobState memory asDisputed = jobs[jobId].state;
        asDisputed.moved(JobStatus.Disputed, 0, 0, nodeId, uint40(block.timestamp));
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, jobId));
        market.settleDispute(jobId, jobs[jobId].terms, asDisputed);
    }

    /// A node barred from the job clears the barred count in the state it passes, to claim
    /// it again.
    function test_aClearedBarredCount_isRefused() public {
        (uint64 jobId, uint64 nodeId) = claimedJob();
        reject(jobId);
        JobState memory cleared = jobs[jobId].state;
        cleared.moved(JobStatus.Open, 0, 0, 0, 0);
        vm.prank(agent);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, jobId));
        market.claim(jobId, nodeId, jobs[jobId].terms, cleared);
        vm.prank(agent);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_Barred.selector, jobId, nodeId));
        market.claim(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
    }

    /// Any single flipped bit of the state is refused.
    function testFuzz_anyFlippedBitOfTheState_isRefused(uint8 bit, bool inTerms) public {
        (uint64 jobId,) = submittedJob();
        vm.warp(untilOf(jobId));
        JobState memory forged = JobState(jobs[jobId].state.terms, jobs[jobId].state.fields);
        if (inTerms) forged.terms ^= bytes32(uint256(1) << bit);
        else forged.fields ^= uint256(1) << bit;
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, jobId));
        market.finalize(jobId, forged);
    }

    // ---------------------------------------------------------------- forged terms

    /// Terms naming the attacker as submitter (to cancel and be refunded), or a smaller
    /// bounty (for a smaller dispute bond): refused.
    function test_forgedParties_areRefused() public {
        uint64 jobId = postJob();
        uint64 nodeId = registerNode();
        bytes memory wrong = abi.encodeWithSelector(IJobMarket.JobMarket_WrongTerms.selector, jobId);
        JobTerms memory thief = copy(jobs[jobId].terms);
        thief.party = (uint256(uint160(stranger)) << 96) | BOUNTY;
        vm.prank(stranger);
        vm.expectRevert(wrong);
        market.cancel(jobId, thief, jobs[jobId].state);

        claim(jobId, nodeId);
        submit(jobId);
        JobTerms memory cheap = copy(jobs[jobId].terms);
        cheap.party = (uint256(uint160(submitter)) << 96) | 1;
        vm.prank(submitter);
        vm.expectRevert(wrong);
        market.dispute(jobId, cheap, jobs[jobId].state);
    }

    /// Terms with a later deadline (to be assigned out of time), dirty bits above the 208
    /// the codec packs, or a higher price cap (bits above the 96 a price has): refused.
    function test_forgedLimits_areRefused() public {
        uint64 jobId = postJob();
        uint64 nodeId = registerNode();
        JobTerms[] memory forged = new JobTerms[](3);
        for (uint256 i; i < forged.length; ++i) {
            forged[i] = copy(jobs[jobId].terms);
        }
        forged[0].limits += uint256(365 days) << 168;
        forged[1].limits |= uint256(1) << 255;
        forged[2].maxPricePerGpuHour |= uint256(1) << 200;
        for (uint256 i; i < forged.length; ++i) {
            vm.prank(matcher);
            vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongTerms.selector, jobId));
            market.assign(jobId, nodeId, forged[i], jobs[jobId].state);
        }
    }

    /// Any single flipped bit of any word of the terms is refused.
    function testFuzz_anyFlippedBitOfTheTerms_isRefused(uint8 word, uint8 bit) public {
        uint64 jobId = postJob();
        JobTerms memory forged = copy(jobs[jobId].terms);
        word = uint8(bound(word, 0, 4));
        uint256 flip = uint256(1) << bit;
        if (word == 0) forged.party ^= flip;
        else if (word == 1) forged.specHash ^= bytes32(flip);
        else if (word == 2) forged.gpuModel ^= bytes32(flip);
        else if (word == 3) forged.limits ^= flip;
        else forged.maxPricePerGpuHour ^= flip;
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongTerms.selector, jobId));
        market.cancel(jobId, forged, jobs[jobId].state);
    }

    /// Another job's genuine terms or state do not open this job.
    function test_anotherJobsTermsOrState_areRefused() public {
        uint64 mine = postJob();
        address rich = newSubmitter("rich");
        uint64 theirs = postAs(rich, h100Job(), 1_000e6, uint40(block.timestamp + 1 days));
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongTerms.selector, mine));
        market.cancel(mine, jobs[theirs].terms, jobs[mine].state);
        vm.prank(rich);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, mine));
        market.cancel(mine, jobs[theirs].terms, jobs[theirs].state);
    }

    /// Arguments with dirty high bits (a job id past 64 bits) are refused by the decoder, and
    /// a node id past the 48 bits a state packs cannot alias a real node.
    function test_dirtyIdsAndAliasedNodes_areRefused() public {
        (uint64 jobId,) = submittedJob();
        vm.warp(untilOf(jobId));
        (bool ok,) = address(market)
            .call(
                abi.encodeWithSelector(
                    market.finalize.selector,
                    (uint256(1) << 64) | jobId,
                    jobs[jobId].state.terms,
                    jobs[jobId].state.fields
                )
            );
        assertFalse(ok, "a dirty job id");
        uint64 open = postJob();
        uint64 alias_ = uint64(1 << 48) | lastNode;
        vm.prank(matcher);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NodeNotActive.selector, alias_, NodeStatus.None));
        market.assign(open, alias_, jobs[open].terms, jobs[open].state);
    }

    // ---------------------------------------------------------------- stale state

    /// After each transition the state before it is refused.
    function test_anOldState_isRefused_afterEveryTransition() public {
        uint64 nodeId = registerNode();
        uint64 other = nodeOf("other", OTHER_AGENT_KEY);
        uint64 jobId = postJob();
        JobTerms memory t = jobs[jobId].terms;
        bytes memory stale = abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, jobId);
        // Every state the job had: Open, Assigned, Open again, Assigned again, Submitted.
        JobState[] memory seen = new JobState[](5);

        seen[0] = jobs[jobId].state;
        claim(jobId, nodeId);
        vm.prank(submitter);
        vm.expectRevert(stale);
        market.cancel(jobId, t, seen[0]); // cancel a job already running

        seen[1] = jobs[jobId].state;
        reject(jobId);
        vm.prank(agent);
        vm.expectRevert(stale);
        market.submitResult(jobId, seen[1], bytes32(0), ""); // answer a job given back

        seen[2] = jobs[jobId].state;
        claim(jobId, other);
        vm.prank(agent);
        vm.expectRevert(stale);
        market.claim(jobId, nodeId, t, seen[0]); // the barred node, with the state from before

        seen[3] = jobs[jobId].state;
        submit(jobId);
        vm.warp(block.timestamp + 1);
        vm.prank(otherAgent);
        vm.expectRevert(stale);
        market.reject(jobId, t, seen[3], ""); // give back a job already answered

        seen[4] = jobs[jobId].state;
        dispute(jobId);
        vm.warp(untilOf(jobId));
        vm.expectRevert(stale);
        market.finalize(jobId, seen[4]); // pay a disputed job as if undisputed

        settleDispute(jobId);
        for (uint256 i; i < seen.length; ++i) {
            vm.expectRevert(stale);
            market.finalize(jobId, seen[i]);
        }
        vm.expectRevert(stale);
        market.finalize(jobId, jobs[jobId].state); // the settled state as the fold keeps it
        assertReplay();
    }

    // ---------------------------------------------------------------- settle twice

    /// A settled job's word is 0: every way of settling it again, with any state it ever
    /// had, is refused; a batch naming a job twice reverts whole.
    function test_aJob_isSettledOnce() public {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        JobTerms memory t = jobs[jobId].terms;
        JobState memory submitted = jobs[jobId].state;
        dispute(jobId);
        JobState memory disputed = jobs[jobId].state;
        resolve(jobId, true);
        assertEq(market.jobHash(jobId), bytes32(0));
        uint96 earned = node(nodeId).earnings;
        bytes memory stale = abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, jobId);

        vm.warp(disputed.until() + 1);
        vm.expectRevert(stale);
        market.finalize(jobId, submitted);
        vm.startPrank(submitter);
        vm.expectRevert(stale);
        market.accept(jobId, t, submitted);
        vm.expectRevert(stale);
        market.dispute(jobId, t, submitted);
        vm.stopPrank();
        vm.prank(arbiter);
        vm.expectRevert(stale);
        market.resolve(jobId, t, disputed, false);
        vm.expectRevert(stale);
        market.settleDispute(jobId, t, disputed);
        assertEq(node(nodeId).earnings, earned, "paid once");

        (uint64 next,) = submittedJob();
        vm.warp(untilOf(next));
        (uint64[] memory ids, JobState[] memory states) = idsAndStates(next, next);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, next));
        market.finalizeBatch(ids, states);
        assertEq(market.jobHash(next), keccak256(abi.encode(jobs[next].state)), "nothing of the batch happened");
        assertReplay();
    }

    /// The refunded job cannot be refunded again, by any of the three ways.
    function test_aRefund_happensOnce() public {
        uint64 jobId = postJob(h100Job(), BOUNTY, uint40(block.timestamp + RUNTIME));
        JobTerms memory t = jobs[jobId].terms;
        JobState memory open = jobs[jobId].state;
        cancel(jobId);
        bytes memory stale = abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, jobId);
        vm.prank(submitter);
        vm.expectRevert(stale);
        market.cancel(jobId, t, open);
        vm.warp(block.timestamp + 1);
        vm.expectRevert(stale);
        market.expire(jobId, t, open);
        assertEq(market.creditOf(submitter), BOUNTY, "refunded once");
        assertReplay();
    }

    /// The same assignment twice in a batch reverts whole.
    function test_aBatchAssigningAJobTwice_revertsWhole() public {
        uint64 a = registerNode();
        uint64 b = nodeOf("b", OTHER_AGENT_KEY);
        uint64 jobId = postJob();
        Assignment[] memory batch = batchOf(jobId, a, jobId, b);
        vm.prank(matcher);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, jobId));
        market.assignBatch(batch);
        assertStatus(jobId, JobStatus.Open);
    }

    function copy(JobTerms memory t) internal pure returns (JobTerms memory) {
        return JobTerms(t.party, t.specHash, t.gpuModel, t.limits, t.maxPricePerGpuHour);
    }
}
