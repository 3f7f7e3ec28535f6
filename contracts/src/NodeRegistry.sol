// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {NodeCapabilities, NodeInfo, NodeStatus, RegistryParams, Release} from "./types/Types.sol";

/// @title NodeRegistry
/// @notice Staked GPU nodes, their liveness and their reputation. The JobMarket (MARKET_ROLE)
/// takes and releases job slots and slashes faulty nodes; slashed tokens go to the market.
contract NodeRegistry is INodeRegistry, AccessControl, Pausable, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    bytes32 public constant MARKET_ROLE = keccak256("MARKET_ROLE");
    bytes32 public constant PAUSER_ROLE = keccak256("PAUSER_ROLE");

    uint16 internal constant BPS = 10_000;

    /// @dev Storage layout: the fields every job touches share the first slot.
    struct NodeSlot0 {
        address agent;
        NodeStatus status;
        uint8 activeJobs;
        uint16 settlingJobs;
        uint32 completedJobs;
        uint32 lastHeartbeat;
    }

    struct NodeRecord {
        NodeSlot0 hot;
        address operator;
        uint96 stake;
        NodeCapabilities capabilities;
        uint32 failedJobs;
        uint96 totalSlashed;
        uint40 unbondingEndsAt;
    }

    /// @notice The staking token (also the market's payment token).
    IERC20 public immutable token;

    RegistryParams internal _params;
    /// @dev Starts at 1 so that the first registration does not pay for a zero-to-nonzero write.
    uint64 internal _nextNodeId = 1;
    mapping(uint64 nodeId => NodeRecord) internal _nodes;

    constructor(IERC20 token_, address admin, RegistryParams memory params_) {
        if (address(token_) == address(0) || admin == address(0)) revert NodeRegistry_ZeroAddress();
        token = token_;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _setParams(params_);
    }

    // ================================================================ operator

    /// @inheritdoc INodeRegistry
    function register(address agent, NodeCapabilities calldata capabilities, string calldata metadataURI, uint96 stake)
        external
        whenNotPaused
        nonReentrant
        returns (uint64 nodeId)
    {
        if (agent == address(0)) revert NodeRegistry_ZeroAddress();
        _checkCapabilities(capabilities);
        if (stake < _params.minStake) revert NodeRegistry_StakeTooLow(stake, _params.minStake);

        nodeId = _nextNodeId++;
        NodeRecord storage node = _nodes[nodeId];
        uint32 now32 = uint32(block.timestamp);
        node.hot = NodeSlot0({
            agent: agent,
            status: NodeStatus.Active,
            activeJobs: 0,
            settlingJobs: 0,
            completedJobs: 0,
            lastHeartbeat: now32
        });
        node.operator = msg.sender;
        node.stake = stake;
        node.capabilities = capabilities;
        emit NodeRegistered(nodeId, msg.sender, agent, capabilities, metadataURI, stake, now32);

        token.safeTransferFrom(msg.sender, address(this), stake);
    }

    /// @inheritdoc INodeRegistry
    function updateCapabilities(uint64 nodeId, NodeCapabilities calldata capabilities, string calldata metadataURI)
        external
    {
        NodeRecord storage node = _operatorNode(nodeId);
        _checkCapabilities(capabilities);
        node.capabilities = capabilities;
        emit NodeCapabilitiesUpdated(nodeId, capabilities, metadataURI);
    }

    /// @inheritdoc INodeRegistry
    function setAgent(uint64 nodeId, address agent) external {
        NodeRecord storage node = _operatorNode(nodeId);
        if (agent == address(0)) revert NodeRegistry_ZeroAddress();
        node.hot.agent = agent;
        emit NodeAgentChanged(nodeId, agent);
    }

    /// @inheritdoc INodeRegistry
    function topUpStake(uint64 nodeId, uint96 amount) external nonReentrant {
        NodeRecord storage node = _operatorNode(nodeId);
        if (amount == 0) revert NodeRegistry_ZeroAmount();
        NodeStatus status = node.hot.status;
        if (status == NodeStatus.Exiting || status == NodeStatus.Exited) revert NodeRegistry_Exiting(nodeId);
        uint96 stake = node.stake + amount;
        node.stake = stake;
        emit NodeStakeAdded(nodeId, amount, stake);

        token.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @inheritdoc INodeRegistry
    function beginExit(uint64 nodeId) external {
        NodeRecord storage node = _operatorNode(nodeId);
        NodeStatus status = node.hot.status;
        if (status == NodeStatus.Exiting || status == NodeStatus.Exited) revert NodeRegistry_Exiting(nodeId);
        uint40 endsAt = uint40(block.timestamp) + _params.unbondingPeriod;
        node.hot.status = NodeStatus.Exiting;
        node.unbondingEndsAt = endsAt;
        emit NodeExitBegun(nodeId, endsAt);
    }

    /// @inheritdoc INodeRegistry
    function withdrawStake(uint64 nodeId) external nonReentrant {
        NodeRecord storage node = _operatorNode(nodeId);
        NodeSlot0 memory hot = node.hot;
        if (hot.status != NodeStatus.Exiting) revert NodeRegistry_NotExiting(nodeId);
        if (block.timestamp < node.unbondingEndsAt) revert NodeRegistry_StillUnbonding(nodeId, node.unbondingEndsAt);
        if (hot.activeJobs != 0 || hot.settlingJobs != 0) {
            revert NodeRegistry_HasJobs(nodeId, hot.activeJobs, hot.settlingJobs);
        }
        uint96 amount = node.stake;
        node.stake = 0;
        node.hot.status = NodeStatus.Exited;
        emit NodeStakeWithdrawn(nodeId, msg.sender, amount);

        if (amount != 0) token.safeTransfer(msg.sender, amount);
    }

    // ================================================================ agent, anyone

    /// @inheritdoc INodeRegistry
    function heartbeat(uint64 nodeId) external {
        NodeRecord storage node = _existingNode(nodeId);
        NodeSlot0 memory hot = node.hot;
        if (msg.sender != hot.agent) revert NodeRegistry_NotAgent(nodeId, msg.sender);
        if (hot.status == NodeStatus.Exited) revert NodeRegistry_NotActive(nodeId, hot.status);
        uint32 now32 = uint32(block.timestamp);
        node.hot.lastHeartbeat = now32;
        if (hot.status == NodeStatus.Inactive) {
            node.hot.status = NodeStatus.Active;
            emit NodeReactivated(nodeId, now32);
        }
        emit NodeHeartbeat(nodeId, now32);
    }

    /// @inheritdoc INodeRegistry
    function markInactive(uint64 nodeId) external {
        NodeRecord storage node = _existingNode(nodeId);
        NodeSlot0 memory hot = node.hot;
        if (hot.status != NodeStatus.Active) revert NodeRegistry_NotActive(nodeId, hot.status);
        // The agent may take its own node offline at any time (graceful shutdown).
        if (msg.sender != hot.agent) {
            uint256 expiresAt = uint256(hot.lastHeartbeat) + _params.heartbeatTimeout;
            if (block.timestamp <= expiresAt) revert NodeRegistry_HeartbeatNotExpired(nodeId, expiresAt);
        }
        node.hot.status = NodeStatus.Inactive;
        emit NodeMarkedInactive(nodeId, hot.lastHeartbeat, msg.sender);
    }

    // ================================================================ market

    /// @inheritdoc INodeRegistry
    function takeSlot(uint64 nodeId)
        external
        onlyRole(MARKET_ROLE)
        returns (address agent, NodeCapabilities memory capabilities)
    {
        NodeRecord storage node = _existingNode(nodeId);
        NodeSlot0 memory hot = node.hot;
        if (hot.status != NodeStatus.Active) revert NodeRegistry_NotActive(nodeId, hot.status);
        // A node slashed below the minimum has too little at stake to take more work.
        uint96 minStake = _params.minStake;
        if (node.stake < minStake) revert NodeRegistry_StakeBelowMinimum(nodeId, node.stake, minStake);
        capabilities = node.capabilities;
        if (hot.activeJobs >= capabilities.maxConcurrentJobs) {
            revert NodeRegistry_NoFreeSlot(nodeId, hot.activeJobs, capabilities.maxConcurrentJobs);
        }
        node.hot.activeJobs = hot.activeJobs + 1;
        agent = hot.agent;
    }

    /// @inheritdoc INodeRegistry
    function markSettling(uint64 nodeId) external onlyRole(MARKET_ROLE) returns (address agent) {
        NodeRecord storage node = _existingNode(nodeId);
        NodeSlot0 memory hot = node.hot;
        if (hot.activeJobs == 0) revert NodeRegistry_NoActiveJob(nodeId);
        hot.activeJobs -= 1;
        hot.settlingJobs += 1;
        node.hot = hot;
        agent = hot.agent;
    }

    /// @inheritdoc INodeRegistry
    function release(uint64 nodeId, bool settling, Release outcome)
        external
        onlyRole(MARKET_ROLE)
        returns (address operator, uint96 slashed)
    {
        NodeRecord storage node = _existingNode(nodeId);
        NodeSlot0 memory hot = node.hot;
        if (settling) {
            if (hot.settlingJobs == 0) revert NodeRegistry_NoSettlingJob(nodeId);
            hot.settlingJobs -= 1;
        } else {
            if (hot.activeJobs == 0) revert NodeRegistry_NoActiveJob(nodeId);
            hot.activeJobs -= 1;
        }
        if (outcome == Release.Completed) hot.completedJobs += 1;
        node.hot = hot;
        operator = node.operator;

        if (outcome == Release.Faulted) {
            node.failedJobs += 1;
            uint96 stake = node.stake;
            slashed = uint96((uint256(stake) * _params.slashBps) / BPS);
            if (slashed != 0) {
                stake -= slashed;
                node.stake = stake;
                node.totalSlashed += slashed;
                emit NodeSlashed(nodeId, slashed, stake);
                token.safeTransfer(msg.sender, slashed);
            }
        }
    }

    // ================================================================ admin

    /// @inheritdoc INodeRegistry
    function setParams(RegistryParams calldata params_) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setParams(params_);
    }

    function pause() external onlyRole(PAUSER_ROLE) {
        _pause();
    }

    function unpause() external onlyRole(PAUSER_ROLE) {
        _unpause();
    }

    // ================================================================ views

    /// @inheritdoc INodeRegistry
    function getNode(uint64 nodeId) external view returns (NodeInfo memory) {
        NodeRecord storage node = _nodes[nodeId];
        NodeSlot0 memory hot = node.hot;
        return NodeInfo({
            operator: node.operator,
            agent: hot.agent,
            status: hot.status,
            activeJobs: hot.activeJobs,
            settlingJobs: hot.settlingJobs,
            lastHeartbeat: hot.lastHeartbeat,
            stake: node.stake,
            completedJobs: hot.completedJobs,
            failedJobs: node.failedJobs,
            totalSlashed: node.totalSlashed,
            unbondingEndsAt: node.unbondingEndsAt,
            capabilities: node.capabilities
        });
    }

    /// @inheritdoc INodeRegistry
    function params() external view returns (RegistryParams memory) {
        return _params;
    }

    /// @inheritdoc INodeRegistry
    function nodeCount() external view returns (uint64) {
        return _nextNodeId - 1;
    }

    /// @inheritdoc INodeRegistry
    function statusOf(uint64 nodeId) external view returns (NodeStatus) {
        return _nodes[nodeId].hot.status;
    }

    /// @inheritdoc INodeRegistry
    function agentOf(uint64 nodeId) external view returns (address) {
        return _nodes[nodeId].hot.agent;
    }

    // ================================================================ internal

    function _setParams(RegistryParams memory params_) internal {
        if (params_.slashBps > BPS || params_.heartbeatTimeout == 0) revert NodeRegistry_InvalidParams();
        _params = params_;
        emit RegistryParamsUpdated(params_);
    }

    function _checkCapabilities(NodeCapabilities calldata capabilities) internal pure {
        // A GPU model needs GPUs with memory and the other way round; every node runs at
        // least one job with at least one core.
        bool hasModel = capabilities.gpuModel != bytes32(0);
        bool hasGpus = capabilities.gpuCount != 0;
        if (
            hasModel != hasGpus || (hasGpus && capabilities.vramMiB == 0) || capabilities.cpuCores == 0
                || capabilities.maxConcurrentJobs == 0
        ) revert NodeRegistry_InvalidCapabilities();
    }

    function _existingNode(uint64 nodeId) internal view returns (NodeRecord storage node) {
        node = _nodes[nodeId];
        if (node.hot.status == NodeStatus.None) revert NodeRegistry_UnknownNode(nodeId);
    }

    function _operatorNode(uint64 nodeId) internal view returns (NodeRecord storage node) {
        node = _existingNode(nodeId);
        if (msg.sender != node.operator) revert NodeRegistry_NotOperator(nodeId, msg.sender);
    }
}
