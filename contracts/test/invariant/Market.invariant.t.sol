// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Test} from "forge-std/Test.sol";

import {MarketHandler} from "./handlers/MarketHandler.sol";
import {JobState, JobStatus, JobTerms, NodeInfo} from "../../src/types/Types.sol";

/// @notice Random sequences of valid calls by every kind of participant; after each one the
/// market's books hold.
contract MarketInvariants is Test {
    MarketHandler internal handler;

    function setUp() public {
        handler = new MarketHandler();
        bytes4[] memory selectors = new bytes4[](12);
        selectors[0] = MarketHandler.warp.selector;
        selectors[1] = MarketHandler.post.selector;
        selectors[2] = MarketHandler.registerMore.selector;
        selectors[3] = MarketHandler.assignOrClaim.selector;
        selectors[4] = MarketHandler.submitOrReject.selector;
        selectors[5] = MarketHandler.reclaimIt.selector;
        selectors[6] = MarketHandler.settle.selector;
        selectors[7] = MarketHandler.endDispute.selector;
        selectors[8] = MarketHandler.cancelOrExpire.selector;
        selectors[9] = MarketHandler.liveness.selector;
        selectors[10] = MarketHandler.withdrawals.selector;
        selectors[11] = MarketHandler.post.selector;
        targetSelector(FuzzSelector({addr: address(handler), selectors: selectors}));
        targetContract(address(handler));
    }

    /// The handler's actions reach every part of the lifecycle (a handler whose actions
    /// always return early would make the invariants hold vacuously): one scripted sequence.
    function test_theHandler_reachesEveryAction() public {
        handler.post(50e6, 3600, 7200);
        handler.assignOrClaim(0, 0, false);
        handler.submitOrReject(0, false);
        handler.settle(0, 2); // dispute
        handler.endDispute(0, true);
        handler.post(50e6, 3600, 0);
        handler.assignOrClaim(0, 1, true);
        handler.submitOrReject(0, true); // reject
        handler.post(50e6, 3600, 7200);
        handler.cancelOrExpire(2);
        handler.post(50e6, 3600, 7200);
        handler.assignOrClaim(0, 2, false);
        handler.warp(2 hours);
        handler.reclaimIt(0);
        handler.liveness(0, false);
        handler.liveness(0, true);
        handler.withdrawals(0);
        bytes4[10] memory actions = [
            MarketHandler.post.selector,
            MarketHandler.assignOrClaim.selector,
            MarketHandler.submitOrReject.selector,
            MarketHandler.reclaimIt.selector,
            MarketHandler.settle.selector,
            MarketHandler.endDispute.selector,
            MarketHandler.cancelOrExpire.selector,
            MarketHandler.liveness.selector,
            MarketHandler.withdrawals.selector,
            MarketHandler.warp.selector
        ];
        for (uint256 i; i < actions.length; ++i) {
            assertGt(handler.calls(actions[i]), 0, "every action runs");
        }
        handler.checkReplay();
    }

    /// Conservation and truthful events: every balance replayed from the events equals
    /// the contract's, and the market holds exactly what it owes (credits, stakes,
    /// earnings, fees owed, treasury, escrowed bounties and bonds).
    function invariant_theEventsReplayToTheBalances() public view {
        handler.checkReplay();
    }

    /// A job's stored word is its folded state while it lives and 0 once settled: a job is
    /// settled once, and nothing can be called on it after.
    function invariant_eachJobIsItsFoldedState_andSettledOnce() public view {
        for (uint256 i; i < handler.jobCount(); ++i) {
            (uint64 id,, JobState memory state) = handler.jobAt(i);
            JobStatus status = JobStatus(uint8(state.fields >> 248));
            bool settled = status == JobStatus.Completed || status == JobStatus.Failed || status == JobStatus.Cancelled
                || status == JobStatus.Expired;
            bytes32 stored = handler.theMarket().jobHash(id);
            if (settled) assertEq(stored, bytes32(0), "settled");
            else assertEq(stored, keccak256(abi.encode(state)), "live");
        }
    }

    /// Nobody profits from a fault: the submitter never gets back more than it paid in,
    /// and a node's stake never grows from anything but its own top-ups (none here).
    function invariant_nobodyProfitsFromAFault() public view {
        assertLe(handler.submitterGot(), handler.paidIn(), "submitter");
        for (uint256 i; i < handler.nodeCount(); ++i) {
            uint64 nodeId = handler.nodeAt(i);
            NodeInfo memory n = handler.nodeInfo(nodeId);
            assertLe(n.stake, handler.stakeIn(nodeId), "stake");
            assertLe(n.lockedStake, n.stake, "locked within the stake");
        }
    }
}
