// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "forge-std/Test.sol";
import {VerificationUnitTest} from "./Verification.base.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {IVerificationEvents} from "../../src/interfaces/IVerification.sol";
import {FailureKind, JobStatus, JobTerms, NodeStatus, Seat, VerifiedState} from "../../src/types/Types.sol";

/// @notice A replicated job after its draw: seats commit seals of their results, reveal
/// them, and the job is decided (design 18, §2.4-2.5): who is paid, who is slashed, what
/// the submitter gets back, and that every lock and word ends.
contract VerificationReplicatedTest is VerificationUnitTest {
    using JobView for JobTerms;
    using JobView for VerifiedState;

    bytes32 internal constant X = keccak256("the result");
    bytes32 internal constant Y = keccak256("another result");
    bytes32 internal constant Z = keccak256("a third result");

    function fee() internal pure returns (uint96) {
        return BOUNTY * FEE_BPS / 10_000;
    }

    /// Every seat's lock ended and its word is gone (a commit on it is refused), the job's
    /// word too, and the replayed balances are the market's.
    function assertEnded(uint64 jobId, uint64[] memory seated) internal {
        assertEq(market.jobHash(jobId), bytes32(0), "the job's word is deleted");
        for (uint256 i; i < seated.length; ++i) {
            assertEq(node(seated[i]).lockedStake, 0, "the seat's lock is released");
            vm.prank(agentOf[seated[i]]);
            vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_SeatMismatch.selector, jobId, i));
            verification.commitSeat(jobId, uint8(i), seatOf[jobId][i], X);
        }
        assertReplay();
    }

    function seatedNodes(uint64 jobId) internal view returns (uint64[] memory ids) {
        ids = new uint64[](jobs[jobId].terms.size());
        for (uint256 i; i < ids.length; ++i) {
            ids[i] = seatNode(jobId, i);
        }
    }

    // ---------------------------------------------------------------- the decision

    function test_threeHonestSeats_arePaid_andTheJobIsVerified() public {
        uint64 id = seatedJob(3, 2);
        uint64[] memory seated = seatedNodes(id);
        commitAll(id, X);
        openReveals(id);
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Revealing));
        for (uint256 i; i < 3; ++i) {
            reveal(id, i, X);
        }
        uint256 credits = market.creditOf(submitter);
        vm.expectEmit(address(market));
        emit IVerificationEvents.JobVerified(id, X, 3, 0);
        decide(id); // early: every seat revealed
        for (uint256 i; i < 3; ++i) {
            assertEq(node(seated[i]).earnings, BOUNTY - fee(), "paid");
            assertEq(node(seated[i]).stake, STAKE, "not slashed");
        }
        assertEq(market.creditOf(submitter), credits, "nothing to refund");
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Completed));
        assertEnded(id, seated);
    }

    function test_aLiar_isSlashedTheSeatStake_andTheOthersArePaid() public {
        uint64 id = seatedJob(3, 2);
        uint64[] memory seated = seatedNodes(id);
        uint96 seatStake = verified[id].seatStake();
        commit(id, 0, X);
        commit(id, 1, Y); // the liar
        commit(id, 2, X);
        openReveals(id);
        reveal(id, 0, X);
        reveal(id, 1, Y);
        reveal(id, 2, X);
        uint256 credits = market.creditOf(submitter);
        decide(id);
        assertEq(node(seated[1]).stake, STAKE - seatStake, "the liar lost its seat stake");
        assertEq(node(seated[1]).earnings, 0);
        assertEq(node(seated[0]).earnings, BOUNTY - fee());
        assertEq(node(seated[2]).earnings, BOUNTY - fee());
        assertEq(market.creditOf(submitter), credits + BOUNTY, "the liar's bounty back");
        assertEnded(id, seated);
    }

    /// A seat that committed and never revealed is absent: slashed; the job is decided
    /// once the reveal phase ends.
    function test_aSeatThatDoesNotReveal_isSlashed_afterTheRevealPhase() public {
        uint64 id = seatedJob(3, 2);
        uint64[] memory seated = seatedNodes(id);
        commitAll(id, X);
        openReveals(id);
        reveal(id, 0, X);
        reveal(id, 1, X);
        // Not in the reveal phase's last second either: a reveal may still come then.
        uint40 revealBy = verified[id].until();
        vm.warp(revealBy);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_NotDecidable.selector, id, revealBy));
        verification.decide(id, terms(id), verified[id], seatList(id));
        pastReveals(id);
        decide(id);
        assertEq(node(seated[2]).stake, STAKE - verified[id].seatStake());
        assertEq(node(seated[0]).earnings, BOUNTY - fee());
        assertEnded(id, seated);
    }

    /// 3/2 with three different digests: no quorum, nobody is paid (each digest is
    /// alone), nobody is slashed (nobody can tell who lied), everything refunded.
    function test_threeDigests_noQuorum_refundAll_slashNobody() public {
        uint64 id = seatedJob(3, 2);
        uint64[] memory seated = seatedNodes(id);
        commit(id, 0, X);
        commit(id, 1, Y);
        commit(id, 2, Z);
        openReveals(id);
        reveal(id, 0, X);
        reveal(id, 1, Y);
        reveal(id, 2, Z);
        uint256 credits = market.creditOf(submitter);
        vm.expectEmit(address(market));
        emit IJobMarket.JobFailed(id, FailureKind.NoQuorum, 3 * BOUNTY);
        decide(id);
        for (uint256 i; i < 3; ++i) {
            assertEq(node(seated[i]).stake, STAKE);
            assertEq(node(seated[i]).earnings, 0);
        }
        assertEq(market.creditOf(submitter), credits + 3 * BOUNTY);
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Failed));
        assertEnded(id, seated);
    }

    /// 5/3: X, X, Y, Y and an absent seat: no quorum; both pairs paid, the absent seat
    /// slashed, one bounty back.
    function test_aTieBelowTheQuorum_paysBothPairs_andSlashesTheAbsent() public {
        uint64 id = seatedJob(5, 3);
        uint64[] memory seated = seatedNodes(id);
        bytes32[5] memory digests = [X, X, Y, Y, X];
        for (uint256 i; i < 5; ++i) {
            commit(id, i, digests[i]);
        }
        openReveals(id);
        for (uint256 i; i < 4; ++i) {
            reveal(id, i, digests[i]);
        }
        pastReveals(id);
        uint256 credits = market.creditOf(submitter);
        decide(id);
        for (uint256 i; i < 4; ++i) {
            assertEq(node(seated[i]).earnings, BOUNTY - fee(), "a matched pair is paid");
        }
        assertEq(node(seated[4]).stake, STAKE - verified[id].seatStake(), "the absent seat is slashed");
        assertEq(market.creditOf(submitter), credits + BOUNTY);
        assertEnded(id, seated);
    }

    /// The backstop: a job no seat could commit a result for (a hostile or broken job)
    /// slashes nobody, and the submitter gets everything back.
    function test_noSeatCommitted_nobodySlashed() public {
        uint64 id = seatedJob(3, 2);
        uint64[] memory seated = seatedNodes(id);
        pastReveals(id);
        uint256 credits = market.creditOf(submitter);
        decide(id);
        for (uint256 i; i < 3; ++i) {
            assertEq(node(seated[i]).stake, STAKE, "nobody slashed");
        }
        assertEq(market.creditOf(submitter), credits + 3 * BOUNTY);
        assertEnded(id, seated);
    }

    /// Two seats agree and the third never committed (its run timed out): the job is
    /// verified, the third slashed as absent.
    function test_aSeatThatNeverCommits_isAbsent_whenOthersDid() public {
        uint64 id = seatedJob(3, 2);
        uint64[] memory seated = seatedNodes(id);
        commit(id, 0, X);
        commit(id, 1, X);
        vm.warp(verified[id].commitEnd() + 1); // the reveal phase, without openReveals
        reveal(id, 0, X);
        reveal(id, 1, X);
        pastReveals(id);
        decide(id);
        assertEq(node(seated[2]).stake, STAKE - verified[id].seatStake());
        assertEq(node(seated[0]).earnings, BOUNTY - fee());
        assertEnded(id, seated);
    }

    /// Every pattern of what five seats do (nothing, commit only, or reveal X, Y or Z):
    /// the money is conserved, paid seats are never slashed, a lone digest without a
    /// quorum is never slashed, a seat that committed and did not reveal always is, and
    /// one that never committed only beside a quorum or two agreeing seats.
    function testFuzz_everyRevealPattern_conservesAndSlashesByTheTable(uint256 pattern) public {
        uint64 id = seatedJob(5, 3);
        uint64[] memory seated = seatedNodes(id);
        bytes32[4] memory digests = [bytes32(0), X, Y, Z];
        uint256[5] memory acts; // 0 nothing, 1 commit only, 2..4 reveal X, Y, Z
        for (uint256 i; i < 5; ++i) {
            acts[i] = (pattern >> (8 * i)) % 5;
            if (acts[i] != 0) commit(id, i, acts[i] >= 2 ? digests[acts[i] - 1] : X);
        }
        vm.warp(verified[id].commitEnd() + 1);
        for (uint256 i; i < 5; ++i) {
            if (acts[i] >= 2) reveal(id, i, digests[acts[i] - 1]);
        }
        pastReveals(id);
        uint256 credits = market.creditOf(submitter);
        decide(id);
        uint256 paid;
        uint256 agreed; // the most reveals of one digest
        for (uint256 i; i < 5; ++i) {
            if (node(seated[i]).earnings != 0) ++paid;
            if (acts[i] < 2) continue;
            uint256 same;
            for (uint256 j; j < 5; ++j) {
                if (acts[j] == acts[i]) ++same;
            }
            if (same > agreed) agreed = same;
        }
        for (uint256 i; i < 5; ++i) {
            bool slashed = node(seated[i]).stake < STAKE;
            if (node(seated[i]).earnings != 0) assertFalse(slashed, "a paid seat is never slashed");
            if (acts[i] == 0) assertEq(slashed, agreed >= 2, "never committed: slashed beside two agreeing seats");
            if (acts[i] == 1) assertTrue(slashed, "committed and did not reveal");
            if (acts[i] >= 2 && agreed < 3) {
                uint256 same;
                for (uint256 j; j < 5; ++j) {
                    if (acts[j] == acts[i]) ++same;
                }
                assertEq(slashed, false, "a revealer without a quorum");
                assertEq(node(seated[i]).earnings != 0, same >= 2, "paid when matched");
            }
        }
        assertEq(market.creditOf(submitter) - credits, uint256(BOUNTY) * (5 - paid), "paid + refunded = n bounties");
        assertEnded(id, seated);
    }

    // ---------------------------------------------------------------- commit

    function test_commitSeat_onlyBySeatsAgent_inTime_once() public {
        uint64 id = seatedJob(3, 2);
        Seat memory s = seatOf[id][0];
        uint64 nodeId = seatNode(id, 0);
        vm.prank(agentOf[seatNode(id, 1)]);
        vm.expectRevert(
            abi.encodeWithSelector(
                IVerificationEvents.Verification_NotSeatAgent.selector, id, 0, agentOf[seatNode(id, 1)]
            )
        );
        verification.commitSeat(id, 0, s, X);
        vm.prank(agentOf[nodeId]);
        vm.expectRevert(IVerificationEvents.Verification_EmptySeal.selector);
        verification.commitSeat(id, 0, s, bytes32(0));
        // Another seat's word is not this seat's.
        vm.prank(agentOf[nodeId]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_SeatMismatch.selector, id, 1));
        verification.commitSeat(id, 1, s, X);
        commit(id, 0, X);
        vm.prank(agentOf[nodeId]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_WrongPhase.selector, id, 0, 2));
        verification.commitSeat(id, 0, seatOf[id][0], X);
        // Seat 1's run is over: it can no longer commit.
        uint40 until = uint40(seatOf[id][1].fields >> 120);
        vm.warp(until + 1);
        vm.prank(agentOf[seatNode(id, 1)]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_SeatTimedOut.selector, id, 1, until));
        verification.commitSeat(id, 1, seatOf[id][1], X);
    }

    // ---------------------------------------------------------------- reject, reclaim

    function test_rejectSeat_withinTheGrace_isFree_barsTheNode_andTheVacatedSeatIsRedrawn() public {
        uint64 id = seatedJob(3, 2);
        uint64 rejecter = seatNode(id, 1);
        uint96 seatStake = verified[id].seatStake();
        bytes32 word = market.jobHash(id);
        vm.warp(block.timestamp + 30);
        decline(id, 1);
        assertEq(node(rejecter).stake, STAKE, "free within the grace");
        assertEq(node(rejecter).lockedStake, 0);
        assertGt(node(rejecter).poolIndex, 0, "back in the pool");
        assertEq(market.jobHash(id), word, "a decline writes only its seat's word");
        assertEq(seatOf[id][1].fields >> 248, 4, "Declined");
        // Anyone vacates it: the seat is empty and a draw is armed for it.
        vacate(id, 1);
        assertEq(seatNode(id, 1), 0, "the seat is empty");
        assertEq(verified[id].barred(), 1);
        assertEq(verified[id].faults(), 0);
        assertEq(market.jobHash(id), keccak256(abi.encode(verified[id])), "the fold is the market's state");
        assertGt(verified[id].drawBlock(), 0, "a draw is armed for the seat");
        // The pool's only free member is the rejecter: barred, it is never drawn again.
        drawWith(id, 99);
        assertEq(seatNode(id, 1), 0, "not the rejecter");
        // A newcomer is.
        syncPool(registerWasmNode(7, STAKE));
        drawWith(id, 5);
        assertTrue(seatNode(id, 1) != 0 && seatNode(id, 1) != rejecter, "redrawn");
        assertEq(node(seatNode(id, 1)).lockedStake, seatStake);
        assertReplay();
    }

    /// Every seat of a job the nodes cannot run declines in the same block: none races
    /// another (each writes its own word), so none is charged for another's timing.
    function test_allSeatsDeclineInOneBlock_eachFree() public {
        uint64 id = seatedJob(5, 3);
        vm.warp(block.timestamp + 30);
        for (uint256 i; i < 5; ++i) {
            decline(id, i);
        }
        for (uint256 i; i < 5; ++i) {
            assertEq(node(seatNode(id, i)).stake, STAKE, "free");
            assertEq(node(seatNode(id, i)).lockedStake, 0);
        }
        // Vacated (each vacate re-reads the job's word), then nothing fills them: the
        // submitter gets everything back.
        for (uint256 i; i < 5; ++i) {
            vacate(id, i);
        }
        assertEq(verified[id].seats, 0);
        vm.warp(verified[id].commitEnd() - RUNTIME + 1);
        uint256 credits = market.creditOf(submitter);
        vm.prank(stranger);
        verification.expireVerified(id, terms(id), verified[id]);
        sync();
        assertEq(market.creditOf(submitter), credits + 5 * BOUNTY);
        assertReplay();
    }

    function test_rejectSeat_afterTheGrace_chargesTheProratedSeatStake() public {
        uint64 id = seatedJob(3, 2);
        uint64 rejecter = seatNode(id, 0);
        uint96 seatStake = verified[id].seatStake();
        vm.warp(block.timestamp + RUNTIME / 2);
        decline(id, 0);
        uint256 charged = rejectCharge(seatStake, RUNTIME / 2, RUNTIME);
        assertGt(charged, 0);
        assertEq(node(rejecter).stake, STAKE - charged);
        assertEq(node(rejecter).lockedStake, 0);
        // Once declined, nothing more: not again, not a commit, not a slash at the decision.
        vm.prank(agentOf[rejecter]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_WrongPhase.selector, id, 0, 4));
        verification.rejectSeat(id, 0, seatOf[id][0]);
        commit(id, 1, X);
        commit(id, 2, X);
        vm.warp(verified[id].commitEnd() + 1);
        reveal(id, 1, X);
        reveal(id, 2, X);
        decide(id);
        assertEq(node(rejecter).stake, STAKE - charged, "a declined seat is not slashed again");
        vm.prank(agentOf[rejecter]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_SeatMismatch.selector, id, 0));
        verification.commitSeat(id, 0, seatOf[id][0], X); // its word went with the job
        assertEq(node(rejecter).earnings, 0);
        assertReplay();
    }

    function test_rejectSeat_ofANodeMarkedInactive_mustBeReclaimed() public {
        uint64 id = seatedJob(3, 2);
        uint64 absent = seatNode(id, 2);
        for (uint256 i; i < 2; ++i) {
            vm.warp(block.timestamp + HEARTBEAT_TIMEOUT / 2);
            heartbeat(seatNode(id, 0));
            heartbeat(seatNode(id, 1));
        }
        vm.warp(block.timestamp + 1);
        markInactive(absent, stranger);
        sync();
        vm.prank(agentOf[absent]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_MustBeReclaimed.selector, id, 2));
        verification.rejectSeat(id, 2, seatOf[id][2]);
        vm.prank(agentOf[absent]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_MustBeReclaimed.selector, id, 2));
        verification.commitSeat(id, 2, seatOf[id][2], X);
        // A live seat is not reclaimable.
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_NotReclaimable.selector, id, 0));
        verification.reclaimSeat(id, terms(id), verified[id], 0, seatOf[id][0]);

        uint96 seatStake = verified[id].seatStake();
        vacate(id, 2);
        assertEq(node(absent).stake, STAKE - seatStake, "the seat stake is slashed");
        assertEq(node(absent).lockedStake, 0);
        assertEq(verified[id].faults(), 1);
        assertEq(market.jobHash(id), keccak256(abi.encode(verified[id])));
        assertReplay();
    }

    // ---------------------------------------------------------------- reveals

    function test_reveal_notBeforeThePhase_notWithAnotherDigest_notAfterIt() public {
        uint64 id = seatedJob(3, 2);
        commitAll(id, X);
        uint64 nodeId = seatNode(id, 0);
        vm.prank(agentOf[nodeId]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_RevealNotOpen.selector, id));
        verification.revealSeat(id, terms(id), verified[id], 0, seatOf[id][0], X, saltOf(id, 0));
        openReveals(id);
        vm.prank(agentOf[nodeId]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_SealMismatch.selector, id, 0));
        verification.revealSeat(id, terms(id), verified[id], 0, seatOf[id][0], Y, saltOf(id, 0));
        vm.prank(agentOf[nodeId]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_SealMismatch.selector, id, 0));
        verification.revealSeat(id, terms(id), verified[id], 0, seatOf[id][0], X, saltOf(id, 1));
        uint40 revealBy = verified[id].until();
        vm.warp(revealBy + 1);
        vm.prank(agentOf[nodeId]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_RevealClosed.selector, id, revealBy));
        verification.revealSeat(id, terms(id), verified[id], 0, seatOf[id][0], X, saltOf(id, 0));
    }

    /// A lazy seat copies an honest seat's seal: it can never open it (the seal holds the
    /// seat and the node), so it is slashed as a seat that did not reveal.
    function test_aCopiedSeal_cannotBeRevealed_andTheCopierIsSlashed() public {
        uint64 id = seatedJob(3, 2);
        uint64 copier = seatNode(id, 2);
        commit(id, 0, X);
        commit(id, 1, X);
        vm.prank(agentOf[copier]);
        verification.commitSeat(id, 2, seatOf[id][2], seatOf[id][0].seal);
        sync();
        openReveals(id);
        reveal(id, 0, X);
        reveal(id, 1, X);
        // It saw seat 0's digest and salt in its reveal: they do not open its copy.
        vm.prank(agentOf[copier]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_SealMismatch.selector, id, 2));
        verification.revealSeat(id, terms(id), verified[id], 2, seatOf[id][2], X, saltOf(id, 0));
        pastReveals(id);
        decide(id);
        assertEq(node(copier).stake, STAKE - verified[id].seatStake());
        assertEq(node(copier).earnings, 0);
    }

    /// The reveal is authorised by the node's agent at reveal time: an operator that
    /// rotated a compromised key after its commit still reveals.
    function test_aRotatedAgent_reveals() public {
        uint64 id = seatedJob(3, 2);
        commitAll(id, X);
        openReveals(id);
        uint64 nodeId = seatNode(id, 0);
        uint256 newKey = 0xD00D;
        address newAgent = vm.addr(newKey);
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory consent = signConsent(node(nodeId).operator, newKey, deadline);
        vm.prank(node(nodeId).operator);
        nodes.setAgent(nodeId, newAgent, deadline, consent);
        sync();
        vm.prank(newAgent);
        verification.revealSeat(id, terms(id), verified[id], 0, seatOf[id][0], X, saltOf(id, 0));
        sync();
        assertEq(uint8(seatOf[id][0].fields >> 248), 3, "revealed");
    }

    // ---------------------------------------------------------------- openReveals, lists

    function test_openReveals_waitsForEveryCommit_andForSeatsThatCanStillFill() public {
        pool(4);
        uint64 id = postReplicated();
        drawWith(id, 1);
        commit(id, 0, X);
        commit(id, 1, X);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_NotCommitted.selector, id, 2));
        verification.openReveals(id, terms(id), verified[id], seatList(id));
        decline(id, 2);
        // Seat 2 is Declined and can still be vacated and redrawn.
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_SeatsCanStillFill.selector, id));
        verification.openReveals(id, terms(id), verified[id], seatList(id));
        // Once no run could end before the commit phase does, two seats are enough.
        vm.warp(verified[id].commitEnd() - RUNTIME + 1);
        openReveals(id);
        reveal(id, 0, X);
        reveal(id, 1, X);
        decide(id);
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Completed));
        assertReplay();
    }

    /// `openReveals` and `decide` take every seat, in order, as stored: a list that leaves
    /// a seat out, reorders, or forges one is refused.
    function test_seatLists_mustBeTheStoredSeats() public {
        uint64 id = seatedJob(3, 2);
        commitAll(id, X);
        Seat[] memory list = seatList(id);
        Seat[] memory short = new Seat[](2);
        (short[0], short[1]) = (list[0], list[1]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_SeatMismatch.selector, id, 2));
        verification.openReveals(id, terms(id), verified[id], short);
        Seat[] memory swapped = seatList(id);
        (swapped[0], swapped[1]) = (list[1], list[0]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_SeatMismatch.selector, id, 0));
        verification.openReveals(id, terms(id), verified[id], swapped);
        Seat[] memory forged = seatList(id);
        forged[2].digest = X; // "revealed"
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_SeatMismatch.selector, id, 2));
        verification.openReveals(id, terms(id), verified[id], forged);
        Seat[] memory emptied = seatList(id);
        delete emptied[1];
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_SeatMismatch.selector, id, 1));
        verification.openReveals(id, terms(id), verified[id], emptied);
        openReveals(id);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_SeatMismatch.selector, id, 0));
        verification.decide(id, terms(id), verified[id], swapped);
    }

    /// Commit phase calls end with it: no reject, reclaim or openReveals past it, and a
    /// job's reveals cannot be opened twice.
    function test_commitPhaseCalls_endWithIt() public {
        uint64 id = seatedJob(3, 2);
        commit(id, 0, X);
        uint40 commitEnd = verified[id].commitEnd();
        vm.warp(commitEnd + 1);
        bytes memory over =
            abi.encodeWithSelector(IVerificationEvents.Verification_CommitPhaseOver.selector, id, commitEnd);
        vm.expectRevert(over);
        verification.openReveals(id, terms(id), verified[id], seatList(id));
        vm.expectRevert(over);
        verification.reclaimSeat(id, terms(id), verified[id], 1, seatOf[id][1]);
        // Seat 1's run ended before the commit phase did: no decline either.
        vm.prank(agentOf[seatNode(id, 1)]);
        vm.expectRevert(
            abi.encodeWithSelector(
                IVerificationEvents.Verification_SeatTimedOut.selector, id, 1, uint40(seatOf[id][1].fields >> 120)
            )
        );
        verification.rejectSeat(id, 1, seatOf[id][1]);
    }

    /// A seat that keeps its node alive but never commits does not hold the others'
    /// reveals back past its run: once its run is over it counts as absent.
    function test_aSeatPastItsRun_doesNotBlockTheReveals() public {
        uint64 id = seatedJob(3, 2);
        uint64 idle = seatNode(id, 2);
        commit(id, 0, X);
        commit(id, 1, X);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_NotCommitted.selector, id, 2));
        verification.openReveals(id, terms(id), verified[id], seatList(id));
        vm.warp(uint40(seatOf[id][2].fields >> 120) + 1);
        openReveals(id);
        reveal(id, 0, X);
        reveal(id, 1, X);
        decide(id); // early: no committed seat left to reveal
        assertEq(node(idle).stake, STAKE - verified[id].seatStake(), "absent beside a quorum: slashed");
        assertReplay();
    }

    /// The backstop cannot be switched off by a seat of the submitter's: a Sybil that
    /// commits and reveals junk on a job no honest seat could finish in time does not get
    /// the honest seats slashed (no two seats agreed: the job was never shown to run).
    function test_aSybilCommit_doesNotLetTheSubmitterSlashSeatsThatCouldNotRun() public {
        uint64 id = seatedJob(3, 2);
        uint64[] memory seated = seatedNodes(id);
        commit(id, 0, Z); // the submitter's Sybil
        vm.warp(verified[id].commitEnd() + 1);
        reveal(id, 0, Z);
        pastReveals(id);
        uint256 credits = market.creditOf(submitter);
        decide(id);
        for (uint256 i; i < 3; ++i) {
            assertEq(node(seated[i]).stake, STAKE, "nobody slashed");
        }
        assertEq(market.creditOf(submitter), credits + 3 * BOUNTY);
        assertEnded(id, seated);
    }

    /// Two seats that agree below the quorum show the job runs: a seat that never
    /// committed beside them is slashed (5/3: X, X, and three absent).
    function test_twoAgreeingSeats_belowTheQuorum_slashTheAbsent() public {
        uint64 id = seatedJob(5, 3);
        uint64[] memory seated = seatedNodes(id);
        commit(id, 0, X);
        commit(id, 1, X);
        vm.warp(verified[id].commitEnd() + 1);
        reveal(id, 0, X);
        reveal(id, 1, X);
        decide(id); // early: no committed seat left to reveal
        for (uint256 i = 2; i < 5; ++i) {
            assertEq(node(seated[i]).stake, STAKE - verified[id].seatStake(), "absent");
        }
        assertEq(node(seated[0]).earnings, BOUNTY - fee());
        assertEnded(id, seated);
    }

    /// `decide` is the replicated tier's; a job no seat was ever drawn for ends by
    /// `expireVerified`, not by a decision.
    function test_decide_onlyAReplicatedJobWithSeats() public {
        pool(3);
        uint64 refereedJob = postRefereed();
        vm.expectRevert(IVerificationEvents.Verification_InvalidPolicy.selector);
        verification.decide(refereedJob, terms(refereedJob), verified[refereedJob], new Seat[](3));
        uint64 id = postReplicated();
        vm.warp(verified[id].commitEnd() + 1);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_NoSeatFilled.selector, id));
        verification.decide(id, terms(id), verified[id], seatList(id));
    }

    /// Seated nodes that began their exit can take out only their free stake while the
    /// job runs: the seat stake stays until the decision, which slashes the liar's and
    /// frees the honest one's.
    function test_seatedNodesThatExit_keepTheSeatStakeUntilTheDecision() public {
        pool(3);
        uint64 id = postVerified(replicated(3, 2), BOUNTY, uint40(block.timestamp + 2 * 7 days + W));
        drawWith(id, 1);
        uint64 honest = seatNode(id, 0);
        uint64 liar = seatNode(id, 1);
        uint96 seatStake = verified[id].seatStake();
        beginExit(honest);
        beginExit(liar);
        commit(id, 0, X);
        commit(id, 1, Y);
        commit(id, 2, X);
        vm.warp(block.timestamp + UNBONDING);
        withdrawStake(honest);
        withdrawStake(liar);
        assertEq(node(liar).stake, seatStake, "only the free stake left");
        vm.warp(verified[id].commitEnd() + 1);
        reveal(id, 0, X);
        reveal(id, 1, Y);
        reveal(id, 2, X);
        decide(id);
        assertEq(node(liar).stake, 0, "the liar's seat stake is slashed");
        assertEq(node(honest).lockedStake, 0);
        withdrawStake(honest);
        assertEq(node(honest).stake, 0);
        assertEq(uint8(node(honest).status), uint8(NodeStatus.Exited));
        assertReplay();
    }
}
