// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {NodeRegistry_Unit_Test} from "./NodeRegistryBase.sol";
import {NodeRegistry} from "../../src/NodeRegistry.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {RegistryParams} from "../../src/types/Types.sol";

contract NodeRegistry_Constructor_Test is NodeRegistry_Unit_Test {
    function test_Constructor_SetsTokenAdminAndParams() external {
        RegistryParams memory p = registryParams();
        address expected = vm.computeCreateAddress(address(this), vm.getNonce(address(this)));
        vm.expectEmit(true, true, true, true, expected);
        emit INodeRegistry.RegistryParamsUpdated(p);
        NodeRegistry fresh = new NodeRegistry(token, admin, p);

        assertEq(address(fresh), expected);
        assertEq(address(fresh.token()), address(token));
        assertTrue(fresh.hasRole(fresh.DEFAULT_ADMIN_ROLE(), admin));
        assertFalse(fresh.hasRole(fresh.DEFAULT_ADMIN_ROLE(), address(this)));
        assertFalse(fresh.hasRole(fresh.MARKET_ROLE(), admin));
        assertFalse(fresh.hasRole(fresh.PAUSER_ROLE(), admin));
        assertParams(fresh.params(), p);
        assertEq(fresh.nodeCount(), 0);
        assertFalse(fresh.paused());
    }

    function test_Constructor_AcceptsFullSlash() external {
        RegistryParams memory p = registryParams();
        p.slashBps = 10_000;
        NodeRegistry fresh = new NodeRegistry(token, admin, p);
        assertEq(fresh.params().slashBps, 10_000);
    }

    function test_Constructor_RolesAreConstants() external view {
        assertEq(registry.MARKET_ROLE(), keccak256("MARKET_ROLE"));
        assertEq(registry.PAUSER_ROLE(), keccak256("PAUSER_ROLE"));
    }

    function test_RevertWhen_TokenIsZeroAddress() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_ZeroAddress.selector));
        new NodeRegistry(IERC20(address(0)), admin, registryParams());
    }

    function test_RevertWhen_AdminIsZeroAddress() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_ZeroAddress.selector));
        new NodeRegistry(token, address(0), registryParams());
    }

    function test_RevertWhen_SlashBpsAboveMaximum() external {
        RegistryParams memory p = registryParams();
        p.slashBps = 10_001;
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_InvalidParams.selector));
        new NodeRegistry(token, admin, p);
    }

    function test_RevertWhen_HeartbeatTimeoutIsZero() external {
        RegistryParams memory p = registryParams();
        p.heartbeatTimeout = 0;
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_InvalidParams.selector));
        new NodeRegistry(token, admin, p);
    }
}
