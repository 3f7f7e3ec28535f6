// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";

import {MarketStorage} from "./MarketStorage.sol";
import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {
    DETERMINISTIC_DOCKER,
    ENGINE_COUNT,
    ENGINE_DOCKER,
    NodeCapabilities,
    NodeInfo,
    NodeStatus
} from "./types/Types.sol";

/// @title NodeRegistry
/// @notice The nodes of the market: stake, liveness, agent binding and earnings. It runs
/// only inside the JobMarket, which forwards these calls to it with `delegatecall` (its own
/// address holds nothing and refuses calls), so the market is one address and a job's path
/// makes no cross-contract call. Split off to keep each contract under the 24 KiB limit.
contract NodeRegistry is INodeRegistry, MarketStorage {
    using SafeERC20 for IERC20;

    bytes32 public constant AGENT_CONSENT_TYPEHASH =
        keccak256("AgentConsent(address operator,address agent,uint256 nonce,uint256 deadline)");

    address private immutable _self = address(this);

    error NodeRegistry_OnlyThroughMarket();

    /// @dev Calls straight to this contract would act on its own (empty) storage and could
    /// strand tokens sent with them: only the market's delegatecall is served.
    modifier onlyDelegated() {
        if (address(this) == _self) revert NodeRegistry_OnlyThroughMarket();
        _;
    }

    constructor(IERC20 token_) MarketStorage(token_) {}

    // ================================================================ operator

    /// @inheritdoc INodeRegistry
    function register(
        NodeCapabilities calldata capabilities,
        string calldata metadataURI,
        uint96 stake,
        address agent,
        uint256 consentDeadline,
        bytes calldata agentSignature
    ) external nonReentrant onlyDelegated returns (uint64 nodeId) {
        _whenNotPaused();
        _checkCapabilities(capabilities);
        _checkText(bytes(metadataURI).length);
        NodeParams memory p = _nodeParams;
        if (stake < p.minStake || stake == 0) revert NodeRegistry_StakeTooLow(stake, p.minStake);
        _consume(agent, consentDeadline, agentSignature);

        nodeId = p.nextNodeId;
        // A job's state packs its node id into 48 bits.
        if (nodeId >= 1 << 48) revert NodeRegistry_TooManyNodes();
        _nodeParams.nextNodeId = nodeId + 1;
        NodeRecord storage node = _nodes[nodeId];
        uint32 now32 = uint32(block.timestamp);
        _setCapabilities(node, NodeStatus.Active, capabilities);
        node.lastHeartbeat = now32;
        node.agent = agent;
        node.stake = stake;
        node.registeredAt = uint40(block.timestamp);
        node.operator = msg.sender;
        emit NodeRegistered(nodeId, msg.sender, agent, capabilities, metadataURI, stake, now32);

        token.safeTransferFrom(msg.sender, address(this), stake);
    }

    /// @inheritdoc INodeRegistry
    function updateCapabilities(uint64 nodeId, NodeCapabilities calldata capabilities, string calldata metadataURI)
        external
        onlyDelegated
    {
        NodeRecord storage node = _operatorNode(nodeId);
        _checkCapabilities(capabilities);
        _checkText(bytes(metadataURI).length);
        // Other seats it takes (WASM, sandboxed Docker): out of the pool first
        // (`_poolKinds` counts it by the kinds it joined with); `syncPool` takes it back in.
        if ((capabilities.engines ^ node.hot.engines) & VERIFIABLE != 0) _poolDrop(nodeId, node);
        _setCapabilities(node, node.hot.status, capabilities);
        emit NodeCapabilitiesUpdated(nodeId, capabilities, metadataURI);
        if (!_poolRule(node)) _poolDrop(nodeId, node);
    }

    /// @inheritdoc INodeRegistry
    function setAgent(uint64 nodeId, address agent, uint256 consentDeadline, bytes calldata agentSignature)
        external
        onlyDelegated
    {
        NodeRecord storage node = _operatorNode(nodeId);
        _consume(agent, consentDeadline, agentSignature);
        node.agent = agent;
        emit NodeAgentChanged(nodeId, agent);
    }

    /// @inheritdoc INodeRegistry
    function topUpStake(uint64 nodeId, uint96 amount) external nonReentrant onlyDelegated {
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
    function beginExit(uint64 nodeId) external onlyDelegated {
        NodeRecord storage node = _operatorNode(nodeId);
        NodeStatus status = node.hot.status;
        if (status == NodeStatus.Exiting || status == NodeStatus.Exited) revert NodeRegistry_Exiting(nodeId);
        uint40 endsAt = uint40(block.timestamp) + _nodeParams.unbondingPeriod;
        node.hot.status = NodeStatus.Exiting;
        node.unbondingEndsAt = endsAt;
        emit NodeExitBegun(nodeId, endsAt);
        _poolDrop(nodeId, node);
    }

    /// @inheritdoc INodeRegistry
    function withdrawStake(uint64 nodeId) external nonReentrant onlyDelegated {
        NodeRecord storage node = _operatorNode(nodeId);
        if (node.hot.status != NodeStatus.Exiting) revert NodeRegistry_NotExiting(nodeId);
        // The unbonding period outlasts any attempt and challenge window begun before the
        // exit (see `MAX_RUNTIME`); open disputes keep their exposure held.
        if (block.timestamp < node.unbondingEndsAt) revert NodeRegistry_StillUnbonding(nodeId, node.unbondingEndsAt);
        uint96 held = node.locked;
        uint96 amount = node.stake - held;
        if (amount == 0) revert NodeRegistry_NothingToWithdraw(nodeId);
        node.stake = held;
        if (held == 0) node.hot.status = NodeStatus.Exited;
        emit NodeStakeWithdrawn(nodeId, msg.sender, amount, held);

        token.safeTransfer(msg.sender, amount);
    }

    /// @inheritdoc INodeRegistry
    function withdrawEarnings(uint64 nodeId) external nonReentrant onlyDelegated {
        NodeRecord storage node = _operatorNode(nodeId);
        uint96 amount = node.earnings;
        if (amount == 0) revert NodeRegistry_NothingToWithdraw(nodeId);
        node.earnings = 0;
        _sweep(node, nodeId);
        emit NodeEarningsWithdrawn(nodeId, msg.sender, amount);

        token.safeTransfer(msg.sender, amount);
    }

    /// @inheritdoc INodeRegistry
    function sweepFees(uint64[] calldata nodeIds) external onlyDelegated {
        for (uint256 i; i < nodeIds.length; ++i) {
            _sweep(_existingNode(nodeIds[i]), nodeIds[i]);
        }
    }

    // ================================================================ agent, anyone

    /// @inheritdoc INodeRegistry
    function heartbeat(uint64 nodeId) external onlyDelegated {
        NodeRecord storage node = _existingNode(nodeId);
        if (msg.sender != node.agent) revert NodeRegistry_NotAgent(nodeId, msg.sender);
        NodeStatus status = node.hot.status;
        if (status == NodeStatus.Exited) revert NodeRegistry_NotActive(nodeId, status);
        uint32 now32 = uint32(block.timestamp);
        node.lastHeartbeat = now32;
        if (status == NodeStatus.Inactive && node.stake >= _nodeParams.minStake) {
            node.hot.status = NodeStatus.Active;
            emit NodeReactivated(nodeId, now32);
        }
        emit NodeHeartbeat(nodeId, now32);
    }

    /// @inheritdoc INodeRegistry
    function markInactive(uint64 nodeId) external onlyDelegated {
        NodeRecord storage node = _existingNode(nodeId);
        NodeStatus status = node.hot.status;
        if (status != NodeStatus.Active) revert NodeRegistry_NotActive(nodeId, status);
        uint32 lastHeartbeat = node.lastHeartbeat;
        // The agent may take its own node offline at any time (graceful shutdown).
        if (msg.sender != node.agent) {
            uint256 expiresAt = uint256(lastHeartbeat) + _nodeParams.heartbeatTimeout;
            if (block.timestamp <= expiresAt) revert NodeRegistry_HeartbeatNotExpired(nodeId, expiresAt);
        }
        node.hot.status = NodeStatus.Inactive;
        node.inactiveSince = uint40(block.timestamp);
        emit NodeMarkedInactive(nodeId, lastHeartbeat, msg.sender);
        _poolDrop(nodeId, node);
    }

    /// @inheritdoc INodeRegistry
    function syncPool(uint64[] calldata nodeIds) external onlyDelegated {
        for (uint256 i; i < nodeIds.length; ++i) {
            _poolSync(nodeIds[i], _existingNode(nodeIds[i]));
        }
    }

    // ================================================================ views

    /// @inheritdoc INodeRegistry
    function getNode(uint64 nodeId) external view returns (NodeInfo memory) {
        NodeRecord storage node = _nodes[nodeId];
        NodeHot memory hot = node.hot;
        return NodeInfo({
            operator: node.operator,
            agent: node.agent,
            status: hot.status,
            lastHeartbeat: node.lastHeartbeat,
            stake: node.stake,
            lockedStake: node.locked,
            earnings: node.earnings,
            feesOwed: node.feesOwed,
            registeredAt: node.registeredAt,
            gpuModelTag: hot.gpuModel,
            engines: hot.engines,
            inactiveSince: node.inactiveSince,
            unbondingEndsAt: node.unbondingEndsAt,
            poolIndex: node.poolIndex
        });
    }

    /// @inheritdoc INodeRegistry
    function nodeCount() external view returns (uint64) {
        return _nodeParams.nextNodeId - 1;
    }

    /// @inheritdoc INodeRegistry
    function poolSize() external view returns (uint256) {
        return _pool.length;
    }

    /// @inheritdoc INodeRegistry
    function poolAt(uint256 index) external view returns (uint64) {
        return _pool[index];
    }

    /// @inheritdoc INodeRegistry
    function poolKinds() external view returns (uint32 wasm, uint32 sandboxed) {
        return (_poolKinds.wasm, _poolKinds.sandboxed);
    }

    /// @inheritdoc INodeRegistry
    function agentNonce(address agent) external view returns (uint256) {
        return _agentNonces[agent];
    }

    /// @inheritdoc INodeRegistry
    function consentDigest(address operator, address agent, uint256 nonce, uint256 deadline)
        public
        view
        returns (bytes32)
    {
        return _hashTypedDataV4(keccak256(abi.encode(AGENT_CONSENT_TYPEHASH, operator, agent, nonce, deadline)));
    }

    // ================================================================ internal

    /// @dev Stores what `assign` checks of the capabilities, with the status, in slot 0.
    function _setCapabilities(NodeRecord storage node, NodeStatus status, NodeCapabilities calldata capabilities)
        internal
    {
        node.hot = NodeHot({
            status: status,
            gpuCount: capabilities.gpuCount,
            vramMiB: capabilities.vramMiB,
            cpuCores: capabilities.cpuCores,
            ramMiB: capabilities.ramMiB,
            pricePerGpuHour: capabilities.pricePerGpuHour,
            gpuModel: _modelTag(capabilities.gpuModel),
            engines: capabilities.engines
        });
    }

    /// @dev Moves the fees the node's jobs owe to the treasury's balance.
    function _sweep(NodeRecord storage node, uint64 nodeId) internal {
        uint96 fees = node.feesOwed;
        if (fees == 0) return;
        node.feesOwed = 0;
        _treasury.balance += fees;
        emit FeesSwept(nodeId, fees);
    }

    /// @dev The agent's consent: its own call, or its EIP-712 signature with its nonce.
    function _consume(address agent, uint256 deadline, bytes calldata signature) internal {
        if (agent == address(0)) revert NodeRegistry_ZeroAddress();
        if (agent == msg.sender) return;
        if (block.timestamp > deadline) revert NodeRegistry_ConsentExpired(deadline);
        uint256 nonce = _agentNonces[agent]++;
        bytes32 digest = consentDigest(msg.sender, agent, nonce, deadline);
        if (!SignatureChecker.isValidSignatureNow(agent, digest, signature)) revert NodeRegistry_BadConsent(agent);
    }

    function _checkCapabilities(NodeCapabilities calldata capabilities) internal pure {
        // A GPU model needs GPUs with memory and the other way round; every node runs at
        // least one job with at least one core, on at least one engine it knows; the
        // deterministic Docker bit only beside the Docker bit.
        bool hasModel = capabilities.gpuModel != bytes32(0);
        bool hasGpus = capabilities.gpuCount != 0;
        uint8 engines = capabilities.engines & ~uint8(1 << DETERMINISTIC_DOCKER);
        bool sandbox = engines != capabilities.engines;
        if (
            hasModel != hasGpus || (hasGpus && capabilities.vramMiB == 0) || capabilities.cpuCores == 0
                || capabilities.maxConcurrentJobs == 0 || engines == 0 || engines >> ENGINE_COUNT != 0
                || (sandbox && (engines >> ENGINE_DOCKER) & 1 == 0)
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
