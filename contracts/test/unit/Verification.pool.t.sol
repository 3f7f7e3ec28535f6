// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Base} from "../Base.t.sol";
import {VerificationUnitTest} from "./Verification.base.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {IVerification} from "../../src/interfaces/IVerification.sol";
import {MarketStorage} from "../../src/MarketStorage.sol";
import {GantryTestToken} from "../../src/dev/GantryTestToken.sol";
import {NodeCapabilities, NodeStatus, VerifyParams} from "../../src/types/Types.sol";

/// @notice The verification pool: who is in it (Active, serving WASM, free stake at least
/// the floor; nothing of any job), how nodes join (only `syncPool`, anyone) and leave (at
/// once on exit, inactivity or WASM dropped; at the next sync after a slash or a new floor),
/// and its swap-and-pop order.
contract VerificationPoolTest is VerificationUnitTest {
    function test_syncPool_joinsAnActiveWasmNodeWithFreeStakeAtTheFloor() public {
        uint64 id = registerWasmNode(0, verifyParams().poolFloor);
        assertEq(node(id).poolIndex, 0, "registering does not join");
        vm.expectEmit(address(market));
        emit INodeRegistry.PoolJoined(id, 1);
        syncPool(id);
        assertEq(nodes.poolSize(), 1);
        assertEq(nodes.poolAt(0), id);
        assertEq(node(id).poolIndex, 1);
        // Again: nothing changes, nothing is emitted.
        vm.recordLogs();
        syncPool(id);
        assertEq(nodes.poolSize(), 1);
    }

    function test_syncPool_leavesOutWhatDoesNotMeetTheRule() public {
        VerifyParams memory p = verifyParams();
        p.poolFloor = 2 * MIN_STAKE;
        vm.prank(admin);
        verification.setVerifyParams(p);
        uint96 floor = p.poolFloor;
        // Docker only; under the floor; Inactive; exiting.
        NodeCapabilities memory docker = wasmNode();
        docker.engines = DOCKER_ONLY;
        fund(makeAddr("docker operator"), 1_000e6);
        uint64 dockerOnly = registerNode(makeAddr("docker operator"), 0xD0C, docker, STAKE);
        uint64 underFloor = registerWasmNode(1, floor - 1);
        uint64 inactive = registerWasmNode(2, STAKE);
        markInactive(inactive, agentOf[inactive]);
        uint64 exiting = registerWasmNode(3, STAKE);
        beginExit(exiting);
        uint64[] memory ids = new uint64[](4);
        (ids[0], ids[1], ids[2], ids[3]) = (dockerOnly, underFloor, inactive, exiting);
        vm.prank(stranger);
        nodes.syncPool(ids);
        assertEq(nodes.poolSize(), 0, "none of them is a member");
    }

    /// Membership ignores everything a job could ask: GPUs, price, memory, cores.
    function test_membership_ignoresWhatJobsRequire() public {
        NodeCapabilities memory big = h100Node();
        fund(makeAddr("gpu operator"), 1_000e6);
        uint64 gpu = registerNode(makeAddr("gpu operator"), 0xD1, big, STAKE);
        NodeCapabilities memory tiny = wasmNode();
        (tiny.cpuCores, tiny.ramMiB, tiny.pricePerGpuHour) = (1, 1, type(uint96).max);
        fund(makeAddr("tiny operator"), 1_000e6);
        uint64 small = registerNode(makeAddr("tiny operator"), 0xD2, tiny, STAKE);
        syncPool(gpu);
        syncPool(small);
        assertEq(nodes.poolSize(), 2);
    }

    function test_registerTopUpAndReactivation_doNotJoin() public {
        uint64 id = registerWasmNode(0, STAKE);
        topUp(id, 1e6);
        markInactive(id, agentOf[id]);
        heartbeat(id);
        assertEq(uint8(node(id).status), uint8(NodeStatus.Active));
        assertEq(node(id).poolIndex, 0, "a node joins only through syncPool");
        assertEq(nodes.poolSize(), 0);
    }

    function test_exitInactivityAndDroppingWasm_leaveAtOnce() public {
        uint64[] memory ids = pool(3);
        beginExit(ids[0]);
        assertEq(node(ids[0]).poolIndex, 0, "exit");
        markInactive(ids[1], agentOf[ids[1]]);
        assertEq(node(ids[1]).poolIndex, 0, "inactive");
        NodeCapabilities memory docker = wasmNode();
        docker.engines = DOCKER_ONLY;
        vm.expectEmit(address(market));
        emit INodeRegistry.PoolLeft(ids[2]);
        vm.prank(node(ids[2]).operator);
        nodes.updateCapabilities(ids[2], docker, "ipfs://docker");
        assertEq(nodes.poolSize(), 0, "WASM dropped");
    }

    function test_updateCapabilitiesKeepingWasm_staysAMember() public {
        uint64[] memory ids = pool(1);
        NodeCapabilities memory both = wasmNode();
        both.engines = DOCKER_AND_WASM;
        vm.prank(node(ids[0]).operator);
        nodes.updateCapabilities(ids[0], both, "ipfs://both");
        assertEq(node(ids[0]).poolIndex, 1);
    }

    /// A slash (JobMarket's) may leave a member under the floor: it stays until anyone syncs
    /// it, then leaves.
    function test_aSlashUnderTheFloor_leavesAtTheNextSync() public {
        uint96 floor = verifyParams().poolFloor;
        uint64 id = registerWasmNode(0, floor);
        syncPool(id);
        uint64 jobId = postJob(wasmJob(), BOUNTY, uint40(block.timestamp + 1 days));
        assign(jobId, id);
        vm.warp(block.timestamp + RUNTIME + 1);
        reclaim(jobId);
        assertLt(node(id).stake, floor, "slashed under the floor");
        assertEq(node(id).poolIndex, 1, "still a member until synced");
        syncPool(id);
        assertEq(node(id).poolIndex, 0);
    }

    function test_aHigherFloor_takesMembersOutAtTheirNextSync_andALowerOneLetsThemIn() public {
        uint64[] memory ids = pool(2);
        VerifyParams memory p = verifyParams();
        p.poolFloor = STAKE + 1;
        vm.prank(admin);
        verification.setVerifyParams(p);
        assertEq(nodes.poolSize(), 2, "nothing moves by itself");
        vm.prank(stranger);
        nodes.syncPool(ids);
        assertEq(nodes.poolSize(), 0);
        p.poolFloor = STAKE;
        vm.prank(admin);
        verification.setVerifyParams(p);
        vm.prank(stranger);
        nodes.syncPool(ids);
        assertEq(nodes.poolSize(), 2);
    }

    /// Swap-and-pop: the last member takes the leaver's place, and its record says so.
    function test_aLeaver_isReplacedByTheLastMember() public {
        uint64[] memory ids = pool(4);
        vm.expectEmit(address(market));
        emit INodeRegistry.PoolLeft(ids[1]);
        beginExit(ids[1]);
        assertEq(nodes.poolSize(), 3);
        assertEq(nodes.poolAt(0), ids[0]);
        assertEq(nodes.poolAt(1), ids[3], "the last member moved into the gap");
        assertEq(nodes.poolAt(2), ids[2]);
        assertEq(node(ids[3]).poolIndex, 2);
        assertEq(node(ids[2]).poolIndex, 3);
        // The last member leaving moves nobody.
        beginExit(ids[2]);
        assertEq(nodes.poolSize(), 2);
        assertEq(node(ids[3]).poolIndex, 2);
    }

    function test_syncPool_ofAnUnknownNode_reverts() public {
        uint64[] memory ids = new uint64[](1);
        ids[0] = 99;
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_UnknownNode.selector, 99));
        nodes.syncPool(ids);
    }

    function test_noVerificationRules_noPool() public {
        // A market whose admin never offered verification: the floor is 0, nobody joins.
        Base.setUp();
        verification = IVerification(address(market));
        uint64 id = registerWasmNode(0, STAKE);
        syncPool(id);
        assertEq(verification.poolFloor(), 0);
        assertEq(nodes.poolSize(), 0);
    }
}

