// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Unit_Test} from "../../unit/NodeRegistryBase.sol";
import {INodeRegistry} from "../../../src/interfaces/INodeRegistry.sol";
import {NodeCapabilities, NodeInfo, NodeStatus, RegistryParams, Release} from "../../../src/types/Types.sol";

contract NodeRegistry_Fuzz_Test is NodeRegistry_Unit_Test {
    address internal fuzzOperator = makeAddr("fuzzOperator");

    /// Turns arbitrary capabilities into valid ones: a GPU node (model, count and memory all
    /// set) or a CPU-only node (all three zero), with at least one core and one job slot.
    function validCapabilities(NodeCapabilities memory caps, bool hasGpu)
        internal
        pure
        returns (NodeCapabilities memory)
    {
        if (hasGpu) {
            if (caps.gpuModel == bytes32(0)) caps.gpuModel = H100;
            caps.gpuCount = uint16(bound(caps.gpuCount, 1, type(uint16).max));
            caps.vramMiB = uint32(bound(caps.vramMiB, 1, type(uint32).max));
        } else {
            caps.gpuModel = bytes32(0);
            caps.gpuCount = 0;
            caps.vramMiB = 0;
        }
        caps.cpuCores = uint16(bound(caps.cpuCores, 1, type(uint16).max));
        caps.maxConcurrentJobs = uint8(bound(caps.maxConcurrentJobs, 1, type(uint8).max));
        return caps;
    }

    function registerWith(address op, uint96 stake) internal returns (uint64 nodeId) {
        token.mint(op, stake);
        vm.startPrank(op);
        token.approve(address(registry), stake);
        nodeId = registry.register(agent, h100Node(), "", stake);
        vm.stopPrank();
    }

    // ---------------------------------------------------------------- register

    function testFuzz_Register(
        address agent_,
        NodeCapabilities memory caps,
        bool hasGpu,
        string memory uri,
        uint96 stake
    ) external {
        vm.assume(agent_ != address(0));
        caps = validCapabilities(caps, hasGpu);
        stake = uint96(bound(stake, MIN_STAKE, type(uint96).max));
        token.mint(fuzzOperator, stake);
        vm.prank(fuzzOperator);
        token.approve(address(registry), stake);

        expectRegistryEmit();
        emit INodeRegistry.NodeRegistered(1, fuzzOperator, agent_, caps, uri, stake, uint32(block.timestamp));
        vm.prank(fuzzOperator);
        uint64 nodeId = registry.register(agent_, caps, uri, stake);

        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(nodeId, 1);
        assertEq(node.operator, fuzzOperator);
        assertEq(node.agent, agent_);
        assertEq(uint8(node.status), uint8(NodeStatus.Active));
        assertEq(node.stake, stake);
        assertEq(node.lastHeartbeat, uint32(block.timestamp));
        assertCapabilities(node.capabilities, caps);
        assertEq(token.balanceOf(address(registry)), stake);
        assertEq(token.balanceOf(fuzzOperator), 0);
    }

    /// Register accepts exactly the capabilities of the reference rule and no others.
    function testFuzz_RegisterValidatesCapabilities(NodeCapabilities memory caps) external {
        bool hasModel = caps.gpuModel != bytes32(0);
        bool hasGpus = caps.gpuCount != 0;
        bool valid =
            hasModel == hasGpus && (!hasGpus || caps.vramMiB != 0) && caps.cpuCores != 0 && caps.maxConcurrentJobs != 0;

        if (!valid) {
            vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_InvalidCapabilities.selector));
        }
        vm.prank(operator);
        registry.register(agent, caps, "", STAKE);
        assertEq(registry.nodeCount(), valid ? 1 : 0);
    }

    function testFuzz_RevertWhen_StakeBelowMinimum(uint96 minStake, uint96 stake) external {
        minStake = uint96(bound(minStake, 1, type(uint96).max));
        stake = uint96(bound(stake, 0, minStake - 1));
        RegistryParams memory p = registryParams();
        p.minStake = minStake;
        setRegistryParams(p);

        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_StakeTooLow.selector, stake, minStake));
        vm.prank(operator);
        registry.register(agent, h100Node(), "", stake);
    }

    // ---------------------------------------------------------------- stake accounting

    /// After random registrations, top-ups and slashes, the registry holds exactly the sum of
    /// the stakes and the market holds exactly the sum slashed.
    function testFuzz_StakeAccounting(
        uint96[4] memory stakes,
        uint96[12] memory amounts,
        uint8[12] memory targets,
        bool[12] memory isSlash,
        uint16 slashBps
    ) external {
        setSlashBps(uint16(bound(slashBps, 0, 10_000)));
        uint64[4] memory ids;
        address[4] memory ops;
        for (uint256 i; i < 4; ++i) {
            ops[i] = makeAddr(string(abi.encodePacked("op", vm.toString(i))));
            ids[i] = registerWith(ops[i], uint96(bound(stakes[i], MIN_STAKE, 1e24)));
        }
        // Slashed nodes keep taking slots here: this test is about the token accounting.
        dropMinStake();

        uint256 slashedTotal;
        for (uint256 k; k < 12; ++k) {
            uint256 t = targets[k] % 4;
            if (isSlash[k]) {
                takeSlot(ids[t]);
                slashedTotal += release(ids[t], false, Release.Faulted);
            } else {
                uint96 amount = uint96(bound(amounts[k], 1, 1e24));
                token.mint(ops[t], amount);
                vm.startPrank(ops[t]);
                token.approve(address(registry), amount);
                registry.topUpStake(ids[t], amount);
                vm.stopPrank();
            }
        }

        uint256 sum;
        uint256 slashedSum;
        for (uint256 i; i < 4; ++i) {
            NodeInfo memory node = registry.getNode(ids[i]);
            sum += node.stake;
            slashedSum += node.totalSlashed;
        }
        assertEq(token.balanceOf(address(registry)), sum, "registry balance == sum of stakes");
        assertEq(token.balanceOf(marketCaller), slashedTotal, "market received the slashes");
        assertEq(slashedSum, slashedTotal, "totalSlashed adds up");
    }

    function testFuzz_WithdrawStake_ReturnsWholeStake(uint96 stake, uint96 topUp) external {
        stake = uint96(bound(stake, MIN_STAKE, type(uint96).max / 2));
        topUp = uint96(bound(topUp, 1, type(uint96).max / 2));
        uint64 nodeId = registerWith(fuzzOperator, stake);
        token.mint(fuzzOperator, topUp);
        vm.startPrank(fuzzOperator);
        token.approve(address(registry), topUp);
        registry.topUpStake(nodeId, topUp);
        registry.beginExit(nodeId);
        vm.warp(block.timestamp + UNBONDING);
        registry.withdrawStake(nodeId);
        vm.stopPrank();

        assertEq(token.balanceOf(fuzzOperator), uint256(stake) + topUp);
        assertEq(token.balanceOf(address(registry)), 0);
        assertEq(registry.getNode(nodeId).stake, 0);
    }

    // ---------------------------------------------------------------- slashing

    function testFuzz_Slash(uint96 stake, uint16 slashBps) external {
        stake = uint96(bound(stake, MIN_STAKE, type(uint96).max));
        slashBps = uint16(bound(slashBps, 0, 10_000));
        setSlashBps(slashBps);
        uint64 nodeId = registerWith(fuzzOperator, stake);
        takeSlot(nodeId);

        uint96 expected = uint96((uint256(stake) * slashBps) / 10_000);
        if (expected != 0) {
            expectRegistryEmit();
            emit INodeRegistry.NodeSlashed(nodeId, expected, stake - expected);
        }
        uint96 slashed = release(nodeId, false, Release.Faulted);

        assertEq(slashed, expected);
        assertLe(slashed, stake);
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.stake, stake - expected);
        assertEq(node.totalSlashed, expected);
        assertEq(node.failedJobs, 1);
        assertEq(node.activeJobs, 0);
        assertEq(token.balanceOf(marketCaller), expected);
        assertEq(token.balanceOf(address(registry)), stake - expected);
    }

    function testFuzz_SlashRepeated(uint96 stake, uint16 slashBps, uint8 faults) external {
        stake = uint96(bound(stake, MIN_STAKE, type(uint96).max));
        slashBps = uint16(bound(slashBps, 0, 10_000));
        faults = uint8(bound(faults, 1, 30));
        setSlashBps(slashBps);
        uint64 nodeId = registerWith(fuzzOperator, stake);
        // Slashed nodes keep taking slots here: this test is about the slash arithmetic.
        dropMinStake();

        uint256 remaining = stake;
        uint256 total;
        for (uint256 i; i < faults; ++i) {
            takeSlot(nodeId);
            uint256 expected = (remaining * slashBps) / 10_000;
            assertEq(release(nodeId, false, Release.Faulted), expected);
            remaining -= expected;
            total += expected;
        }

        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.stake, remaining);
        assertEq(node.totalSlashed, total);
        assertEq(node.failedJobs, faults);
        assertEq(remaining + total, stake);
        assertEq(token.balanceOf(marketCaller), total);
        assertEq(token.balanceOf(address(registry)), remaining);
    }

    // ---------------------------------------------------------------- liveness

    /// An Active node may be marked Inactive iff more than `heartbeatTimeout` seconds have
    /// passed since its last heartbeat.
    function testFuzz_MarkInactive(uint32 timeout, uint256 elapsed) external {
        timeout = uint32(bound(timeout, 1, type(uint32).max));
        elapsed = bound(elapsed, 0, uint256(timeout) * 2 + 1 days);
        (uint64 nodeId, uint32 last) = registerAndWait(timeout, elapsed);

        if (elapsed <= timeout) {
            expectHeartbeatNotExpired(nodeId, uint256(last) + timeout);
            registry.markInactive(nodeId);
            assertStatus(nodeId, NodeStatus.Active);
        } else {
            expectMarkedInactive(nodeId, last, stranger);
            vm.prank(stranger);
            registry.markInactive(nodeId);
            assertStatus(nodeId, NodeStatus.Inactive);
        }
    }

    /// The node's agent may mark its own Active node Inactive whatever the time since its
    /// last heartbeat (graceful shutdown).
    function testFuzz_MarkInactive_ByAgentAnyTime(uint32 timeout, uint256 elapsed) external {
        timeout = uint32(bound(timeout, 1, type(uint32).max));
        elapsed = bound(elapsed, 0, uint256(timeout) * 2 + 1 days);
        (uint64 nodeId, uint32 last) = registerAndWait(timeout, elapsed);

        expectMarkedInactive(nodeId, last, agent);
        vm.prank(agent);
        registry.markInactive(nodeId);
        assertStatus(nodeId, NodeStatus.Inactive);
    }

    /// The timeout counts from the latest heartbeat, not from registration.
    function testFuzz_MarkInactive_AfterHeartbeat(uint256 beatAfter, uint256 elapsed) external {
        uint64 nodeId = registerNode();
        beatAfter = bound(beatAfter, 0, 365 days);
        elapsed = bound(elapsed, 0, 3 * uint256(HEARTBEAT_TIMEOUT));
        vm.warp(block.timestamp + beatAfter);
        vm.prank(agent); // the node may be past its timeout here but is still Active
        registry.heartbeat(nodeId);
        uint32 last = uint32(block.timestamp);

        vm.warp(uint256(last) + elapsed);
        if (elapsed <= HEARTBEAT_TIMEOUT) {
            vm.expectRevert(
                abi.encodeWithSelector(
                    INodeRegistry.NodeRegistry_HeartbeatNotExpired.selector, nodeId, last + HEARTBEAT_TIMEOUT
                )
            );
        }
        registry.markInactive(nodeId);
        assertEq(
            uint8(registry.statusOf(nodeId)),
            uint8(elapsed > HEARTBEAT_TIMEOUT ? NodeStatus.Inactive : NodeStatus.Active)
        );
    }

    function testFuzz_WithdrawStake_OnlyAfterUnbonding(uint32 unbonding, uint256 elapsed) external {
        unbonding = uint32(bound(unbonding, 0, 365 days));
        elapsed = bound(elapsed, 0, uint256(unbonding) * 2 + 1);
        RegistryParams memory p = registryParams();
        p.unbondingPeriod = unbonding;
        setRegistryParams(p);
        uint64 nodeId = registerNode();
        beginExit(nodeId);
        uint40 endsAt = uint40(block.timestamp) + unbonding;

        vm.warp(block.timestamp + elapsed);
        if (elapsed < unbonding) {
            vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_StillUnbonding.selector, nodeId, endsAt));
        }
        vm.prank(operator);
        registry.withdrawStake(nodeId);
        assertEq(uint8(registry.statusOf(nodeId)), uint8(elapsed < unbonding ? NodeStatus.Exiting : NodeStatus.Exited));
    }

    // ---------------------------------------------------------------- slots

    function testFuzz_TakeSlot_UpToMaxConcurrentJobs(uint8 maxJobs, uint8 settled) external {
        maxJobs = uint8(bound(maxJobs, 1, type(uint8).max));
        NodeCapabilities memory caps = h100Node();
        caps.maxConcurrentJobs = maxJobs;
        vm.prank(operator);
        uint64 nodeId = registry.register(agent, caps, "", STAKE);

        for (uint256 i; i < maxJobs; ++i) {
            takeSlot(nodeId);
        }
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NoFreeSlot.selector, nodeId, maxJobs, maxJobs)
        );
        vm.prank(marketCaller);
        registry.takeSlot(nodeId);

        // Each job moved to settling frees one slot.
        settled = uint8(bound(settled, 1, maxJobs));
        for (uint256 i; i < settled; ++i) {
            markSettling(nodeId);
        }
        for (uint256 i; i < settled; ++i) {
            takeSlot(nodeId);
        }
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.activeJobs, maxJobs);
        assertEq(node.settlingJobs, settled);
    }

    /// Sets the heartbeat timeout, registers a node (its last heartbeat is now) and lets
    /// `elapsed` seconds pass.
    function registerAndWait(uint32 timeout, uint256 elapsed) internal returns (uint64 nodeId, uint32 last) {
        setHeartbeatTimeout(timeout);
        nodeId = registerNode();
        last = uint32(block.timestamp);
        vm.warp(uint256(last) + elapsed);
    }

    function dropMinStake() internal {
        RegistryParams memory p = registry.params();
        p.minStake = 0;
        setRegistryParams(p);
    }
}
