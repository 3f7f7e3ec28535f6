// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {CompletionKind, FailureKind, JobStatus, MarketParams, RegistryParams} from "../../src/types/Types.sol";

contract JobMarket_Resolve_Test is JobMarketBase {
    uint64 internal nodeId;
    uint64 internal jobId;

    function setUp() public override {
        super.setUp();
        (jobId, nodeId) = submittedJob();
        disputeJob(jobId);
    }

    function resolve(uint64 id, bool providerWins) internal {
        vm.prank(arbiter);
        market.resolve(id, providerWins);
    }

    function test_Resolve_ProviderWins() external {
        uint96 payout = BOUNTY - fee(BOUNTY);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.DisputeResolved(jobId, nodeId, true, arbiter);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobCompleted(jobId, nodeId, operator, payout, fee(BOUNTY), CompletionKind.DisputeWon);
        resolve(jobId, true);

        assertStatus(jobId, JobStatus.Completed);
        assertEq(market.creditOf(operator), uint256(payout) + DISPUTE_BOND, "payout plus the bond");
        assertEq(market.creditOf(treasury), fee(BOUNTY));
        assertEq(market.creditOf(submitter), 0);
        assertEq(token.balanceOf(address(market)), BOUNTY + DISPUTE_BOND);
        assertNodeCounters(nodeId, 0, 0, 1, 0);
        assertEq(nodeOf(nodeId).stake, STAKE);
    }

    function test_Resolve_SubmitterWins() external {
        uint256 refund = uint256(BOUNTY) + DISPUTE_BOND + SLASH;
        uint256 registryBefore = token.balanceOf(address(registry));
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.DisputeResolved(jobId, nodeId, false, arbiter);
        vm.expectEmit(true, true, true, true, address(registry));
        emit INodeRegistry.NodeSlashed(nodeId, SLASH, STAKE - SLASH);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobFailed(jobId, FailureKind.DisputeLost, refund);
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
        RegistryParams memory rp = registryParams();
        rp.slashBps = 0;
        vm.prank(admin);
        registry.setParams(rp);
        resolve(jobId, false);
        assertEq(market.creditOf(submitter), uint256(BOUNTY) + DISPUTE_BOND);
        assertEq(nodeOf(nodeId).stake, STAKE);
        assertNodeCounters(nodeId, 0, 0, 0, 1);
    }

    function test_Resolve_ReturnsBondTakenAtDisputeTime() external {
        MarketParams memory p = marketParams();
        p.disputeBond = 3 * DISPUTE_BOND;
        setMarketParams(p);
        resolve(jobId, true);
        assertEq(market.creditOf(operator), uint256(BOUNTY - fee(BOUNTY)) + DISPUTE_BOND);
    }

    function test_RevertWhen_CallerNotArbiter() external {
        bytes32 role = market.ARBITER_ROLE();
        vm.expectRevert(
            abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, submitter, role)
        );
        vm.prank(submitter);
        market.resolve(jobId, false);
    }

    function test_RevertWhen_CallerIsAdmin() external {
        bytes32 role = market.ARBITER_ROLE();
        vm.expectRevert(abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, admin, role));
        vm.prank(admin);
        market.resolve(jobId, true);
    }

    function test_RevertWhen_JobUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_UnknownJob.selector, uint64(99)));
        resolve(99, true);
    }

    function test_RevertWhen_JobSubmittedNotDisputed() external {
        uint64 other = postJob();
        assignJob(other, nodeId);
        submitJob(other);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, other, JobStatus.Submitted));
        resolve(other, true);
    }

    function test_RevertWhen_ResolvedTwice() external {
        resolve(jobId, false);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Failed));
        resolve(jobId, true);
        assertEq(market.creditOf(operator), 0);
    }
}