/// @notice The pool's start-of-block view, on the storage helpers themselves: whatever
/// joins and leaves happen in a block, a draw in that block reads the pool as it was when
/// the block began.
contract PoolHarness is MarketStorage {
    constructor() MarketStorage(new GantryTestToken()) {
        _poolFloor = 1;
    }

    /// A node that meets the rule (or, with `member` false, stops meeting it) and is synced.
    function set(uint64 nodeId, bool member) external {
        NodeRecord storage node = _nodes[nodeId];
        node.hot.status = member ? NodeStatus.Active : NodeStatus.Inactive;
        node.hot.engines = 2;
        node.stake = 1;
        _poolSync(nodeId, node);
    }

    function length() external view returns (uint256) {
        return _pool.length;
    }

    function at(uint256 i) external view returns (uint64) {
        return _pool[i];
    }

    function indexOf(uint64 nodeId) external view returns (uint32) {
        return _nodes[nodeId].poolIndex;
    }

    function lengthAtBlockStart() external view returns (uint256) {
        return _poolLengthAtBlockStart();
    }

    function atBlockStart(uint256 i) external view returns (uint64) {
        return _poolAtBlockStart(i);
    }
}

contract PoolViewTest is VerificationUnitTest {
    PoolHarness internal harness;

    function setUp() public override {
        super.setUp();
        harness = new PoolHarness();
    }

    /// Random joins and leaves over a few blocks: at every step, the start-of-block view is
    /// the pool as it stood when the block began, and the live pool is consistent.
    function testFuzz_theStartOfBlockView_isThePoolAsTheBlockBegan(uint256 seed) public {
        uint64[] memory started = new uint64[](0);
        for (uint256 step; step < 40; ++step) {
            uint256 r = uint256(keccak256(abi.encode(seed, step)));
            if (step == 0 || r % 5 == 0) {
                vm.roll(block.number + 1);
                started = _snapshot();
            }
            harness.set(uint64(1 + (r >> 8) % 12), (r >> 16) % 3 != 0);
            assertEq(harness.lengthAtBlockStart(), started.length, "the length as the block began");
            for (uint256 i; i < started.length; ++i) {
                assertEq(harness.atBlockStart(i), started[i], "each position as the block began");
            }
            for (uint256 i; i < harness.length(); ++i) {
                assertEq(harness.indexOf(harness.at(i)), i + 1, "members are where their records say");
            }
        }
    }

    function _snapshot() internal view returns (uint64[] memory s) {
        s = new uint64[](harness.length());
        for (uint256 i; i < s.length; ++i) {
            s[i] = harness.at(i);
        }
    }
}
