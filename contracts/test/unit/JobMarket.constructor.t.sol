// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {JobMarketBase} from "./JobMarketBase.sol";
import {JobMarket} from "../../src/JobMarket.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {MarketParams} from "../../src/types/Types.sol";

contract JobMarket_Constructor_Test is JobMarketBase {
    function deploy(IERC20 token_, INodeRegistry registry_, address admin_, MarketParams memory params_)
        internal
        returns (JobMarket)
    {
        return new JobMarket(token_, registry_, admin_, params_);
    }

    function test_Constructor_SetsState() external {
        MarketParams memory p = marketParams();
        address expected = vm.computeCreateAddress(address(this), vm.getNonce(address(this)));
        vm.expectEmit(true, true, true, true, expected);
        emit IJobMarket.MarketParamsUpdated(p);
        JobMarket deployed = deploy(token, registry, admin, p);

        assertEq(address(deployed), expected);
        assertEq(address(deployed.token()), address(token));
        assertEq(address(deployed.registry()), address(registry));
        assertTrue(deployed.hasRole(deployed.DEFAULT_ADMIN_ROLE(), admin));
        assertFalse(deployed.hasRole(deployed.DEFAULT_ADMIN_ROLE(), address(this)));
        assertFalse(deployed.hasRole(deployed.MATCHER_ROLE(), admin));
        assertFalse(deployed.paused());
        assertEq(deployed.jobCount(), 0);

        MarketParams memory stored = deployed.params();
        assertEq(stored.feeRecipient, treasury);
        assertEq(stored.challengeWindow, CHALLENGE_WINDOW);
        assertEq(stored.protocolFeeBps, FEE_BPS);
        assertEq(stored.maxAttempts, MAX_ATTEMPTS);
        assertEq(stored.disputeBond, DISPUTE_BOND);
    }

    function test_Constructor_AcceptsMaxFeeAndZeroBond() external {
        MarketParams memory p = marketParams();
        p.protocolFeeBps = 1_000;
        p.disputeBond = 0;
        p.maxAttempts = 1;
        p.challengeWindow = 1;
        JobMarket deployed = deploy(token, registry, admin, p);
        assertEq(deployed.params().protocolFeeBps, 1_000);
        assertEq(deployed.params().disputeBond, 0);
        assertEq(deployed.params().maxAttempts, 1);
        assertEq(deployed.params().challengeWindow, 1);
    }

    function test_RevertWhen_TokenIsZeroAddress() external {
        MarketParams memory p = marketParams();
        vm.expectRevert(IJobMarket.JobMarket_ZeroAddress.selector);
        deploy(IERC20(address(0)), registry, admin, p);
    }

    function test_RevertWhen_RegistryIsZeroAddress() external {
        MarketParams memory p = marketParams();
        vm.expectRevert(IJobMarket.JobMarket_ZeroAddress.selector);
        deploy(token, INodeRegistry(address(0)), admin, p);
    }

    function test_RevertWhen_AdminIsZeroAddress() external {
        MarketParams memory p = marketParams();
        vm.expectRevert(IJobMarket.JobMarket_ZeroAddress.selector);
        deploy(token, registry, address(0), p);
    }

    function test_RevertWhen_FeeRecipientIsZeroAddress() external {
        MarketParams memory p = marketParams();
        p.feeRecipient = address(0);
        vm.expectRevert(IJobMarket.JobMarket_InvalidParams.selector);
        deploy(token, registry, admin, p);
    }

    function test_RevertWhen_FeeAboveMax() external {
        MarketParams memory p = marketParams();
        p.protocolFeeBps = 1_001;
        vm.expectRevert(IJobMarket.JobMarket_InvalidParams.selector);
        deploy(token, registry, admin, p);
    }

    function test_RevertWhen_MaxAttemptsIsZero() external {
        MarketParams memory p = marketParams();
        p.maxAttempts = 0;
        vm.expectRevert(IJobMarket.JobMarket_InvalidParams.selector);
        deploy(token, registry, admin, p);
    }

    function test_RevertWhen_ChallengeWindowIsZero() external {
        MarketParams memory p = marketParams();
        p.challengeWindow = 0;
        vm.expectRevert(IJobMarket.JobMarket_InvalidParams.selector);
        deploy(token, registry, admin, p);
    }
}
