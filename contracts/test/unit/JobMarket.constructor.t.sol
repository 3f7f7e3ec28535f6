// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {JobMarket_Params_Shared} from "./JobMarket.params.shared.sol";
import {JobMarket} from "../../src/JobMarket.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {MarketParams} from "../../src/types/Types.sol";

contract JobMarket_Constructor_Test is JobMarket_Params_Shared {
    function deploy(IERC20 token_, INodeRegistry registry_, address admin_, MarketParams memory params_)
        internal
        returns (JobMarket)
    {
        return new JobMarket(token_, registry_, admin_, params_);
    }

    function validParams() internal view override returns (MarketParams memory) {
        return marketParams();
    }

    function applyParams(MarketParams memory p) internal override {
        deploy(token, registry, admin, p);
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
        assertMarketParams(deployed.params(), marketParams());
    }

    function test_Constructor_AcceptsMaxFeeAndZeroBond() external {
        MarketParams memory p = marketParams();
        p.protocolFeeBps = 1_000;
        p.disputeBond = 0;
        p.maxAttempts = 1;
        p.challengeWindow = 1;
        JobMarket deployed = deploy(token, registry, admin, p);
        assertMarketParams(deployed.params(), p);
    }

    function test_RevertWhen_TokenIsZeroAddress() external {
        vm.expectRevert(IJobMarket.JobMarket_ZeroAddress.selector);
        deploy(IERC20(address(0)), registry, admin, marketParams());
    }

    function test_RevertWhen_RegistryIsZeroAddress() external {
        vm.expectRevert(IJobMarket.JobMarket_ZeroAddress.selector);
        deploy(token, INodeRegistry(address(0)), admin, marketParams());
    }

    function test_RevertWhen_AdminIsZeroAddress() external {
        vm.expectRevert(IJobMarket.JobMarket_ZeroAddress.selector);
        deploy(token, registry, address(0), marketParams());
    }
}
