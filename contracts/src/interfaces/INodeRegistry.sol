// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeCapabilities, NodeInfo, NodeStatus} from "../types/Types.sol";

/// @title Gantry nodes
/// @notice Providers register GPU nodes with a stake. An operator (cold wallet) owns the
/// stake and the earnings; the node's agent (the worker's hot key) heartbeats and works, and
/// is bound to the node only with its own consent. Nodes live in the JobMarket contract
/// (one contract: no cross-contract call on a job's path).
interface INodeRegistry {
    // ---------------------------------------------------------------- events

    /// @notice A node was registered and is Active.
    event NodeRegistered(
        uint64 indexed nodeId,
        address indexed operator,
        address indexed agent,
        NodeCapabilities capabilities,
        string metadataURI,
        uint96 stake,
        uint32 at
    );
    /// @notice The node's agent sent a heartbeat at chain time `at`.
    event NodeHeartbeat(uint64 indexed nodeId, uint32 at);
    /// @notice A heartbeat brought an Inactive node back to Active.
    event NodeReactivated(uint64 indexed nodeId, uint32 at);
    /// @notice The node was marked Inactive: by anyone once it missed its heartbeat timeout,
    /// by its own agent at any time, or by the market when a slash took its stake below the
    /// minimum (`by` is the market then). Jobs assigned to it before `at` are reclaimable,
    /// except after a slash below the minimum, which only stops new work.
    event NodeMarkedInactive(uint64 indexed nodeId, uint32 lastHeartbeat, address indexed by);
    /// @notice The operator changed the node's capabilities and metadata.
    event NodeCapabilitiesUpdated(uint64 indexed nodeId, NodeCapabilities capabilities, string metadataURI);
    /// @notice The node's agent key changed, with the new agent's consent.
    event NodeAgentChanged(uint64 indexed nodeId, address indexed agent);
    /// @notice Stake was added to the node.
    event NodeStakeAdded(uint64 indexed nodeId, uint96 amount, uint96 stake);
    /// @notice The node takes no new jobs; its stake unbonds until `unbondingEndsAt`.
    event NodeExitBegun(uint64 indexed nodeId, uint40 unbondingEndsAt);
    /// @notice The operator withdrew `amount` of the stake; `stake` is left (held for open
    /// disputes). The node is Exited when nothing is left.
    event NodeStakeWithdrawn(uint64 indexed nodeId, address indexed operator, uint96 amount, uint96 stake);
    /// @notice `amount` of the node's stake went to the treasury for a fault on job `jobId`
    /// (a reclaim, a lost dispute, or the charge of a reject); `stake` is left.
    event NodeSlashed(uint64 indexed nodeId, uint64 indexed jobId, uint96 amount, uint96 stake);
    /// @notice The operator withdrew the node's earnings.
    event NodeEarningsWithdrawn(uint64 indexed nodeId, address indexed operator, uint96 amount);
    /// @notice The fees the node's paid jobs owed went to the treasury's balance.
    event FeesSwept(uint64 indexed nodeId, uint96 amount);
    /// @notice The node joined the verification pool at 1-based position `index` (Active,
    /// serving WASM, free stake at least the policy's `poolFloor`).
    event PoolJoined(uint64 indexed nodeId, uint32 index);
    /// @notice The node left the verification pool (the last member took its place).
    event PoolLeft(uint64 indexed nodeId);

    // ---------------------------------------------------------------- errors

    error NodeRegistry_ZeroAddress();
    error NodeRegistry_StakeTooLow(uint96 stake, uint96 minStake);
    error NodeRegistry_InvalidCapabilities();
    error NodeRegistry_TextTooLong(uint256 length, uint256 max);
    error NodeRegistry_UnknownNode(uint64 nodeId);
    error NodeRegistry_NotOperator(uint64 nodeId, address caller);
    error NodeRegistry_NotAgent(uint64 nodeId, address caller);
    error NodeRegistry_NotActive(uint64 nodeId, NodeStatus status);
    error NodeRegistry_HeartbeatNotExpired(uint64 nodeId, uint256 expiresAt);
    error NodeRegistry_Exiting(uint64 nodeId);
    error NodeRegistry_NotExiting(uint64 nodeId);
    error NodeRegistry_StillUnbonding(uint64 nodeId, uint40 unbondingEndsAt);
    error NodeRegistry_NothingToWithdraw(uint64 nodeId);
    error NodeRegistry_ZeroAmount();
    error NodeRegistry_TooManyNodes();
    error NodeRegistry_ConsentExpired(uint256 deadline);
    error NodeRegistry_BadConsent(address agent);

