// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {StdInvariant} from "forge-std/StdInvariant.sol";

import {Base} from "../Base.t.sol";
import {MarketHandler} from "./handlers/MarketHandler.sol";
import {JobInfo, JobStatus} from "../../src/types/Types.sol";

/// @notice Money and lifecycle invariants of the market and the registry under random
/// sequences of valid calls (post, assign/claim, submit, accept, finalize, dispute,
/// resolve, reclaim, abandon, reject, cancel, expire, heartbeat, markInactive, withdraw, time).
contract Market_Invariant_Test is StdInvariant, Base {
    MarketHandler internal handler;

    function setUp() public override {
        super.setUp();
        handler = new MarketHandler(token, registry, market, matcher, arbiter, h100Job());
        targetContract(address(handler));
    }

    /// The market holds exactly the escrowed bounties, the dispute bonds and the credits.
    function invariant_marketBalanceEqualsEscrowBondsAndCredits() external view {
        uint256 owed;
        uint64 count = market.jobCount();
        for (uint64 jobId = 1; jobId <= count; ++jobId) {
            JobInfo memory job = market.getJob(jobId);
            if (job.status >= JobStatus.Open && job.status <= JobStatus.Disputed) owed += job.bounty;
            if (job.status == JobStatus.Disputed) owed += handler.bondOf(jobId);
        }
        address[] memory accounts = handler.allAccounts();
        for (uint256 i; i < accounts.length; ++i) {
            owed += market.creditOf(accounts[i]);
        }
        assertEq(token.balanceOf(address(market)), owed);
    }

    /// The registry holds exactly the nodes' stakes.
    function invariant_registryBalanceEqualsStakes() external view {
        uint256 stakes;
        for (uint64 nodeId = 1; nodeId <= registry.nodeCount(); ++nodeId) {
            stakes += registry.getNode(nodeId).stake;
        }
        assertEq(token.balanceOf(address(registry)), stakes);
    }

    /// Every job moved only along the lifecycle, and only when the handler acted on it.
    function invariant_statusTransitionsFollowTheLifecycle() external view {
        assertFalse(handler.illegalTransition());
        uint64 count = market.jobCount();
        for (uint64 jobId = 1; jobId <= count; ++jobId) {
            assertEq(uint8(market.getJob(jobId).status), uint8(handler.lastStatus(jobId)));
        }
    }

    /// A settled job (paid, refunded, cancelled or expired) is never settled again.
    function invariant_aJobIsPaidOrRefundedAtMostOnce() external view {
        assertFalse(handler.settledTwice());
    }

    /// A node's slots match the jobs the market has on it.
    function invariant_nodeSlotsMatchAssignedJobs() external view {
        uint256 nodes = registry.nodeCount();
        uint256[] memory running = new uint256[](nodes + 1);
        uint256[] memory settling = new uint256[](nodes + 1);
        uint64 count = market.jobCount();
        for (uint64 jobId = 1; jobId <= count; ++jobId) {
            JobInfo memory job = market.getJob(jobId);
            if (job.status == JobStatus.Assigned) running[job.nodeId]++;
            if (job.status == JobStatus.Submitted || job.status == JobStatus.Disputed) settling[job.nodeId]++;
        }
        for (uint64 nodeId = 1; nodeId <= nodes; ++nodeId) {
            assertEq(registry.getNode(nodeId).activeJobs, running[nodeId]);
            assertEq(registry.getNode(nodeId).settlingJobs, settling[nodeId]);
        }
    }
}
