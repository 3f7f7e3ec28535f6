// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Test} from "forge-std/Test.sol";

import {MarketHandler} from "./handlers/MarketHandler.sol";
import {JobView} from "../JobView.sol";
import {JobMarket} from "../../src/JobMarket.sol";
import {GantryTestToken} from "../../src/dev/GantryTestToken.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {
    DETERMINISTIC_DOCKER,
    ENGINE_WASM,
    JobState,
    JobStatus,
    JobTerms,
    NodeInfo,
    NodeStatus
} from "../../src/types/Types.sol";

/// @notice Random sequences of calls by every participant (`MarketHandler`); after each one
/// the market's books hold: conservation, the events replay to the balances, every job's
/// word is its folded state (0 once settled, and never settled again), nobody's balance
/// grows from a fault, held stake within the stake.
contract MarketInvariants is Test {
    MarketHandler internal handler;
    JobMarket internal market;
    INodeRegistry internal nodes;
    GantryTestToken internal token;

    function setUp() public {
        handler = new MarketHandler();
        market = handler.theMarket();
        nodes = INodeRegistry(address(market));
        token = GantryTestToken(address(market.token()));
        bytes4[] memory actions = actionSelectors();
        // The lifecycle driver, posting and time weigh more: deeper sequences per run.
        bytes4[] memory weighted = new bytes4[](actions.length + 15);
        for (uint256 i; i < weighted.length; ++i) {
            if (i < actions.length) weighted[i] = actions[i];
            else if (i < actions.length + 10) weighted[i] = MarketHandler.advance.selector;
            else if (i < actions.length + 13) weighted[i] = MarketHandler.post.selector;
            else weighted[i] = MarketHandler.warp.selector;
        }
        targetSelector(FuzzSelector({addr: address(handler), selectors: weighted}));
        targetContract(address(handler));
    }

    function actionSelectors() internal pure returns (bytes4[] memory s) {
        s = new bytes4[](49);
        s[0] = MarketHandler.post.selector;
        s[1] = MarketHandler.deposit.selector;
        s[2] = MarketHandler.cancel.selector;
        s[3] = MarketHandler.accept.selector;
        s[4] = MarketHandler.dispute.selector;
        s[5] = MarketHandler.withdraw.selector;
        s[6] = MarketHandler.assign.selector;
        s[7] = MarketHandler.claim.selector;
        s[8] = MarketHandler.submit.selector;
        s[9] = MarketHandler.reject.selector;
        s[10] = MarketHandler.heartbeat.selector;
        s[11] = MarketHandler.markInactive.selector;
        s[12] = MarketHandler.reclaim.selector;
        s[13] = MarketHandler.finalize.selector;
        s[14] = MarketHandler.expire.selector;
        s[15] = MarketHandler.settleDispute.selector;
        s[16] = MarketHandler.sweepFees.selector;
        s[17] = MarketHandler.withdrawTreasury.selector;
        s[18] = MarketHandler.resolve.selector;
        s[19] = MarketHandler.setParams.selector;
        s[20] = MarketHandler.registerNode.selector;
        s[21] = MarketHandler.updateCapabilities.selector;
        s[22] = MarketHandler.topUpStake.selector;
        s[23] = MarketHandler.beginExit.selector;
        s[24] = MarketHandler.withdrawStake.selector;
        s[25] = MarketHandler.withdrawEarnings.selector;
        s[26] = MarketHandler.warp.selector;
        s[27] = MarketHandler.advance.selector;
        s[28] = MarketHandler.replay.selector;
        s[29] = MarketHandler.forbidden.selector;
        s[30] = MarketHandler.syncPool.selector;
        s[31] = MarketHandler.setVerifyParams.selector;
        s[32] = MarketHandler.postVerified.selector;
        s[33] = MarketHandler.drawVerified.selector;
        s[34] = MarketHandler.expireVerified.selector;
        s[35] = MarketHandler.commitSeat.selector;
        s[36] = MarketHandler.rejectSeat.selector;
        s[37] = MarketHandler.reclaimSeat.selector;
        s[38] = MarketHandler.openReveals.selector;
        s[39] = MarketHandler.revealSeat.selector;
        s[40] = MarketHandler.decideVerified.selector;
        s[41] = MarketHandler.placeRefereed.selector;
        s[42] = MarketHandler.submitRefereed.selector;
        s[43] = MarketHandler.settleRefereed.selector;
        s[44] = MarketHandler.faultRefereed.selector;
        s[45] = MarketHandler.disputeRefereed.selector;
        s[46] = MarketHandler.revealProvider.selector;
        s[47] = MarketHandler.decideDispute.selector;
        s[48] = MarketHandler.arbitrateRefereed.selector;
    }

    // ---------------------------------------------------------------- the handler reaches everything

    /// A handler whose actions always returned early would make every invariant hold
    /// vacuously: one scripted sequence makes every action act at least once.
    /// The Docker job the handler starts with (verified job 3: seats committed, one of
    /// them another result) reveals and is decided: the parted seat is neither paid nor
    /// slashed, its bounty goes to the treasury, and every invariant holds.
    function test_theHandler_decidesADockerJobWithAPartedSeat() public {
        handler.openReveals(3);
        for (uint256 i; i < 3; ++i) {
            handler.revealSeat(3);
        }
        uint256 slashed = handler.slashedTotal();
        handler.decideVerified(3);
        assertEq(handler.forfeitedTotal(), 5e6, "the parted seat's bounty, to the treasury");
        assertEq(handler.slashedTotal(), slashed, "nobody slashed");
        checkAll();
    }

    function test_theHandler_reachesEveryAction() public {
        // The handler starts with jobs 0-1 Disputed, 2-3 Submitted, 4-5 Assigned, 6-7 Open.
        handler.resolve(0, true); // job 0, for its provider
        handler.accept(0); // job 2
        handler.dispute(0); // job 3
        handler.submit(0); // job 4
        handler.reject(0); // job 5, Open again
        handler.assign(0, 0); // job 5, to another node
        handler.claim(0, 0); // job 6
        handler.cancel(0); // job 7
        handler.post(2, 0, 20e6, 60, 0); // job 8, no slack
        handler.warp(61, false);
        handler.expire(0); // job 8
        handler.post(1, 2, 1, 3600, 7200); // job 9, a one-unit CPU job
        handler.advance(9, 1);
        handler.deposit(1, 100e6);
        handler.withdraw(1);
        handler.replay(0, 0); // job 0's last live state
        handler.replay(1, 3); // job 1's current state, a bit flipped
        handler.forbidden(0, 0);
        handler.warp(3 days, true);
        handler.markInactive(0, false);
        handler.heartbeat(0);
        handler.finalize(0, true); // job 4
        handler.settleDispute(0); // job 3
        handler.reclaim(0); // job 5 or 6, past its runtime
        handler.sweepFees(0);
        handler.withdrawEarnings(0);
        handler.withdrawTreasury();
        handler.setParams(uint256(keccak256("policy")));
        handler.registerNode(1);
        handler.updateCapabilities(3, 0);
        handler.topUpStake(1, 10e6);
        handler.beginExit(3);
        for (uint256 i; i < 4; ++i) {
            handler.warp(3 days, true);
        }
        handler.withdrawStake(3);
        handler.setVerifyParams(0);
        handler.syncPool(2);
        assertGt(nodes.poolSize(), 0, "the CPU node joined the pool");
        // Verified jobs: a refereed one (the pool is small), expired once no attempt fits;
        // then two more WASM nodes, a replicated one, drawn.
        handler.postVerified(0, 5e6, 0);
        handler.warp(3 days, true);
        handler.expireVerified(0);
        handler.registerNode(2);
        handler.registerNode(2);
        for (uint256 i; i < handler.nodeCount(); ++i) {
            handler.syncPool(i);
        }
        handler.postVerified(1, 5e6, 1);
        handler.drawVerified(0);
        uint256 seats = handler.verifiedSeats(handler.verifiedCount() - 1);
        uint256 seated;
        for (uint256 i; i < 3; ++i) {
            if (uint48(seats >> (48 * i)) != 0) ++seated;
        }
        assertEq(seated, 3, "the draw seated three nodes");
        // The seats commit (the first one a lie), reveal and are decided: two paid, the
        // liar slashed.
        handler.commitSeat(0, 0);
        handler.commitSeat(0, 1);
        handler.commitSeat(0, 1);
        handler.openReveals(0);
        for (uint256 i; i < 3; ++i) {
            handler.revealSeat(0);
        }
        handler.decideVerified(0);
        // Another job: one seat given back, one reclaimed from a node gone silent.
        handler.registerNode(2);
        handler.registerNode(2);
        for (uint256 i; i < handler.nodeCount(); ++i) {
            handler.syncPool(i);
        }
        handler.postVerified(2, 5e6, 1);
        handler.drawVerified(1);
        handler.rejectSeat(0);
        handler.warp(10 minutes, false);
        for (uint256 i; i < handler.nodeCount(); ++i) {
            handler.markInactive(i, false);
        }
        handler.reclaimSeat(0);
        // Refereed jobs: one placed, answered and paid; one placed and given back.
        for (uint256 i; i < handler.nodeCount(); ++i) {
            handler.heartbeat(i);
        }
        handler.postVerified(0, 5e6, 3);
        handler.placeRefereed(0, 0, false);
        handler.submitRefereed(0, 1);
        handler.settleRefereed(0);
        handler.postVerified(1, 5e6, 3);
        handler.placeRefereed(0, 1, true);
        handler.faultRefereed(0);
        // Another dispute: the bond and the prepay escrowed, the panel drawn; no referee
        // commits, the provider opens its seal, and without a majority the arbiter decides.
        handler.postVerified(2, 5e6, 3);
        handler.placeRefereed(0, 2, false);
        handler.submitRefereed(0, 1);
        handler.disputeRefereed(0);
        handler.drawVerified(0);
        warpTo(handler.lastDisputeCommitEnd() + 1);
        handler.revealProvider(0);
        // The dispute the handler started with first: its provider never revealed, and lost.
        handler.decideDispute(0);
        handler.decideDispute(0);
        handler.arbitrateRefereed(0, true);
        bytes4[] memory actions = actionSelectors();
        for (uint256 i; i < actions.length; ++i) {
            assertGt(handler.calls(actions[i]), 0, vm.toString(abi.encodePacked(actions[i])));
        }
        checkAll();
    }

    /// Moves the handler's clock to `t`, by the steps its `warp` allows.
    function warpTo(uint256 t) internal {
        while (handler.now_() < t) {
            uint256 left = t - handler.now_();
            if (left >= 2 days) handler.warp(2 days, true);
            else if (left > 30 minutes) handler.warp(30 minutes, false);
            else handler.warp(left, false);
        }
    }

    // ---------------------------------------------------------------- invariants

    /// Conservation, from the contract's own balances: the market holds exactly the
    /// credits, stakes, earnings, fees owed, the treasury's balance and the escrow (bounties
    /// of live jobs, bonds of open disputes).
    function invariant_conservation() public view {
        uint256 owed = market.treasuryBalance();
        for (uint256 i; i < handler.submitterCount(); ++i) {
            owed += market.creditOf(handler.submitterAt(i));
        }
        for (uint256 i; i < handler.nodeCount(); ++i) {
            NodeInfo memory n = nodes.getNode(handler.nodeAt(i));
            owed += uint256(n.stake) + n.earnings + n.feesOwed;
        }
        for (uint256 i; i < handler.jobCount(); ++i) {
            (uint64 id,,) = handler.jobAt(i);
            owed += handler.escrowOf(id);
        }
        for (uint256 i; i < handler.verifiedCount(); ++i) {
            (uint64 id,,) = handler.verifiedAt(i);
            owed += handler.verifiedEscrowOf(id);
        }
        assertEq(token.balanceOf(address(market)), owed, "the market holds exactly what it owes");
    }

    /// The balances replayed from the events alone equal the contract's.
    function invariant_theEventsReplayToTheBalances() public view {
        handler.checkReplay();
    }

    /// Each job's word is its folded state while it lives and 0 once settled; no stale,
    /// forged or settled state was ever accepted (so no job was settled twice).
    function invariant_eachJobIsSettledAtMostOnce() public view {
        for (uint256 i; i < handler.jobCount(); ++i) {
            (uint64 id,, JobState memory state) = handler.jobAt(i);
            JobStatus status = JobStatus(uint8(state.fields >> 248));
            bytes32 stored = market.jobHash(id);
            if (JobView.isSettled(status)) assertEq(stored, bytes32(0), "settled: 0");
            else assertEq(stored, keccak256(abi.encode(state)), "live: the folded state");
        }
        for (uint256 i; i < handler.verifiedCount(); ++i) {
            (uint64 id,, bytes32 folded) = handler.verifiedAt(i);
            assertEq(market.jobHash(id), folded, "a verified job: its folded five words, 0 once settled");
        }
        assertEq(handler.accepted(), 0, "a stale, forged or settled state was accepted");
    }

    /// A submitter never ends with more than it had: its tokens, credits, escrow and what
    /// it paid providers (bounties of completed jobs, bonds lost) add up to what it was
    /// given, exactly; refunds after faults give back its own money and no more.
    function invariant_submittersNeverProfit() public view {
        for (uint256 i; i < handler.submitterCount(); ++i) {
            address s = handler.submitterAt(i);
            uint256 holds = token.balanceOf(s) + market.creditOf(s);
            assertLe(holds, handler.initialOf(s), "never more than it had");
            uint256 escrow;
            for (uint256 j; j < handler.jobCount(); ++j) {
                (uint64 id, JobTerms memory terms,) = handler.jobAt(j);
                if (address(uint160(terms.party >> 96)) == s) escrow += handler.escrowOf(id);
            }
            for (uint256 j; j < handler.verifiedCount(); ++j) {
                (uint64 id, JobTerms memory terms,) = handler.verifiedAt(j);
                if (address(uint160(terms.party >> 96)) == s) escrow += handler.verifiedEscrowOf(id);
            }
            assertEq(holds + escrow + handler.spentOf(s), handler.initialOf(s), "every unit accounted for");
        }
    }

    /// A node's stake moves only by its top-ups, withdrawals and the slashes the rules give
    /// for its own faults (each computed by the model from the rule); its earnings only by
    /// pay for results and bonds won; its fees only by payouts and sweeps.
    function invariant_nodesMoveOnlyByTheRules() public view {
        for (uint256 i; i < handler.nodeCount(); ++i) {
            uint64 id = handler.nodeAt(i);
            NodeInfo memory n = nodes.getNode(id);
            assertLe(n.stake, handler.stakeIn(id) - handler.stakeOut(id), "a stake never grows by itself");
            assertEq(
                n.stake,
                handler.stakeIn(id) - handler.stakeOut(id) - handler.slashedOf(id) - handler.forfeitedOf(id),
                "the stake, by the rules"
            );
            assertEq(n.earnings + handler.earningsOut(id), handler.earnedOf(id), "earnings, by the rules");
            assertEq(n.feesOwed + handler.feesSwept(id), handler.feesAccrued(id), "fees, by the rules");
        }
    }

    /// Held stake is within the stake, and is exactly the exposures of the node's open
    /// disputes.
    function invariant_lockedWithinTheStake() public view {
        for (uint256 i; i < handler.nodeCount(); ++i) {
            uint64 id = handler.nodeAt(i);
            NodeInfo memory n = nodes.getNode(id);
            assertLe(n.lockedStake, n.stake, "held within the stake");
            uint256 seats = handler.seatLockedOf(id) + handler.holdOf(id);
            assertEq(
                n.lockedStake,
                handler.lockedOf(id) + seats,
                "held: the disputes' exposures, the seats' stakes and the refereed providers' holds"
            );
            assertEq(n.lockedStake - seats, handler.heldFor(id), "held: as the fold's disputes say");
        }
    }

    /// The treasury gets every slash and charge and every swept fee, and nothing else;
    /// keepers, the matcher, the arbiter and the admin gain nothing by their calls.
    function invariant_faultsPayOnlyTheTreasury() public view {
        assertEq(
            market.treasuryBalance() + handler.treasuryOut(),
            handler.slashedTotal() + handler.sweptTotal() + handler.forfeitedTotal(),
            "slashes, fees and forfeited Docker shares, nothing else"
        );
        assertEq(token.balanceOf(handler.treasuryAccount()), handler.treasuryOut());
        address[4] memory others = handler.strangers();
        for (uint256 i; i < others.length; ++i) {
            assertEq(token.balanceOf(others[i]) + market.creditOf(others[i]), 0, "no keeper's or role's gain");
        }
    }

    /// The verification pool holds each member once, at the position its record names, and
    /// only nodes that serve WASM and are not leaving: exiting nodes, nodes marked inactive
    /// and nodes that stopped serving WASM left at once; a slash or a dispute's hold may
    /// leave a member under the rule until `syncPool`, never out of place.
    function invariant_thePoolIsConsistent() public view {
        uint256 size = nodes.poolSize();
        uint256 members;
        uint256 wasmMembers;
        uint256 sandboxedMembers;
        for (uint256 i; i < handler.nodeCount(); ++i) {
            uint64 id = handler.nodeAt(i);
            NodeInfo memory n = nodes.getNode(id);
            if (n.poolIndex == 0) continue;
            ++members;
            assertLe(n.poolIndex, size, "a member's position is in the pool");
            assertEq(nodes.poolAt(n.poolIndex - 1), id, "a member is where its record says");
            bool wasm = (n.engines >> ENGINE_WASM) & 1 == 1;
            bool sandboxed = (n.engines >> DETERMINISTIC_DOCKER) & 1 == 1;
            assertTrue(wasm || sandboxed, "a member takes WASM or Docker seats");
            if (wasm) ++wasmMembers;
            if (sandboxed) ++sandboxedMembers;
            assertTrue(n.status == NodeStatus.Active || n.status == NodeStatus.Inactive, "a member is not leaving");
        }
        assertEq(members, size, "every position holds a member");
        (uint32 wasmKind, uint32 sandboxedKind) = nodes.poolKinds();
        assertEq(wasmKind, wasmMembers, "the WASM members counted");
        assertEq(sandboxedKind, sandboxedMembers, "the Docker members counted");
    }

    function checkAll() internal view {
        invariant_conservation();
        invariant_theEventsReplayToTheBalances();
        invariant_eachJobIsSettledAtMostOnce();
        invariant_submittersNeverProfit();
        invariant_nodesMoveOnlyByTheRules();
        invariant_lockedWithinTheStake();
        invariant_faultsPayOnlyTheTreasury();
        invariant_thePoolIsConsistent();
    }
}
