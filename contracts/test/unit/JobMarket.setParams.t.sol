// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";

import {JobMarket_Params_Shared} from "./JobMarket.params.shared.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {MarketParams} from "../../src/types/Types.sol";

contract JobMarket_SetParams_Test is JobMarket_Params_Shared {
    function newParams() internal returns (MarketParams memory) {
        return MarketParams({
            feeRecipient: makeAddr("newTreasury"),
            challengeWindow: 2 hours,
            protocolFeeBps: 1_000,
            maxAttempts: 5,
            disputeBond: 25e6
        });
    }

    function validParams() internal override returns (MarketParams memory) {
        return newParams();
    }

    function applyParams(MarketParams memory p) internal override {
        setMarketParams(p);
    }

    function expectNotAdmin(address caller) internal {
        bytes32 role = market.DEFAULT_ADMIN_ROLE();
        vm.expectRevert(abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, caller, role));
    }

    function test_SetParams_UpdatesParams() external {
        MarketParams memory p = newParams();
        expectMarketEmit();
        emit IJobMarket.MarketParamsUpdated(p);
        setMarketParams(p);
        assertMarketParams(market.params(), p);
    }

    function test_SetParams_AppliesToNextSubmission() external {
        setMarketParams(newParams());
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
        setMarketParams(p);
        assertEq(market.params().protocolFeeBps, 0);
        assertEq(market.params().disputeBond, 0);
        assertEq(market.params().maxAttempts, type(uint8).max);
    }

    function test_RevertWhen_CallerNotAdmin() external {
        MarketParams memory p = newParams();
        expectNotAdmin(stranger);
        vm.prank(stranger);
        market.setParams(p);
    }

    function test_RevertWhen_CallerIsPauser() external {
        MarketParams memory p = newParams();
        expectNotAdmin(pauser);
        vm.prank(pauser);
        market.setParams(p);
    }
}
