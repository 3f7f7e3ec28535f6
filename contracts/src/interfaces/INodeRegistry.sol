// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeCapabilities, NodeInfo, NodeStatus, RegistryParams, Release} from "../types/Types.sol";

/// @title Gantry node registry
/// @notice Providers register GPU nodes with a stake. An operator (cold wallet) owns the
/// stake and receives pay; the node's agent (the worker's hot key) heartbeats and works.
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
    /// or by its own agent at any time (`by` tells which).
    event NodeMarkedInactive(uint64 indexed nodeId, uint32 lastHeartbeat, address indexed by);
    /// @notice The operator changed the node's capabilities and metadata.
    event NodeCapabilitiesUpdated(uint64 indexed nodeId, NodeCapabilities capabilities, string metadataURI);
    /// @notice The operator changed the node's agent key.
    event NodeAgentChanged(uint64 indexed nodeId, address indexed agent);
    /// @notice Stake was added to the node.
    event NodeStakeAdded(uint64 indexed nodeId, uint96 amount, uint96 stake);
    /// @notice The node takes no new jobs; its stake unbonds until `unbondingEndsAt`.
    event NodeExitBegun(uint64 indexed nodeId, uint40 unbondingEndsAt);
    /// @notice The operator withdrew the whole stake; the node is Exited.
    event NodeStakeWithdrawn(uint64 indexed nodeId, address indexed operator, uint96 amount);
    // Slot and reputation counters change with JobMarket's events (JobAssigned,
    // ResultSubmitted, JobCompleted, JobReclaimed, ...): the registry does not repeat them.
    /// @notice `amount` of the node's stake was slashed and sent to the market.
    event NodeSlashed(uint64 indexed nodeId, uint96 amount, uint96 stake);
    /// @notice The admin changed the registry parameters.
    event RegistryParamsUpdated(RegistryParams params);

    // ---------------------------------------------------------------- errors

    error NodeRegistry_ZeroAddress();
    error NodeRegistry_StakeTooLow(uint96 stake, uint96 minStake);
    error NodeRegistry_InvalidCapabilities();
    error NodeRegistry_InvalidParams();
    error NodeRegistry_UnknownNode(uint64 nodeId);
    error NodeRegistry_NotOperator(uint64 nodeId, address caller);
    error NodeRegistry_NotAgent(uint64 nodeId, address caller);
    error NodeRegistry_NotActive(uint64 nodeId, NodeStatus status);
    error NodeRegistry_HeartbeatNotExpired(uint64 nodeId, uint256 expiresAt);
    error NodeRegistry_StakeBelowMinimum(uint64 nodeId, uint96 stake, uint96 minStake);
    error NodeRegistry_NoFreeSlot(uint64 nodeId, uint8 activeJobs, uint8 maxConcurrentJobs);
    error NodeRegistry_Exiting(uint64 nodeId);
    error NodeRegistry_NotExiting(uint64 nodeId);
    error NodeRegistry_StillUnbonding(uint64 nodeId, uint40 unbondingEndsAt);
    error NodeRegistry_HasJobs(uint64 nodeId, uint8 activeJobs, uint16 settlingJobs);
    error NodeRegistry_NoSettlingJob(uint64 nodeId);
    error NodeRegistry_NoActiveJob(uint64 nodeId);
    error NodeRegistry_ZeroAmount();

    // ---------------------------------------------------------------- operator

    /// @notice Registers a node owned by the caller; pulls `stake` tokens from the caller.
    /// @return nodeId The new node's id (starting at 1).
    function register(address agent, NodeCapabilities calldata capabilities, string calldata metadataURI, uint96 stake)
        external
        returns (uint64 nodeId);

    /// @notice Replaces the node's capabilities and metadata URI. Operator only.
    function updateCapabilities(uint64 nodeId, NodeCapabilities calldata capabilities, string calldata metadataURI)
        external;

    /// @notice Replaces the node's agent key. Operator only.
    function setAgent(uint64 nodeId, address agent) external;

    /// @notice Adds `amount` to the node's stake, pulled from the caller. Operator only.
    function topUpStake(uint64 nodeId, uint96 amount) external;

    /// @notice Stops new jobs and starts the unbonding period. Operator only.
    function beginExit(uint64 nodeId) external;

    /// @notice After unbonding and with no jobs left, pays the stake back. Operator only.
    function withdrawStake(uint64 nodeId) external;

    // ---------------------------------------------------------------- agent, anyone

    /// @notice Proves the node is alive; reactivates an Inactive node. Agent only.
    function heartbeat(uint64 nodeId) external;

    /// @notice Marks an Active node Inactive. Anyone may do so once the node's last heartbeat
    /// is older than the timeout; the node's agent may do so at any time.
    /// @dev The agent's path is the graceful shutdown: a worker shutting down marks its node
    /// Inactive so the matcher stops assigning jobs to it. The jobs the node still holds are
    /// then reclaimable as for any Inactive node (`JobMarket.reclaim`); the worker gives them
    /// back at once with `JobMarket.abandon` (the same slash), after going Inactive so that
    /// they are not assigned straight back to it. A later heartbeat reactivates the node.
    function markInactive(uint64 nodeId) external;

    // ---------------------------------------------------------------- market

    /// @notice Takes a job slot of an Active node with a free slot and at least the minimum
    /// stake (slashing can take it below; a top-up restores it). Market only.
    /// @return agent The node's agent.
    /// @return capabilities The node's capabilities, for the market's requirement checks.
    function takeSlot(uint64 nodeId) external returns (address agent, NodeCapabilities memory capabilities);

    /// @notice Moves one of the node's jobs from running to settling. Market only.
    /// @return agent The node's agent, whom the market checks against the submitter.
    function markSettling(uint64 nodeId) external returns (address agent);

    /// @notice Releases a running (`settling == false`) or settling job of the node. A
    /// `Faulted` release slashes the stake and sends the slashed tokens to the market.
    /// Market only.
    /// @return operator The node's operator, who is paid for a completed job.
    /// @return slashed Tokens slashed and transferred to the market.
    function release(uint64 nodeId, bool settling, Release outcome) external returns (address operator, uint96 slashed);

    // ---------------------------------------------------------------- admin

    function setParams(RegistryParams calldata params) external;

    // ---------------------------------------------------------------- views

    function getNode(uint64 nodeId) external view returns (NodeInfo memory);
    function params() external view returns (RegistryParams memory);
    function nodeCount() external view returns (uint64);
    function statusOf(uint64 nodeId) external view returns (NodeStatus);
    function agentOf(uint64 nodeId) external view returns (address);
}
