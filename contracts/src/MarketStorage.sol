// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";

import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {JobPolicy, NodeCapabilities, NodeStatus} from "./types/Types.sol";

/// @title MarketStorage
/// @notice The storage of the market and the rules both of its halves share. `JobMarket`
/// (jobs, admin) and `NodeRegistry` (nodes; run by the market through `delegatecall`, as
/// Compound's Comet runs its extension) inherit it and declare no storage of their own, so
/// both see the same layout. Slots are packed for the job's path: see each struct.
abstract contract MarketStorage is AccessControl, EIP712, ReentrancyGuardTransient {
    bytes32 public constant MATCHER_ROLE = keccak256("MATCHER_ROLE");
    bytes32 public constant ARBITER_ROLE = keccak256("ARBITER_ROLE");
    bytes32 public constant PAUSER_ROLE = keccak256("PAUSER_ROLE");

    uint16 internal constant BPS = 10_000;
    /// @notice Longest metadata URI, result URI or reject reason, bytes.
    uint256 public constant MAX_TEXT_BYTES = 256;

    /// @dev What `postJob` reads and writes, one slot: the current policy's version and
    /// the two of its fields a job's state carries.
    struct Config {
        uint48 nextJobId;
        bool paused;
        uint32 policy;
        uint16 feeBps;
        uint32 challengeWindow;
    }

    /// @dev One slot, never zero once deployed: crediting it costs no fresh write.
    struct Treasury {
        address account;
        uint96 balance;
    }

    /// @dev The node rules' parameters, one slot.
    struct NodeParams {
        uint96 minStake;
        uint32 heartbeatTimeout;
        uint32 unbondingPeriod;
        uint64 nextNodeId;
    }

    /// @dev Slot 0 of a node: everything `assign` reads (it writes nothing of the node):
    /// the status and the capabilities, so the matcher passes none.
    struct NodeHot {
        NodeStatus status;
        uint16 gpuCount;
        uint32 vramMiB;
        uint16 cpuCores;
        uint32 ramMiB;
        uint96 pricePerGpuHour;
        /// `_modelTag` of the GPU model. Tags need no collision resistance: capabilities are
        /// the operator's own word, and neither a matcher nor a submitter can change either
        /// side of the comparison.
        bytes6 gpuModel;
        /// `NodeCapabilities.engines`.
        uint8 engines;
    }

    /// @dev Five slots; a job's path reads slot 0 (assign) and slot 1 (submit) and writes
    /// slot 2 (pay: the payout and the fee both land there, the fee owed to the treasury
    /// until swept). Slot 2 holds the registration time, so it is never zero and a first
    /// payment pays no zero-to-nonzero write.
    struct NodeRecord {
        NodeHot hot;
        address agent;
        uint96 stake;
        uint96 earnings;
        uint96 feesOwed;
        uint40 registeredAt;
        address operator;
        uint96 locked;
        uint32 lastHeartbeat;
        uint40 inactiveSince;
        uint40 unbondingEndsAt;
    }

    /// @notice The payment and staking token.
    IERC20 public immutable token;

    Config internal _config;
    Treasury internal _treasury;
    NodeParams internal _nodeParams;
    mapping(uint32 version => JobPolicy) internal _policies;
    mapping(uint64 jobId => bytes32 stateHash) internal _jobs;
    mapping(uint64 jobId => mapping(uint64 nodeId => bool)) internal _barred;
    /// @dev Stake held from the node of a Disputed job.
    mapping(uint64 jobId => uint96) internal _exposure;
    mapping(address account => uint256) internal _credits;
    mapping(uint64 nodeId => NodeRecord) internal _nodes;
    mapping(address agent => uint256) internal _agentNonces;

    constructor(IERC20 token_) EIP712("Gantry", "2") {
        token = token_;
    }

    /// @dev Takes `amount` of the node's stake to the treasury. A node left below the
    /// minimum stake is made Inactive (no new work), without making its running jobs
    /// reclaimable (`inactiveSince` is not touched).
    function _slash(NodeRecord storage node, uint64 nodeId, uint64 jobId, uint96 amount) internal {
        if (amount == 0) return;
        uint96 stake = node.stake - amount;
        node.stake = stake;
        _treasury.balance += amount;
        emit INodeRegistry.NodeSlashed(nodeId, jobId, amount, stake);
        if (stake < _nodeParams.minStake && node.hot.status == NodeStatus.Active) {
            node.hot.status = NodeStatus.Inactive;
            emit INodeRegistry.NodeMarkedInactive(nodeId, node.lastHeartbeat, address(this));
        }
    }

    /// @dev `bps` of the node's stake that is not held for disputes.
    function _slashable(NodeRecord storage node, uint256 bps) internal view returns (uint96) {
        return uint96((uint256(node.stake - node.locked) * bps) / BPS);
    }

    function _whenNotPaused() internal view {
        if (_config.paused) revert IJobMarket.JobMarket_Paused();
    }

    function _checkText(uint256 length) internal pure {
        if (length > MAX_TEXT_BYTES) revert INodeRegistry.NodeRegistry_TextTooLong(length, MAX_TEXT_BYTES);
    }

    /// @dev 6 bytes of keccak256 of a GPU model id; 0 for no model.
    function _modelTag(bytes32 model) internal pure returns (bytes6) {
        return model == bytes32(0) ? bytes6(0) : bytes6(keccak256(abi.encode(model)));
    }
}
