// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "forge-std/Vm.sol";
import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

import {Base} from "../Base.t.sol";
import {JobView} from "../JobView.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {JobState, JobTerms, NodeCapabilities, NodeInfo, NodeStatus} from "../../src/types/Types.sol";

/// @notice Shared fixtures of the node calls' unit tests (`NodeRegistry.<entry>.t.sol`):
/// the node calls are served at the market's address, so every event is expected from it,
/// and every step folds its logs (`sync`) so that `assertReplay` can check the money.
abstract contract NodeRegistryUnitTest is Base {
    using JobView for JobTerms;
    using JobView for JobState;

    string internal constant META = "ipfs://node-meta";

    // ---------------------------------------------------------------- capabilities

    /// Capabilities in the struct's order, as `h100Node`.
    function a100Node() internal pure returns (NodeCapabilities memory) {
        return NodeCapabilities(A100, 4, 40_960, 32, 262_144, 1e6, 1, DOCKER_ONLY);
    }

    function cpuOnlyNode() internal pure returns (NodeCapabilities memory) {
        return NodeCapabilities(bytes32(0), 0, 0, 16, 65_536, 0, 4, DOCKER_AND_WASM);
    }

    /// The tag the market keeps of a GPU model: the first 7 bytes of keccak256(abi.encode(model)).
    function tagOf(bytes32 model) internal pure returns (bytes6) {
        return model == bytes32(0) ? bytes6(0) : bytes6(keccak256(abi.encode(model)));
    }

    // ---------------------------------------------------------------- expectations

    /// The next event is the market's (node events are emitted at the market's address).
    function expectNodeEmit() internal {
        vm.expectEmit(true, true, true, true, address(market));
    }

    function expectUnknownNode(uint64 id) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_UnknownNode.selector, id));
    }

    function expectNotOperator(uint64 id, address caller) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotOperator.selector, id, caller));
    }

    function expectNotAgent(uint64 id, address caller) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotAgent.selector, id, caller));
    }

    function expectNotActive(uint64 id, NodeStatus current) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotActive.selector, id, current));
    }

    function expectExiting(uint64 id) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_Exiting.selector, id));
    }

    function expectNotExiting(uint64 id) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotExiting.selector, id));
    }

    function expectNothingToWithdraw(uint64 id) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NothingToWithdraw.selector, id));
    }

    function expectHeartbeatNotExpired(uint64 id, uint256 expiresAt) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_HeartbeatNotExpired.selector, id, expiresAt));
    }

    function expectBadConsent(address agent_) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_BadConsent.selector, agent_));
    }

    function assertStatus(uint64 id, NodeStatus expected) internal view {
        assertEq(uint8(nodes.getNode(id).status), uint8(expected), "status");
    }

    /// The node's info, checked for its operator, agent and status.
    function assertedNode(uint64 id, address operator_, address agent_, NodeStatus status_)
        internal
        view
        returns (NodeInfo memory n)
    {
        n = nodes.getNode(id);
        assertEq(n.operator, operator_);
        assertEq(n.agent, agent_);
        assertEq(uint8(n.status), uint8(status_));
    }

    /// The market's only log since the last fold (folded) has topic `topic` and the amount
    /// `amount` as its data.
    function assertOnlyLog(bytes32 topic, uint96 amount) internal {
        Vm.Log[] memory logs = marketLogs();
        assertEq(logs.length, 1);
        assertEq(logs[0].topics[0], topic);
        assertEq(abi.decode(logs[0].data, (uint96)), amount);
    }

    /// The market's logs recorded since the last fold, folded (the test contract's own
    /// `emit`s for `vm.expectEmit` are recorded too and left out).
    function marketLogs() internal returns (Vm.Log[] memory logs) {
        Vm.Log[] memory all = vm.getRecordedLogs();
        logs = new Vm.Log[](all.length);
        uint256 n;
        for (uint256 i; i < all.length; ++i) {
            if (all[i].emitter == address(market)) {
                apply_(all[i]);
                logs[n++] = all[i];
            }
        }
        assembly ("memory-safe") {
            mstore(logs, n)
        }
    }

    // ---------------------------------------------------------------- consent

    /// `agentKey`'s EIP-712 consent to serve `owner`, with an explicit nonce.
    function signConsent(address owner, uint256 agentKey, uint256 nonce, uint256 deadline)
        internal
        view
        returns (bytes memory)
    {
        bytes32 digest = nodes.consentDigest(owner, vm.addr(agentKey), nonce, deadline);
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(agentKey, digest);
        return abi.encodePacked(r, s, v);
    }

    // ---------------------------------------------------------------- steps (each folds)

    /// `owner` registers a node it serves itself (no signature).
    function registerSelf(address owner, NodeCapabilities memory caps, uint96 stake) internal returns (uint64 id) {
        fund(owner, stake);
        vm.prank(owner);
        id = nodes.register(caps, META, stake, owner, 0, "");
        sync();
    }

    /// Lets the node's heartbeat expire (time never goes back) and has a stranger mark it Inactive.
    function makeInactive(uint64 id) internal {
        uint256 expired = uint256(nodes.getNode(id).lastHeartbeat) + HEARTBEAT_TIMEOUT + 1;
        if (block.timestamp < expired) vm.warp(expired);
        markInactive(id, stranger);
    }

    /// Begins the node's exit and waits out the unbonding period.
    function exitAndUnbond(uint64 id) internal {
        beginExit(id);
        vm.warp(nodes.getNode(id).unbondingEndsAt);
    }

    /// Exits the node and takes its whole stake back.
    function exitAndWithdraw(uint64 id) internal {
        exitAndUnbond(id);
        withdrawStake(id);
    }

    /// A job of `bounty` run to completion on node `id`: (jobId, payout, fee).
    function paidJob(uint64 id, uint96 bounty) internal returns (uint64 jobId, uint96 payout, uint96 fee) {
        jobId = postJob(h100Job(), bounty, uint40(block.timestamp + 1 days));
        assign(jobId, id);
        submit(jobId);
        fee = uint96((uint256(bounty) * policies[jobs[jobId].terms.policy()].feeBps) / 10_000);
        payout = bounty - fee;
        finalize(jobId);
    }

    /// A job assigned to node `id` whose runtime is over, reclaimed (a slash of `SLASH_BPS`
    /// of the stake not held): the amount slashed.
    function slashOnce(uint64 id) internal returns (uint96 slashed) {
        uint64 jobId = postJob();
        assign(jobId, id);
        NodeInfo memory before = nodes.getNode(id);
        vm.warp(jobs[jobId].state.until() + 1);
        reclaim(jobId);
        slashed = before.stake - nodes.getNode(id).stake;
    }
}

/// @notice The fixture node: `operator`'s H100 node served by `agent`, staked `STAKE`.
abstract contract NodeRegistryNodeTest is NodeRegistryUnitTest {
    uint64 internal nodeId;
    uint32 internal registeredAt;

    function setUp() public virtual override {
        super.setUp();
        nodeId = registerNode();
        registeredAt = uint32(block.timestamp);
    }
}

/// @notice A contract agent (a smart wallet) that consents through ERC-1271: it accepts what
/// its owner key signed, or anything at all when `acceptAll` is set.
contract ConsentWallet is IERC1271 {
    address public immutable owner;
    bool public acceptAll;

    constructor(address owner_) {
        owner = owner_;
    }

    function setAcceptAll(bool acceptAll_) external {
        acceptAll = acceptAll_;
    }

    function isValidSignature(bytes32 hash, bytes memory signature) external view returns (bytes4) {
        if (acceptAll) return IERC1271.isValidSignature.selector;
        (address recovered, ECDSA.RecoverError err,) = ECDSA.tryRecover(hash, signature);
        return err == ECDSA.RecoverError.NoError && recovered == owner ? IERC1271.isValidSignature.selector : bytes4(0);
    }
}
