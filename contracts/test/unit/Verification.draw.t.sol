// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {VerificationUnitTest} from "./Verification.base.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {IVerificationEvents} from "../../src/interfaces/IVerification.sol";
import {JobStatus, JobTerms, NodeCapabilities, VerifiedState} from "../../src/types/Types.sol";

/// @notice The draw: who is seated (pool members of distinct operators, never the
/// submitter's, never a barred node), from the pool as its block began, once per round,
/// and what a seat locks.
contract VerificationDrawTest is VerificationUnitTest {
    using JobView for JobTerms;
    using JobView for VerifiedState;

    function draw(uint64 id) internal {
        vm.prank(stranger);
        verification.draw(id, terms(id), verified[id]);
        sync();
    }

    function test_draw_seatsNNodesOfNOperators_andLocksEachSeatStake() public {
        uint64[] memory members = pool(5);
        uint64 id = postReplicated();
        vm.roll(block.number + 2);
        vm.prevrandao(bytes32(uint256(7)));
        draw(id);
        VerifiedState memory v = verified[id];
        assertEq(market.jobHash(id), keccak256(abi.encode(v)), "the fold is the market's state");
        assertEq(v.rounds(), 1);
        assertEq(v.drawBlock(), 0, "disarmed");
        for (uint256 i; i < 3; ++i) {
            uint64 nodeId = seatNode(id, i);
            assertGt(nodeId, 0, "every seat filled");
            assertEq(node(nodeId).lockedStake, v.seatStake(), "the seat stake is locked");
            for (uint256 k; k < i; ++k) {
                assertTrue(node(nodeId).operator != node(seatNode(id, k)).operator, "distinct operators");
            }
        }
        // A member whose free stake fell under the floor left the pool with its seat.
        uint256 seated;
        for (uint256 i; i < members.length; ++i) {
            if (node(members[i]).lockedStake != 0) {
                ++seated;
                assertEq(node(members[i]).poolIndex != 0, STAKE - v.seatStake() >= verifyParams().poolFloor);
            }
        }
        assertEq(seated, 3);
    }

    function test_draw_onlyFromItsBlock_andOncePerRound() public {
        pool(3);
        uint64 id = postReplicated();
        uint40 drawBlock = verified[id].drawBlock();
        vm.roll(drawBlock - 1);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_NotArmed.selector, id, drawBlock));
        verification.draw(id, terms(id), verified[id]);
        vm.roll(drawBlock);
        draw(id);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_NotArmed.selector, id, 0));
        verification.draw(id, terms(id), verified[id]);
    }

    function test_draw_tooLateForARun_reverts() public {
        pool(3);
        uint64 id = postReplicated();
        vm.roll(block.number + 2);
        vm.warp(verified[id].commitEnd() - RUNTIME + 1);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_CannotDraw.selector, id));
        verification.draw(id, terms(id), verified[id]);
    }

    /// The submitter's own nodes, nodes it serves as agent, and a second node of a seated
    /// operator are never seated, whatever the seed.
    function testFuzz_partiesAndTheirOperators_areNeverDrawn(uint256 seed) public {
        uint64[] memory honest = pool(3);
        fund(submitter, 10_000e6);
        for (uint256 i; i < 3; ++i) {
            registerNode(submitter, 0xE0000 + i, wasmNode(), STAKE); // operated by the submitter
        }
        address twin = makeAddr("twin operator");
        fund(twin, 10_000e6);
        registerNode(twin, 0xF0000, wasmNode(), STAKE);
        registerNode(twin, 0xF0001, wasmNode(), STAKE);
        vm.prank(submitter);
        uint64 served = nodes.register(wasmNode(), "ipfs://served", STAKE, submitter, 0, ""); // the submitter is its agent
        sync();
        uint64[] memory all = new uint64[](lastNode);
        for (uint256 i; i < all.length; ++i) {
            all[i] = uint64(i + 1);
        }
        vm.prank(stranger);
        nodes.syncPool(all);
        assertEq(nodes.poolSize(), all.length);
        uint64 id = postReplicated();
        vm.roll(block.number + 2);
        vm.prevrandao(bytes32(seed));
        draw(id);
        for (uint256 i; i < 3; ++i) {
            uint64 nodeId = seatNode(id, i);
            if (nodeId == 0) continue;
            assertTrue(node(nodeId).operator != submitter && nodeId != served, "no party is seated");
            for (uint256 k; k < i; ++k) {
                assertTrue(node(nodeId).operator != node(seatNode(id, k)).operator, "one seat per operator");
            }
        }
        assertGt(honest.length, 0);
    }

    /// What happens in the draw's block before the draw (a join, an exit) does not change
    /// who is drawn: the pool is read as the block began.
    function test_aPoolChangeInTheDrawBlock_doesNotChangeThePanel() public {
        uint64[] memory members = pool(6);
        uint64 id = postReplicated();
        vm.roll(block.number + 2);
        // A seed whose panel holds the member that will exit (so a draw that read the pool
        // as it is now would seat someone else there).
        uint256 snapshot = vm.snapshotState();
        uint256 panel;
        uint256 seed;
        while (!_holds(panel, members[0])) {
            vm.revertToState(snapshot);
            vm.prevrandao(bytes32(++seed));
            draw(id);
            panel = verified[id].seats;
        }
        vm.revertToState(snapshot);
        vm.prevrandao(bytes32(seed));
        // The same block: a member exits, a newcomer joins.
        beginExit(members[0]);
        uint64 newcomer = registerWasmNode(9, STAKE);
        syncPool(newcomer);
        draw(id);
        assertEq(verified[id].seats, panel, "the same seats");
    }

    function _holds(uint256 seats, uint64 nodeId) internal pure returns (bool) {
        for (uint256 i; i < 5; ++i) {
            if (uint64(uint48(seats >> (48 * i))) == nodeId) return true;
        }
        return false;
    }

    /// A drawn node is seated even if it left after the block began: it answers for the
    /// seat (its seat stake locked) like any other.
    function test_aDrawnNodeThatLeftInTheBlock_isSeatedAndLocked() public {
        uint64[] memory members = pool(3);
        uint64 id = postReplicated();
        vm.roll(block.number + 2);
        vm.prevrandao(bytes32(uint256(3)));
        beginExit(members[1]);
        draw(id);
        bool seated;
        for (uint256 i; i < 3; ++i) {
            if (seatNode(id, i) == members[1]) seated = true;
        }
        assertTrue(seated, "the leaver holds a seat");
        assertEq(node(members[1]).lockedStake, verified[id].seatStake());
    }

    /// Under the policy's `minPool` as the block began, a round seats nobody; it is used,
    /// and the next one is armed while rounds are left. With none left and no seat filled,
    /// anyone expires the job and its escrow goes back.
    function test_aPoolUnderTheMinimum_seatsNobody_rearms_andEndsInAnExpiry() public {
        uint64[] memory members = pool(3);
        uint64 id = postReplicated();
        beginExit(members[0]);
        vm.roll(block.number + 2);
        draw(id);
        assertEq(verified[id].seats, 0);
        assertEq(verified[id].rounds(), 1);
        assertEq(verified[id].drawBlock(), block.number + 2, "the next round is armed");
        assertEq(node(members[1]).lockedStake, 0);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_NotExpired.selector, id));
        verification.expireVerified(id, terms(id), verified[id]);
        for (uint256 round = 1; round < 8; ++round) {
            vm.roll(block.number + 2);
            draw(id);
        }
        assertEq(verified[id].rounds(), 8);
        assertEq(verified[id].drawBlock(), 0, "out of rounds");
        uint256 credits = market.creditOf(submitter);
        vm.prank(stranger);
        verification.expireVerified(id, terms(id), verified[id]);
        sync();
        assertEq(market.creditOf(submitter) - credits, 3 * BOUNTY);
        assertReplay();
    }

    /// A seat locks the whole seat stake, always: a member whose free stake no longer
    /// covers it (here, seated for another job in the same block) is skipped, so no seat
    /// is ever held for less than what its fault must cost.
    function test_aMemberWhoseFreeStakeIsShort_isSkipped_andEverySeatLocksTheWholeStake() public {
        uint96 seatStake = 2 * BOUNTY;
        uint64[] memory members = new uint64[](6);
        for (uint256 i; i < members.length; ++i) {
            members[i] = registerWasmNode(i, seatStake + seatStake / 2); // room for one seat
        }
        vm.prank(stranger);
        nodes.syncPool(members);
        uint64 a = postReplicated();
        uint64 b = postReplicated();
        vm.roll(block.number + 2);
        vm.prevrandao(bytes32(uint256(11)));
        draw(a);
        draw(b);
        for (uint256 i; i < members.length; ++i) {
            uint96 locked = node(members[i]).lockedStake;
            assertTrue(locked == 0 || locked == seatStake, "one whole seat stake, never a part");
            assertLe(locked, node(members[i]).stake);
        }
        for (uint256 i; i < 3; ++i) {
            for (uint256 k; k < 3; ++k) {
                uint64 seatA = seatNode(a, i);
                assertTrue(seatA == 0 || seatA != seatNode(b, k), "no node holds seats of both");
            }
        }
    }

    /// Only a Committing job is drawn.
    function test_draw_ofAnOpenRefereedJob_reverts() public {
        uint64 id = postRefereed();
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, id, JobStatus.Open));
        verification.draw(id, terms(id), verified[id]);
    }
}
