// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";

import {NodeRegistry_Unit_Test} from "./NodeRegistryBase.sol";
import {NodeStatus, Release} from "../../src/types/Types.sol";

/// @notice Pausing and unpausing the registry: only the pauser may, and only from the other state.
abstract contract NodeRegistry_Pausing_Test is NodeRegistry_Unit_Test {
    function pauseAs(address caller) internal {
        vm.prank(caller);
        registry.pause();
    }

    function unpauseAs(address caller) internal {
        vm.prank(caller);
        registry.unpause();
    }

    function expectNotPauser(address caller) internal {
        vm.expectRevert(unauthorized(caller, registry.PAUSER_ROLE()));
    }
}

contract NodeRegistry_Pause_Test is NodeRegistry_Pausing_Test {
    function test_Pause_StopsRegistration() external {
        expectRegistryEmit();
        emit Pausable.Paused(pauser);
        pauseAs(pauser);
        assertTrue(registry.paused());
    }

    /// Pausing stops new nodes only: existing nodes keep working and may leave.
    function test_Pause_ExistingNodesKeepWorking() external {
        uint64 nodeId = registerNode();
        pauseAs(pauser);

        heartbeat(nodeId);
        vm.prank(operator);
        registry.topUpStake(nodeId, 1e6);
        takeSlot(nodeId);
        release(nodeId, false, Release.Completed);
        exitAndWithdraw(nodeId);
        assertEq(uint8(registry.statusOf(nodeId)), uint8(NodeStatus.Exited));
    }

    function test_RevertWhen_CallerLacksPauserRole() external {
        expectNotPauser(stranger);
        pauseAs(stranger);
    }

    function test_RevertWhen_AdminLacksPauserRole() external {
        expectNotPauser(admin);
        pauseAs(admin);
    }

    function test_RevertWhen_AlreadyPaused() external {
        pauseAs(pauser);
        vm.expectRevert(abi.encodeWithSelector(Pausable.EnforcedPause.selector));
        pauseAs(pauser);
    }
}

contract NodeRegistry_Unpause_Test is NodeRegistry_Pausing_Test {
    function setUp() public override {
        super.setUp();
        pauseAs(pauser);
    }

    function test_Unpause_ResumesRegistration() external {
        expectRegistryEmit();
        emit Pausable.Unpaused(pauser);
        unpauseAs(pauser);

        assertFalse(registry.paused());
        assertEq(registerNode(), 1);
    }

    function test_RevertWhen_CallerLacksPauserRole() external {
        expectNotPauser(stranger);
        unpauseAs(stranger);
    }

    function test_RevertWhen_NotPaused() external {
        unpauseAs(pauser);
        vm.expectRevert(abi.encodeWithSelector(Pausable.ExpectedPause.selector));
        unpauseAs(pauser);
    }
}
