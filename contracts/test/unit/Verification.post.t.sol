// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {VerificationUnitTest} from "./Verification.base.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {IVerification, IVerificationEvents} from "../../src/interfaces/IVerification.sol";
import {
    ENGINE_DOCKER,
    JobRequirements,
    JobState,
    JobStatus,
    JobTerms,
    MarketParams,
    VERIFY_NONE,
    VerifiedState,
    VerifyParams,
    VerifyPolicy
} from "../../src/types/Types.sol";

/// @notice Posting, cancelling and expiring verified jobs, and the rules' admin: what is
/// escrowed, what the state is, and every posting that must be refused.
contract VerificationPostTest is VerificationUnitTest {
    using JobView for JobTerms;
    using JobView for JobState;
    using JobView for VerifiedState;

    // ---------------------------------------------------------------- posting

    function test_postReplicated_escrowsNBounties_isCommitting_andArmsTheFirstDraw() public {
        pool(3);
        uint256 balance = token.balanceOf(submitter);
        uint40 deadline = replicatedDeadline();
        vm.expectEmit(address(market));
        emit IVerificationEvents.VerifiedJobPosted(1, replicated(3, 2), 2 * BOUNTY, deadline - W);
        vm.expectEmit(address(market));
        emit IVerificationEvents.DrawArmed(1, uint40(block.number) + 2, 0);
        uint64 id = postVerified(replicated(3, 2), BOUNTY, deadline);
        assertEq(balance - token.balanceOf(submitter), 3 * BOUNTY, "n bounties escrowed");
        VerifiedState memory v = verified[id];
        assertEq(uint8(v.status()), uint8(JobStatus.Committing));
        assertEq(v.until(), deadline - W, "until: the end of the commit phase");
        assertEq(v.commitEnd(), deadline - W);
        assertEq(v.seatStake(), 2 * BOUNTY, "twice the bounty");
        assertEq(v.drawBlock(), block.number + 2);
        assertEq(market.jobHash(id), keccak256(abi.encode(v)), "the fold is the market's state");
        JobTerms memory t = terms(id);
        assertEq(t.tier(), 1);
        assertEq(t.size(), 3);
        assertEq(t.quorum(), 2);
        assertEq(t.revealWindow(), W);
        assertReplay();
    }

    function test_postRefereed_escrowsOneBounty_andIsOpen() public {
        uint256 balance = token.balanceOf(submitter);
        uint64 id = postRefereed();
        assertEq(balance - token.balanceOf(submitter), BOUNTY);
        VerifiedState memory v = verified[id];
        assertEq(uint8(v.status()), uint8(JobStatus.Open));
        assertEq(v.drawBlock(), 0, "nothing to draw before a dispute");
        assertEq(market.jobHash(id), keccak256(abi.encode(v)));
        assertReplay();
    }

    function test_posting_takesCreditsFirst() public {
        pool(3);
        vm.prank(submitter);
        market.deposit(BOUNTY);
        sync();
        uint256 balance = token.balanceOf(submitter);
        postReplicated();
        assertEq(market.creditOf(submitter), 0);
        assertEq(balance - token.balanceOf(submitter), 2 * BOUNTY, "the rest pulled");
        assertReplay();
    }

    /// The seat stake is max(seatFloor, seatBps x bounty), and never over the pool's floor.
    function testFuzz_theSeatStake(uint96 bounty) public {
        VerifyParams memory p = verifyParams();
        bounty = uint96(bound(bounty, p.minVerifiedBounty, p.poolFloor / 2));
        uint64 id = postVerified(refereed(3), bounty, uint40(block.timestamp + 1 days));
        uint256 scaled = uint256(bounty) * p.seatBps / 10_000;
        assertEq(verified[id].seatStake(), scaled > p.seatFloor ? scaled : p.seatFloor);
        assertLe(verified[id].seatStake(), p.poolFloor);
    }

    // ---------------------------------------------------------------- refused

    function test_postVerifiedJob_refusesANonWasmEngine() public {
        JobRequirements memory r = h100Job();
        vm.expectRevert(
            abi.encodeWithSelector(IVerificationEvents.Verification_EngineNotVerifiable.selector, ENGINE_DOCKER)
        );
        vm.prank(submitter);
        verification.postVerifiedJob(r, refereed(3), BOUNTY, uint40(block.timestamp + 1 days), spec());
    }

    /// Replicated needs 3 <= n <= 5, 2k > n and k <= n - 1; refereed r = 3 or 5 and no
    /// quorum; tier none or unknown is no verified job.
    function test_postVerifiedJob_refusesEveryPolicyOutsideTheRules() public {
        pool(5);
        VerifyPolicy[12] memory bad = [
            replicated(2, 2),
            replicated(6, 4),
            replicated(3, 3), // k = n: one seat vetoes
            replicated(4, 2), // 2k = n: two digests could tie at k
            replicated(5, 2),
            replicated(5, 5),
            replicated(3, 1),
            refereed(4), // even
            refereed(1),
            refereed(7),
            VerifyPolicy(VERIFY_NONE, 3, 2, W),
            VerifyPolicy(3, 3, 2, W)
        ];
        for (uint256 i; i < bad.length; ++i) {
            vm.expectRevert(IVerificationEvents.Verification_InvalidPolicy.selector);
            vm.prank(submitter);
            verification.postVerifiedJob(wasmJob(), bad[i], BOUNTY, replicatedDeadline(), spec());
        }
        VerifyPolicy memory quorum = refereed(3);
        quorum.quorum = 2;
        vm.expectRevert(IVerificationEvents.Verification_InvalidPolicy.selector);
        vm.prank(submitter);
        verification.postVerifiedJob(wasmJob(), quorum, BOUNTY, replicatedDeadline(), spec());
        // And each valid one is taken.
        VerifyPolicy[6] memory good =
            [replicated(3, 2), replicated(4, 3), replicated(5, 3), replicated(5, 4), refereed(3), refereed(5)];
        for (uint256 i; i < good.length; ++i) {
            postVerified(good[i], BOUNTY, replicatedDeadline());
        }
    }

    function test_postVerifiedJob_refusesARevealWindowUnderThePolicyFloor() public {
        VerifyPolicy memory short_ = refereed(3);
        short_.revealWindow = uint16(verifyParams().minRevealWindow - 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                IVerificationEvents.Verification_RevealWindowTooShort.selector,
                short_.revealWindow,
                verifyParams().minRevealWindow
            )
        );
        vm.prank(submitter);
        verification.postVerifiedJob(wasmJob(), short_, BOUNTY, uint40(block.timestamp + 1 days), spec());
    }

    function test_postVerifiedJob_refusesABountyUnderTheFloor_orASeatStakeOverThePoolFloor() public {
        VerifyParams memory p = verifyParams();
        uint40 deadline = uint40(block.timestamp + 1 days);
        vm.expectRevert(
            abi.encodeWithSelector(
                IVerificationEvents.Verification_BountyTooSmall.selector, p.minVerifiedBounty - 1, p.minVerifiedBounty
            )
        );
        vm.prank(submitter);
        verification.postVerifiedJob(wasmJob(), refereed(3), p.minVerifiedBounty - 1, deadline, spec());
        uint96 tooBig = p.poolFloor / 2 + 1;
        vm.expectRevert(
            abi.encodeWithSelector(
                IVerificationEvents.Verification_SeatStakeOverFloor.selector, uint96(uint256(tooBig) * 2), p.poolFloor
            )
        );
        vm.prank(submitter);
        verification.postVerifiedJob(wasmJob(), refereed(3), tooBig, deadline, spec());
    }

    /// An escrow that 96 bits cannot hold is refused (under rules that would allow its
    /// seat stake).
    function test_postReplicated_refusesAnEscrowOver96Bits() public {
        pool(3);
        VerifyParams memory p = verifyParams();
        (p.poolFloor, p.seatBps) = (type(uint96).max, 1);
        vm.prank(admin);
        verification.setVerifyParams(p);
        uint96 huge = type(uint96).max / 2;
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_BountyTooLarge.selector, huge));
        vm.prank(submitter);
        verification.postVerifiedJob(wasmJob(), replicated(3, 2), huge, replicatedDeadline(), spec());
    }

    function test_postReplicated_refusesASmallPool() public {
        pool(2);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_PoolTooSmall.selector, 2, 3));
        vm.prank(submitter);
        verification.postVerifiedJob(wasmJob(), replicated(3, 2), BOUNTY, replicatedDeadline(), spec());
    }

    /// A replicated deadline leaves the first draw, a run and the reveals, and no more than
    /// two runs' worth of refills.
    function test_postReplicated_refusesADeadlineOutOfRange() public {
        pool(3);
        uint256 earliest = block.timestamp + 10 minutes + RUNTIME + W;
        uint256 latest = block.timestamp + 2 * 7 days + W;
        vm.expectRevert(
            abi.encodeWithSelector(
                IVerificationEvents.Verification_DeadlineOutOfRange.selector, uint40(earliest - 1), earliest, latest
            )
        );
        vm.prank(submitter);
        verification.postVerifiedJob(wasmJob(), replicated(3, 2), BOUNTY, uint40(earliest - 1), spec());
        vm.expectRevert(
            abi.encodeWithSelector(
                IVerificationEvents.Verification_DeadlineOutOfRange.selector, uint40(latest + 1), earliest, latest
            )
        );
        vm.prank(submitter);
        verification.postVerifiedJob(wasmJob(), replicated(3, 2), BOUNTY, uint40(latest + 1), spec());
        postVerified(replicated(3, 2), BOUNTY, uint40(earliest));
        postVerified(replicated(3, 2), BOUNTY, uint40(latest));
    }

    function test_postVerifiedJob_whenPaused_reverts() public {
        vm.prank(pauser);
        market.setPaused(true);
        vm.expectRevert(IJobMarket.JobMarket_Paused.selector);
        vm.prank(submitter);
        verification.postVerifiedJob(wasmJob(), refereed(3), BOUNTY, uint40(block.timestamp + 1 days), spec());
    }

    function test_postVerifiedJob_refusesBadSpecsAndRequirements() public {
        uint40 deadline = uint40(block.timestamp + 1 days);
        vm.expectRevert(IJobMarket.JobMarket_EmptySpec.selector);
        vm.prank(submitter);
        verification.postVerifiedJob(wasmJob(), refereed(3), BOUNTY, deadline, "");
        JobRequirements memory r = wasmJob();
        r.priority = 0;
        vm.expectRevert(IJobMarket.JobMarket_InvalidRequirements.selector);
        vm.prank(submitter);
        verification.postVerifiedJob(r, refereed(3), BOUNTY, deadline, spec());
    }

    /// A new market policy has no verification rules until the admin sets them (in the same
    /// batch, through the timelock).
    function test_aNewPolicyVersion_offersNoVerifiedJobsUntilItsRulesAreSet() public {
        MarketParams memory p = marketParams();
        setParams(p);
        uint32 version = uint32(terms(postJob()).policy());
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_NotOffered.selector, version));
        vm.prank(submitter);
        verification.postVerifiedJob(wasmJob(), refereed(3), BOUNTY, uint40(block.timestamp + 1 days), spec());
        vm.prank(admin);
        verification.setVerifyParams(verifyParams());
        postRefereed();
        assertEq(verification.verifyParams(version).poolFloor, verifyParams().poolFloor);
    }

    function test_setVerifyParams_isTheAdminsAndChecked() public {
        vm.expectRevert();
        vm.prank(stranger);
        verification.setVerifyParams(verifyParams());
        VerifyParams[6] memory bad;
        for (uint256 i; i < bad.length; ++i) {
            bad[i] = verifyParams();
        }
        bad[0].seatFloor = 0;
        bad[1].seatFloor = bad[1].poolFloor + 1;
        bad[2].seatBps = 0;
        bad[3].minVerifiedBounty = 0;
        bad[4].minRevealWindow = 0;
        bad[5].minPool = 2;
        for (uint256 i; i < bad.length; ++i) {
            vm.expectRevert(IVerificationEvents.Verification_InvalidParams.selector);
            vm.prank(admin);
            verification.setVerifyParams(bad[i]);
        }
    }

    // ---------------------------------------------------------------- no JobMarket call reaches a verified job

    /// A verified job's state is five words: any two-word state `JobMarket` is given hashes
    /// to something else, whatever it says.
    function test_jobMarketCalls_refuseAVerifiedJob() public {
        uint64 id = postRefereed();
        (uint64 nodeId) = registerWasmNode(0, STAKE);
        JobTerms memory t = terms(id);
        JobState memory s = jobs[id].state; // the fold's two-word view: Open, as posted
        bytes memory stale = abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, id);
        vm.expectRevert(stale);
        vm.prank(matcher);
        market.assign(id, nodeId, t, s);
        vm.expectRevert(stale);
        vm.prank(agentOf[nodeId]);
        market.claim(id, nodeId, t, s);
        vm.expectRevert(stale);
        vm.prank(submitter);
        market.cancel(id, t, s);
        vm.warp(t.deadline());
        vm.expectRevert(stale);
        market.expire(id, t, s);
    }

    // ---------------------------------------------------------------- cancel, expire

    function test_cancelVerified_refundsAnOpenRefereedJob_toItsSubmitterOnly() public {
        uint64 id = postRefereed();
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotSubmitter.selector, id, stranger));
        vm.prank(stranger);
        verification.cancelVerified(id, terms(id), verified[id]);
        uint256 credits = market.creditOf(submitter);
        vm.prank(submitter);
        verification.cancelVerified(id, terms(id), verified[id]);
        sync();
        assertEq(market.creditOf(submitter) - credits, BOUNTY);
        assertEq(market.jobHash(id), bytes32(0));
        assertReplay();
    }

    /// A submitter that could cancel a replicated job would re-post until a draw pleased it.
    function test_cancelVerified_refusesAReplicatedJob() public {
        pool(3);
        uint64 id = postReplicated();
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_NotCancellable.selector, id));
        vm.prank(submitter);
        verification.cancelVerified(id, terms(id), verified[id]);
    }

    function test_expireVerified_replicated_onlyOnceNoSeatCanBeDrawn() public {
        pool(3);
        uint64 id = postReplicated();
        uint40 commitEnd = verified[id].commitEnd();
        bytes memory notYet = abi.encodeWithSelector(IVerificationEvents.Verification_NotExpired.selector, id);
        vm.warp(commitEnd - RUNTIME);
        vm.expectRevert(notYet);
        verification.expireVerified(id, terms(id), verified[id]);
        vm.warp(commitEnd - RUNTIME + 1);
        uint256 credits = market.creditOf(submitter);
        vm.prank(stranger);
        verification.expireVerified(id, terms(id), verified[id]);
        sync();
        assertEq(market.creditOf(submitter) - credits, 3 * BOUNTY, "every bounty back");
        assertReplay();
    }

    function test_expireVerified_refereed_onceNoAttemptFits() public {
        uint64 id = postRefereed();
        uint40 deadline = terms(id).deadline();
        vm.warp(deadline - RUNTIME);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_NotExpired.selector, id));
        verification.expireVerified(id, terms(id), verified[id]);
        vm.warp(deadline - RUNTIME + 1);
        verification.expireVerified(id, terms(id), verified[id]);
        sync();
        assertEq(market.jobHash(id), bytes32(0));
        assertReplay();
    }

    function test_verifiedCalls_refuseAStaleOrForgedState() public {
        uint64 id = postRefereed();
        VerifiedState memory forged = verified[id];
        forged.seats = 1;
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_StaleState.selector, id));
        vm.prank(submitter);
        verification.cancelVerified(id, terms(id), forged);
        JobTerms memory other = terms(id);
        other.party += 1;
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongTerms.selector, id));
        vm.prank(submitter);
        verification.cancelVerified(id, other, verified[id]);
    }
}