    // ---------------------------------------------------------------- operator

    /// @notice Registers a node owned by the caller; pulls `stake` tokens from the caller.
    /// @param agent The worker's key. It must consent: be the caller, or have signed an
    /// EIP-712 `AgentConsent(operator, agent, nonce, deadline)` with its current nonce.
    /// @return nodeId The new node's id (starting at 1).
    function register(
        NodeCapabilities calldata capabilities,
        string calldata metadataURI,
        uint96 stake,
        address agent,
        uint256 consentDeadline,
        bytes calldata agentSignature
    ) external returns (uint64 nodeId);

    /// @notice Replaces the node's capabilities and metadata URI. Operator only.
    function updateCapabilities(uint64 nodeId, NodeCapabilities calldata capabilities, string calldata metadataURI)
        external;

    /// @notice Replaces the node's agent key, with the new agent's consent (as for
    /// `register`). Operator only.
    function setAgent(uint64 nodeId, address agent, uint256 consentDeadline, bytes calldata agentSignature) external;

    /// @notice Adds `amount` to the node's stake, pulled from the caller. Operator only.
    function topUpStake(uint64 nodeId, uint96 amount) external;

    /// @notice Stops new jobs and starts the unbonding period. Operator only.
    function beginExit(uint64 nodeId) external;

    /// @notice After unbonding (which outlasts every attempt and challenge window begun
    /// before the exit), pays back the stake not held for open disputes. Operator only; may be called again once
    /// those disputes end.
    function withdrawStake(uint64 nodeId) external;

    /// @notice Pays the node's earnings to its operator, and sweeps the fees it owes to the
    /// treasury. Operator only.
    function withdrawEarnings(uint64 nodeId) external;

    /// @notice Moves the fees the nodes' paid jobs owe into the treasury's balance. Anyone.
    function sweepFees(uint64[] calldata nodeIds) external;

    // ---------------------------------------------------------------- agent, anyone

    /// @notice Proves the node is alive; reactivates an Inactive node whose stake is at least
    /// the minimum. Agent only.
    function heartbeat(uint64 nodeId) external;

    /// @notice Marks an Active node Inactive. Anyone may do so once the node's last heartbeat
    /// is older than the timeout; the node's agent may do so at any time (graceful shutdown:
    /// the worker rejects the jobs it holds first; the ones it still holds after this are
    /// reclaimable, with the slash, even after a later heartbeat).
    function markInactive(uint64 nodeId) external;

    /// @notice Brings each node's membership of the verification pool up to date: a node
    /// that meets the rule (Active, serving WASM, free stake at least `poolFloor`) joins, one
    /// that does not leaves. Nodes join only through this (a worker serving verified jobs
    /// sends it for its own node); `beginExit`, `markInactive` and `updateCapabilities`
    /// take a node out at once, and this catches what jobs change (a slash, a dispute's
    /// hold) and a new floor. Anyone; unknown ids revert.
    function syncPool(uint64[] calldata nodeIds) external;

    // ---------------------------------------------------------------- views

    function getNode(uint64 nodeId) external view returns (NodeInfo memory);
    function nodeCount() external view returns (uint64);
    /// @notice How many nodes the verification pool holds.
    function poolSize() external view returns (uint256);
    /// @notice The pool's member at 0-based position `index`.
    function poolAt(uint256 index) external view returns (uint64);
    /// @notice Pool members that take WASM seats, and that take Docker seats (a member may
    /// take both): a replicated job is posted only while its kind has the minimum pool.
    function poolKinds() external view returns (uint32 wasm, uint32 sandboxed);
    /// @notice The nonce the agent's next consent must carry.
    function agentNonce(address agent) external view returns (uint256);
    /// @notice The EIP-712 digest an agent signs to consent to serve `operator`.
    function consentDigest(address operator, address agent, uint256 nonce, uint256 deadline)
        external
        view
        returns (bytes32);
}
