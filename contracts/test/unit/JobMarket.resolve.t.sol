// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";

import {JobMarket_SubmittedJob_Test} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {CompletionKind, FailureKind, JobStatus} from "../../src/types/Types.sol";

contract JobMarket_Resolve_Test is JobMarket_SubmittedJob_Test {
    function setUp() public override {
        super.setUp();
        disputeJob(jobId);
    }

    function resolve(uint64 id, bool providerWins) internal {
        vm.prank(arbiter);
        market.resolve(id, providerWins);
    }

    function expectResolved(bool providerWon) internal {
        expectMarketEmit();
        emit IJobMarket.DisputeResolved(jobId, nodeId, providerWon, arbiter);
    }

    function expectNotArbiter(address caller) internal {
        bytes32 role = market.ARBITER_ROLE();
        vm.expectRevert(abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, caller, role));
    }

    function test_Resolve_ProviderWins() external {
        uint96 payout = BOUNTY - fee(BOUNTY);
        expectResolved(true);
        expectCompleted(jobId, payout, fee(BOUNTY), CompletionKind.DisputeWon);
        resolve(jobId, true);

        // The operator gets the payout plus the bond.
        assertProviderPaid(uint256(payout) + DISPUTE_BOND, BOUNTY + DISPUTE_BOND);
    }

    function test_Resolve_SubmitterWins() external {
        uint256 refund = uint256(BOUNTY) + DISPUTE_BOND + SLASH;
        uint256 registryBefore = token.balanceOf(address(registry));
        expectResolved(false);
        vm.expectEmit(true, true, true, true, address(registry));
        emit INodeRegistry.NodeSlashed(nodeId, SLASH, STAKE - SLASH);
        expectFailed(jobId, FailureKind.DisputeLost, refund);
        resolve(jobId, false);

        assertEq(SLASH, 50e6);
        assertStatus(jobId, JobStatus.Failed);
        assertEq(market.creditOf(submitter), refund);
        assertEq(market.creditOf(operator), 0);
        assertEq(market.creditOf(treasury), 0);
        assertEq(token.balanceOf(address(market)), refund, "slash moved to the market");
        assertEq(token.balanceOf(address(registry)), registryBefore - SLASH);
        assertNodeCounters(nodeId, 0, 0, 0, 1);
        assertEq(nodeOf(nodeId).stake, STAKE - SLASH);
        assertEq(nodeOf(nodeId).totalSlashed, SLASH);
    }

    function test_Resolve_SubmitterWinsWithoutSlash() external {
        setSlashBps(0);
        resolve(jobId, false);
        assertEq(market.creditOf(submitter), uint256(BOUNTY) + DISPUTE_BOND);
        assertEq(nodeOf(nodeId).stake, STAKE);
        assertNodeCounters(nodeId, 0, 0, 0, 1);
    }

    function test_Resolve_ReturnsBondTakenAtDisputeTime() external {
        setDisputeBond(3 * DISPUTE_BOND);
        resolve(jobId, true);
        assertEq(market.creditOf(operator), uint256(BOUNTY - fee(BOUNTY)) + DISPUTE_BOND);
    }

    function test_RevertWhen_CallerNotArbiter() external {
        expectNotArbiter(submitter);
        vm.prank(submitter);
        market.resolve(jobId, false);
    }

    function test_RevertWhen_CallerIsAdmin() external {
        expectNotArbiter(admin);
        vm.prank(admin);
        market.resolve(jobId, true);
    }

    function test_RevertWhen_JobUnknown() external {
        expectUnknownJob(99);
        resolve(99, true);
    }

    function test_RevertWhen_JobSubmittedNotDisputed() external {
        uint64 other = assignAnotherJob();
        submitJob(other);
        expectWrongStatus(other, JobStatus.Submitted);
        resolve(other, true);
    }

    function test_RevertWhen_ResolvedTwice() external {
        resolve(jobId, false);
        expectWrongStatus(JobStatus.Failed);
        resolve(jobId, true);
        assertEq(market.creditOf(operator), 0);
    }
}
