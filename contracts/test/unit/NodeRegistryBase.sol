// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";
import {Vm} from "forge-std/Vm.sol";

import {Base, RegisteredNode} from "../Base.t.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeCapabilities, NodeStatus, RegistryParams, Release} from "../../src/types/Types.sol";

/// @notice Shared fixtures of the NodeRegistry unit tests: a test address that holds
/// MARKET_ROLE (so that the market-only functions can be driven directly) and helpers.
abstract contract NodeRegistry_Unit_Test is Base {
    string internal constant META = "ipfs://node-meta";

    /// Stands in for the JobMarket: holds MARKET_ROLE and receives slashed tokens.
    address internal marketCaller = makeAddr("marketCaller");

    function setUp() public virtual override {
        super.setUp();
        bytes32 marketRole = registry.MARKET_ROLE();
        vm.prank(admin);
        registry.grantRole(marketRole, marketCaller);
    }

    // ---------------------------------------------------------------- capabilities

    /// Capabilities in the struct's order, as `h100Node`.
    function a100Node() internal pure returns (NodeCapabilities memory) {
        return NodeCapabilities(A100, 4, 40_960, 32, 262_144, 1e6, 1);
    }

    function cpuOnlyNode() internal pure returns (NodeCapabilities memory) {
        return NodeCapabilities(bytes32(0), 0, 0, 16, 65_536, 0, 4);
    }

    function assertCapabilities(NodeCapabilities memory actual, NodeCapabilities memory expected) internal pure {
        assertEq(actual.gpuModel, expected.gpuModel, "gpuModel");
        assertEq(actual.gpuCount, expected.gpuCount, "gpuCount");
        assertEq(actual.vramMiB, expected.vramMiB, "vramMiB");
        assertEq(actual.cpuCores, expected.cpuCores, "cpuCores");
        assertEq(actual.ramMiB, expected.ramMiB, "ramMiB");
        assertEq(actual.pricePerGpuHour, expected.pricePerGpuHour, "pricePerGpuHour");
        assertEq(actual.maxConcurrentJobs, expected.maxConcurrentJobs, "maxConcurrentJobs");
    }

    function assertParams(RegistryParams memory actual, RegistryParams memory expected) internal pure {
        assertEq(actual.minStake, expected.minStake, "minStake");
        assertEq(actual.heartbeatTimeout, expected.heartbeatTimeout, "heartbeatTimeout");
        assertEq(actual.unbondingPeriod, expected.unbondingPeriod, "unbondingPeriod");
        assertEq(actual.slashBps, expected.slashBps, "slashBps");
    }

    function assertStatus(uint64 nodeId, NodeStatus expected) internal view {
        assertEq(uint8(registry.statusOf(nodeId)), uint8(expected), "statusOf");
        assertEq(uint8(registry.getNode(nodeId).status), uint8(expected), "getNode.status");
    }

    // ---------------------------------------------------------------- steps

    function expectRegistryEmit() internal {
        vm.expectEmit(true, true, true, true, address(registry));
    }

    function expectMarkedInactive(uint64 nodeId, uint32 lastHeartbeat, address by) internal {
        expectRegistryEmit();
        emit INodeRegistry.NodeMarkedInactive(nodeId, lastHeartbeat, by);
    }

    /// The logs recorded since `vm.recordLogs()` that the registry emitted (the test
    /// contract's own `emit`s for `vm.expectEmit` are recorded too and left out here).
    function registryLogs() internal returns (Vm.Log[] memory logs) {
        Vm.Log[] memory all = vm.getRecordedLogs();
        logs = new Vm.Log[](all.length);
        uint256 n;
        for (uint256 i; i < all.length; ++i) {
            if (all[i].emitter == address(registry)) logs[n++] = all[i];
        }
        assembly ("memory-safe") {
            mstore(logs, n)
        }
    }

    function expectHeartbeatNotExpired(uint64 nodeId, uint256 expiresAt) internal {
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_HeartbeatNotExpired.selector, nodeId, expiresAt)
        );
    }

    function expectNoActiveJob(uint64 nodeId) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NoActiveJob.selector, nodeId));
    }

    function expectExiting(uint64 nodeId) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_Exiting.selector, nodeId));
    }

    function expectNotOperator(uint64 nodeId, address caller) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotOperator.selector, nodeId, caller));
    }

    function unauthorized(address account, bytes32 role) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, account, role);
    }

    function setHeartbeatTimeout(uint32 heartbeatTimeout) internal {
        RegistryParams memory p = registryParams();
        p.heartbeatTimeout = heartbeatTimeout;
        setRegistryParams(p);
    }

    function takeSlot(uint64 nodeId) internal {
        vm.prank(marketCaller);
        registry.takeSlot(nodeId);
    }

    function markSettling(uint64 nodeId) internal {
        vm.prank(marketCaller);
        registry.markSettling(nodeId);
    }

    function release(uint64 nodeId, bool settling, Release outcome) internal returns (uint96 slashed) {
        vm.prank(marketCaller);
        (, slashed) = registry.release(nodeId, settling, outcome);
    }

    function exitAndWithdraw(uint64 nodeId) internal {
        beginExit(nodeId);
        vm.warp(block.timestamp + UNBONDING);
        vm.prank(operator);
        registry.withdrawStake(nodeId);
    }

    /// Lets the heartbeat expire and marks the node Inactive.
    function makeInactive(uint64 nodeId) internal {
        vm.warp(block.timestamp + HEARTBEAT_TIMEOUT + 1);
        vm.prank(stranger);
        registry.markInactive(nodeId);
    }
}

/// @notice The registry's fixture node.
abstract contract NodeRegistry_Node_Test is NodeRegistry_Unit_Test, RegisteredNode {
    function setUp() public virtual override(NodeRegistry_Unit_Test, RegisteredNode) {
        super.setUp();
    }
}
