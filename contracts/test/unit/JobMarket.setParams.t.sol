// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {MarketParams} from "../../src/types/Types.sol";

contract JobMarket_SetParams_Test is JobMarketBase {
    function newParams() internal returns (MarketParams memory) {
        return MarketParams({
            feeRecipient: makeAddr("newTreasury"),
            challengeWindow: 2 hours,
            protocolFeeBps: 1_000,
            maxAttempts: 5,
            disputeBond: 25e6
        });
    }

    function test_SetParams_UpdatesParams() external {
        MarketParams memory p = newParams();
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.MarketParamsUpdated(p);
        vm.prank(admin);
        market.setParams(p);

        MarketParams memory stored = market.params();
        assertEq(stored.feeRecipient, p.feeRecipient);
        assertEq(stored.challengeWindow, p.challengeWindow);
        assertEq(stored.protocolFeeBps, p.protocolFeeBps);
        assertEq(stored.maxAttempts, p.maxAttempts);
        assertEq(stored.disputeBond, p.disputeBond);
    }

    function test_SetParams_AppliesToNextSubmission() external {
        vm.prank(admin);
        market.setParams(newParams());
        (uint64 jobId,) = submittedJob();
        assertEq(jobOf(jobId).challengeEndsAt, block.timestamp + 2 hours);
        disputeJob(jobId);
        assertEq(token.balanceOf(address(market)), BOUNTY + 25e6);
    }

    function test_SetParams_AcceptsZeroFeeAndBond() external {
        MarketParams memory p = newParams();
        p.protocolFeeBps = 0;
        p.disputeBond = 0;
        p.maxAttempts = type(uint8).max;
        vm.prank(admin);
        market.setParams(p);
        assertEq(market.params().protocolFeeBps, 0);
        assertEq(market.params().disputeBond, 0);
        assertEq(market.params().maxAttempts, type(uint8).max);
    }

    function test_RevertWhen_CallerNotAdmin() external {
        MarketParams memory p = newParams();
        bytes32 role = market.DEFAULT_ADMIN_ROLE();
        vm.expectRevert(
            abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, stranger, role)
        );
        vm.prank(stranger);
        market.setParams(p);
    }

    function test_RevertWhen_CallerIsPauser() external {
        MarketParams memory p = newParams();
        vm.expectRevert(
            abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, pauser, bytes32(0))
        );
        vm.prank(pauser);
        market.setParams(p);
    }

    function test_RevertWhen_FeeRecipientIsZeroAddress() external {
        MarketParams memory p = newParams();
        p.feeRecipient = address(0);
        vm.expectRevert(IJobMarket.JobMarket_InvalidParams.selector);
        vm.prank(admin);
        market.setParams(p);
    }

    function test_RevertWhen_FeeAboveMax() external {
        MarketParams memory p = newParams();
        p.protocolFeeBps = 1_001;
        vm.expectRevert(IJobMarket.JobMarket_InvalidParams.selector);
        vm.prank(admin);
        market.setParams(p);
        assertEq(market.params().protocolFeeBps, FEE_BPS);
    }

    function test_RevertWhen_MaxAttemptsIsZero() external {
        MarketParams memory p = newParams();
        p.maxAttempts = 0;
        vm.expectRevert(IJobMarket.JobMarket_InvalidParams.selector);
        vm.prank(admin);
        market.setParams(p);
    }

    function test_RevertWhen_ChallengeWindowIsZero() external {
        MarketParams memory p = newParams();
        p.challengeWindow = 0;
        vm.expectRevert(IJobMarket.JobMarket_InvalidParams.selector);
        vm.prank(admin);
        market.setParams(p);
    }
}
