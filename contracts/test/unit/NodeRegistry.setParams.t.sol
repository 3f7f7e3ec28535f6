// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Unit_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {RegistryParams} from "../../src/types/Types.sol";

contract NodeRegistry_SetParams_Test is NodeRegistry_Unit_Test {
    function newParams() internal pure returns (RegistryParams memory) {
        return RegistryParams({minStake: 250e6, heartbeatTimeout: 2 minutes, unbondingPeriod: 3 days, slashBps: 2_500});
    }

    function test_SetParams_ReplacesParams() external {
        RegistryParams memory p = newParams();
        expectRegistryEmit();
        emit INodeRegistry.RegistryParamsUpdated(p);
        vm.prank(admin);
        registry.setParams(p);
        assertParams(registry.params(), p);
    }

    function test_SetParams_AcceptsBounds() external {
        RegistryParams memory p =
            RegistryParams({minStake: 0, heartbeatTimeout: 1, unbondingPeriod: 0, slashBps: 10_000});
        vm.prank(admin);
        registry.setParams(p);
        assertParams(registry.params(), p);
    }

    function test_SetParams_NewMinStakeAppliesToRegister() external {
        setRegistryParams(newParams());
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_StakeTooLow.selector, uint96(250e6 - 1), uint96(250e6))
        );
        vm.prank(operator);
        registry.register(agent, h100Node(), META, 250e6 - 1);
    }

    function test_RevertWhen_CallerIsNotAdmin() external {
        bytes32 role = registry.DEFAULT_ADMIN_ROLE();
        vm.expectRevert(unauthorized(stranger, role));
        vm.prank(stranger);
        registry.setParams(newParams());
    }

    function test_RevertWhen_CallerIsPauser() external {
        bytes32 role = registry.DEFAULT_ADMIN_ROLE();
        vm.expectRevert(unauthorized(pauser, role));
        vm.prank(pauser);
        registry.setParams(newParams());
    }

    function expectInvalid(RegistryParams memory p) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_InvalidParams.selector));
        vm.prank(admin);
        registry.setParams(p);
        assertParams(registry.params(), registryParams());
    }

    function test_RevertWhen_SlashBpsAboveMaximum() external {
        RegistryParams memory p = newParams();
        p.slashBps = 10_001;
        expectInvalid(p);
    }

    function test_RevertWhen_HeartbeatTimeoutIsZero() external {
        RegistryParams memory p = newParams();
        p.heartbeatTimeout = 0;
        expectInvalid(p);
    }
}
