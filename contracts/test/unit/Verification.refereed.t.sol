// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {VerificationUnitTest} from "./Verification.base.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {IVerificationEvents} from "../../src/interfaces/IVerification.sol";
import {
    CompletionKind,
    JobRequirements,
    JobStatus,
    JobTerms,
    NodeCapabilities,
    NodeStatus,
    VerifiedState,
    VerifyParams
} from "../../src/types/Types.sol";

/// @notice A refereed job before any dispute (design 18, §2.6): one provider, placed by the
/// matcher or claimed by its agent, holds its seat stake and r bounties while it has the
/// job, answers, and is paid like a tier-none provider; its faults cost the seat stake.
contract VerificationRefereedTest is VerificationUnitTest {
    using JobView for JobTerms;
    using JobView for VerifiedState;

    uint64 internal provider;

    function setUp() public override {
        super.setUp();
        provider = registerWasmNode(0, STAKE);
    }

    /// The hold: the seat stake and r bounties.
    function holdOf(uint64 id) internal view returns (uint256) {
        return uint256(verified[id].seatStake()) + uint256(verified[id].bounty()) * jobs[id].terms.size();
    }

    function assignRefereed(uint64 id, uint64 nodeId) internal {
        vm.prank(matcher);
        referees.assignRefereed(id, nodeId, terms(id), verified[id]);
        sync();
    }

    function submitRefereed(uint64 id) internal {
        vm.prank(agentOf[verified[id].nodeId()]);
        referees.submitRefereedResult(id, terms(id), verified[id], keccak256("the result"), "gantry://results/1");
        sync();
    }

    function assignedJob() internal returns (uint64 id) {
        id = postRefereed();
        assignRefereed(id, provider);
    }

    // ---------------------------------------------------------------- placement

    function test_assign_locksTheHold_andTheFoldFollows() public {
        uint64 id = postRefereed();
        vm.expectEmit(address(market));
        emit IVerificationEvents.HoldLocked(id, provider, uint96(uint256(verified[id].seatStake()) + 3 * BOUNTY));
        assignRefereed(id, provider);
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Assigned));
        assertEq(verified[id].nodeId(), provider);
        assertEq(node(provider).lockedStake, holdOf(id));
        assertEq(market.jobHash(id), keccak256(abi.encode(verified[id])), "the fold is the market's state");
    }

    function test_assign_onlyTheMatcher_claimOnlyTheAgent() public {
        uint64 id = postRefereed();
        vm.prank(stranger);
        vm.expectRevert();
        referees.assignRefereed(id, provider, terms(id), verified[id]);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotNodeAgent.selector, provider, stranger));
        referees.claimRefereed(id, provider, terms(id), verified[id]);
        vm.prank(agentOf[provider]);
        referees.claimRefereed(id, provider, terms(id), verified[id]);
        sync();
        assertEq(verified[id].nodeId(), provider);
    }

    /// The hold is reserved, not just checked, and the node keeps the minimum stake free
    /// beside it (its tier-none faults still cost it): a node whose free stake is short of
    /// both is refused, by either path.
    function test_assign_refusesANodeThatCannotCoverTheHoldAndTheMinimum() public {
        uint64 poor = registerWasmNode(1, 2 * MIN_STAKE);
        uint64 id = postVerified(refereed(5), 20e6, uint40(block.timestamp + 1 days));
        uint256 needed = holdOf(id) + MIN_STAKE;
        assertLe(holdOf(id), 2 * MIN_STAKE, "the hold alone would fit");
        bytes memory refused = abi.encodeWithSelector(
            IVerificationEvents.Verification_InsufficientCollateral.selector, poor, needed, 2 * MIN_STAKE
        );
        vm.prank(matcher);
        vm.expectRevert(refused);
        referees.assignRefereed(id, poor, terms(id), verified[id]);
        vm.prank(agentOf[poor]);
        vm.expectRevert(refused);
        referees.claimRefereed(id, poor, terms(id), verified[id]);
    }

    /// The matcher cannot take a pool member out of a draw by placing a job on it: a
    /// member keeps the pool's floor free. The member may claim it itself.
    function test_theMatcher_cannotPushAPoolMemberUnderTheFloor_itsOwnClaimCan() public {
        VerifyParams memory p = verifyParams();
        p.poolFloor = 200e6; // above the minimum stake
        vm.prank(admin);
        verification.setVerifyParams(p);
        uint64 member = registerWasmNode(1, 220e6);
        syncPool(member);
        assertGt(node(member).poolIndex, 0);
        uint64 id = postVerified(refereed(3), 5e6, uint40(block.timestamp + 1 days));
        uint256 hold = holdOf(id);
        vm.prank(matcher);
        vm.expectRevert(
            abi.encodeWithSelector(
                IVerificationEvents.Verification_InsufficientCollateral.selector, member, hold + 200e6, 220e6
            )
        );
        referees.assignRefereed(id, member, terms(id), verified[id]);
        vm.prank(agentOf[member]);
        referees.claimRefereed(id, member, terms(id), verified[id]);
        sync();
        assertEq(node(member).poolIndex, 0, "its own claim took it out of the pool");
    }

    /// Verified jobs run at least ten graces (a seat or a provider always has the whole
    /// grace to refuse a job), and a refereed job's hold, with a dispute's bond, fits 96
    /// bits.
    function test_post_refusesARuntimeShorterThanTenGraces_andAnUnholdableBounty() public {
        JobRequirements memory r = wasmJob();
        r.maxRuntime = 299;
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_RuntimeTooShort.selector, 299, 300));
        verification.postVerifiedJob(r, refereed(3), BOUNTY, uint40(block.timestamp + 1 days), spec());
        // Rules that let a seat stake stay under the floor for a huge bounty (1 bps of it):
        // its hold, the seat stake and five bounties, would pass 96 bits.
        VerifyParams memory p = verifyParams();
        (p.seatBps, p.poolFloor) = (1, type(uint96).max / 2);
        vm.prank(admin);
        verification.setVerifyParams(p);
        uint96 huge = type(uint96).max / 4;
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_BountyTooLarge.selector, huge));
        verification.postVerifiedJob(wasmJob(), refereed(5), huge, uint40(block.timestamp + 1 days), spec());
        // A hold that fits, but not with a dispute's bond (a tenth of the bounty) beside it:
        // a decision's sums would overflow, and the job could never be decided.
        uint96 large = uint96(uint256(type(uint96).max) * 100 / 505);
        assertLe(uint256(large) * 5 + large / 10_000, type(uint96).max, "the hold alone fits");
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_BountyTooLarge.selector, large));
        verification.postVerifiedJob(wasmJob(), refereed(5), large, uint40(block.timestamp + 1 days), spec());
    }

    /// The job's requirements hold as for any job: an engine the node does not run, a
    /// node not Active, a run that would end past the deadline.
    function test_assign_followsTheJobsRequirements() public {
        address owner = makeAddr("docker operator");
        fund(owner, 10_000e6);
        NodeCapabilities memory docker = wasmNode();
        docker.engines = DOCKER_ONLY;
        uint64 dockerNode = registerNode(owner, 0xD0C, docker, STAKE);
        uint64 id = postRefereed();
        vm.prank(matcher);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_EngineNotServed.selector, 1));
        referees.assignRefereed(id, dockerNode, terms(id), verified[id]);
        beginExit(provider);
        vm.prank(matcher);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.JobMarket_NodeNotActive.selector, provider, NodeStatus.Exiting)
        );
        referees.assignRefereed(id, provider, terms(id), verified[id]);
        uint64 other = registerWasmNode(2, STAKE);
        vm.warp(terms(id).deadline() - RUNTIME + 1);
        vm.prank(matcher);
        vm.expectRevert();
        referees.assignRefereed(id, other, terms(id), verified[id]);
    }

    /// No `JobMarket` call acts on a refereed job, nor a refereed call on a tier-none job.
    function test_tiersDoNotMix() public {
        uint64 id = postRefereed();
        vm.prank(matcher);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, id));
        market.assign(id, provider, terms(id), jobs[id].state);
        syncPool(provider);
        syncPool(registerWasmNode(1, STAKE));
        syncPool(registerWasmNode(2, STAKE));
        uint64 replicatedJob = postReplicated();
        vm.prank(matcher);
        vm.expectRevert(IVerificationEvents.Verification_InvalidPolicy.selector);
        referees.assignRefereed(replicatedJob, provider, terms(replicatedJob), verified[replicatedJob]);
    }

    // ---------------------------------------------------------------- results and pay

    function test_accept_paysTheProvider_andReleasesTheHold() public {
        uint64 id = assignedJob();
        submitRefereed(id);
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Submitted));
        assertEq(verified[id].result, keccak256("the result"));
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotSubmitter.selector, id, stranger));
        referees.acceptVerified(id, terms(id), verified[id]);
        uint96 fee = BOUNTY * FEE_BPS / 10_000;
        vm.expectEmit(address(market));
        emit IJobMarket.JobCompleted(id, provider, BOUNTY - fee, fee, CompletionKind.Accepted);
        vm.prank(submitter);
        referees.acceptVerified(id, terms(id), verified[id]);
        sync();
        assertEq(node(provider).earnings, BOUNTY - fee);
        assertEq(node(provider).lockedStake, 0);
        assertEq(market.jobHash(id), bytes32(0));
        assertReplay();
    }

    function test_finalize_afterTheChallengeWindowOnly() public {
        uint64 id = assignedJob();
        submitRefereed(id);
        uint40 until = verified[id].until();
        vm.warp(until - 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_ChallengeWindowOpen.selector, id, until));
        referees.finalizeVerified(id, terms(id), verified[id]);
        vm.warp(until);
        vm.prank(stranger);
        referees.finalizeVerified(id, terms(id), verified[id]);
        sync();
        assertEq(node(provider).lockedStake, 0);
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Completed));
        assertReplay();
    }

    function test_submit_onlyTheProvidersAgent_inTime_aRealHash() public {
        uint64 id = assignedJob();
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotAssignedAgent.selector, id, stranger));
        referees.submitRefereedResult(id, terms(id), verified[id], keccak256("x"), "");
        vm.prank(agentOf[provider]);
        vm.expectRevert(IVerificationEvents.Verification_EmptySeal.selector);
        referees.submitRefereedResult(id, terms(id), verified[id], bytes32(0), "");
        vm.warp(verified[id].until() + 1);
        vm.prank(agentOf[provider]);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_RuntimeOver.selector, id, verified[id].until()));
        referees.submitRefereedResult(id, terms(id), verified[id], keccak256("x"), "");
    }

    // ---------------------------------------------------------------- faults

    function test_reject_withinTheGrace_isFree_requeuesAndBars() public {
        uint64 id = assignedJob();
        vm.warp(block.timestamp + 30);
        vm.prank(agentOf[provider]);
        referees.rejectRefereed(id, terms(id), verified[id], "not my profile");
        sync();
        assertEq(node(provider).stake, STAKE, "free");
        assertEq(node(provider).lockedStake, 0);
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Open));
        assertEq(market.jobHash(id), keccak256(abi.encode(verified[id])));
        vm.prank(matcher);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_Barred.selector, id, provider));
        referees.assignRefereed(id, provider, terms(id), verified[id]);
        assertReplay();
    }

    function test_reject_afterTheGrace_chargesTheProratedSeatStake() public {
        uint64 id = assignedJob();
        uint96 seatStake = verified[id].seatStake();
        vm.warp(block.timestamp + RUNTIME / 2);
        vm.prank(agentOf[provider]);
        referees.rejectRefereed(id, terms(id), verified[id], "gave up");
        sync();
        assertEq(node(provider).stake, STAKE - rejectCharge(seatStake, RUNTIME / 2, RUNTIME));
        assertEq(node(provider).lockedStake, 0);
        assertReplay();
    }

    /// A provider marked Inactive during the attempt, or past its runtime, is reclaimed: its
    /// seat stake slashed, the rest of the hold released; out of attempts, the job fails
    /// and the submitter gets its bounty back.
    function test_reclaim_slashesTheSeatStake_untilOutOfAttempts() public {
        uint64 id = postRefereed();
        uint96 seatStake = verified[id].seatStake();
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, id, JobStatus.Open));
        referees.reclaimRefereed(id, terms(id), verified[id]);
        uint64[3] memory providers = [provider, registerWasmNode(1, STAKE), registerWasmNode(2, STAKE)];
        uint256 credits = market.creditOf(submitter);
        for (uint256 i; i < 3; ++i) {
            assignRefereed(id, providers[i]);
            vm.prank(stranger);
            vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotReclaimable.selector, id));
            referees.reclaimRefereed(id, terms(id), verified[id]);
            vm.warp(verified[id].until() + 1);
            vm.prank(stranger);
            referees.reclaimRefereed(id, terms(id), verified[id]);
            sync();
            assertEq(node(providers[i]).stake, STAKE - seatStake, "the seat stake");
            assertEq(node(providers[i]).lockedStake, 0, "the rest released");
        }
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Failed));
        assertEq(market.creditOf(submitter), credits + BOUNTY, "out of attempts: refunded");
        assertEq(market.jobHash(id), bytes32(0));
        assertReplay();
    }

    function test_aProviderMarkedInactive_mustBeReclaimed_notRejected() public {
        uint64 id = assignedJob();
        vm.warp(block.timestamp + HEARTBEAT_TIMEOUT + 1);
        markInactive(provider, stranger);
        vm.prank(agentOf[provider]);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_MustBeReclaimed.selector, id));
        referees.rejectRefereed(id, terms(id), verified[id], "too late");
        vm.expectEmit(address(market));
        emit IJobMarket.JobRequeued(id, 1, 1);
        vm.prank(stranger);
        referees.reclaimRefereed(id, terms(id), verified[id]);
        sync();
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Open));
        assertEq(node(provider).stake, STAKE - verified[id].seatStake());
        assertReplay();
    }
}
