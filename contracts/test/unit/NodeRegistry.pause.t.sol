// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";

import {NodeRegistry_Unit_Test} from "./NodeRegistryBase.sol";
import {NodeStatus, Release} from "../../src/types/Types.sol";

contract NodeRegistry_Pause_Test is NodeRegistry_Unit_Test {
    function test_Pause_StopsRegistration() external {
        vm.expectEmit(true, true, true, true, address(registry));
        emit Pausable.Paused(pauser);
        vm.prank(pauser);
        registry.pause();
        assertTrue(registry.paused());
    }

    /// Pausing stops new nodes only: existing nodes keep working and may leave.
    function test_Pause_ExistingNodesKeepWorking() external {
        uint64 nodeId = registerNode();
        vm.prank(pauser);
        registry.pause();

        vm.prank(agent);
        registry.heartbeat(nodeId);
        vm.prank(operator);
        registry.topUpStake(nodeId, 1e6);
        takeSlot(nodeId);
        release(nodeId, false, Release.Completed);
        exitAndWithdraw(nodeId);
        assertEq(uint8(registry.statusOf(nodeId)), uint8(NodeStatus.Exited));
    }

    function test_RevertWhen_CallerLacksPauserRole() external {
        bytes32 role = registry.PAUSER_ROLE();
        vm.expectRevert(unauthorized(stranger, role));
        vm.prank(stranger);
        registry.pause();
    }

    function test_RevertWhen_AdminLacksPauserRole() external {
        bytes32 role = registry.PAUSER_ROLE();
        vm.expectRevert(unauthorized(admin, role));
        vm.prank(admin);
        registry.pause();
    }

    function test_RevertWhen_AlreadyPaused() external {
        vm.prank(pauser);
        registry.pause();
        vm.expectRevert(abi.encodeWithSelector(Pausable.EnforcedPause.selector));
        vm.prank(pauser);
        registry.pause();
    }
}

contract NodeRegistry_Unpause_Test is NodeRegistry_Unit_Test {
    function setUp() public override {
        super.setUp();
        vm.prank(pauser);
        registry.pause();
    }

    function test_Unpause_ResumesRegistration() external {
        vm.expectEmit(true, true, true, true, address(registry));
        emit Pausable.Unpaused(pauser);
        vm.prank(pauser);
        registry.unpause();

        assertFalse(registry.paused());
        assertEq(registerNode(), 1);
    }

    function test_RevertWhen_CallerLacksPauserRole() external {
        bytes32 role = registry.PAUSER_ROLE();
        vm.expectRevert(unauthorized(stranger, role));
        vm.prank(stranger);
        registry.unpause();
    }

    function test_RevertWhen_NotPaused() external {
        vm.prank(pauser);
        registry.unpause();
        vm.expectRevert(abi.encodeWithSelector(Pausable.ExpectedPause.selector));
        vm.prank(pauser);
        registry.unpause();
    }
}
