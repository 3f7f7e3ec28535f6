// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {CommonBase} from "forge-std/Base.sol";
import {StdCheats} from "forge-std/StdCheats.sol";
import {StdUtils} from "forge-std/StdUtils.sol";

import {JobMarket} from "../../../src/JobMarket.sol";
import {NodeRegistry} from "../../../src/NodeRegistry.sol";
import {GantryTestToken} from "../../../src/dev/GantryTestToken.sol";
import {
    JobInfo,
    JobRequirements,
    JobStatus,
    NodeCapabilities,
    NodeInfo,
    NodeStatus
} from "../../../src/types/Types.sol";

/// @notice Drives the market through valid calls only (the invariant runner fails on any
/// revert), and records every job's status after each call so the invariants can check
/// that no transition happened outside the lifecycle and nothing was settled twice.
contract MarketHandler is CommonBase, StdCheats, StdUtils {
    bytes32 internal constant H100 = bytes32("NVIDIA-H100-80GB");
    uint256 internal constant NODES = 3;
    uint256 internal constant SUBMITTERS = 3;

    GantryTestToken public immutable token;
    NodeRegistry public immutable registry;
    JobMarket public immutable market;
    address public immutable matcher;
    address public immutable arbiter;

    /// The requirements every posted job starts from; each post sets the model and GPU count.
    JobRequirements internal template;

    address[] public submitters;
    address[] public operators;
    address[] public agents;
    uint64[] public nodeIds;

    /// Status of each job as last seen by the handler (after its own call).
    mapping(uint64 jobId => JobStatus) public lastStatus;
    /// Bond held for each Disputed job.
    mapping(uint64 jobId => uint96) public bondOf;
    /// Set when a transition outside the lifecycle was observed.
    bool public illegalTransition;
    /// Set when a settling call succeeded on an already settled job.
    bool public settledTwice;
    mapping(bytes32 => uint256) public calls;

    constructor(
        GantryTestToken token_,
        NodeRegistry registry_,
        JobMarket market_,
        address matcher_,
        address arbiter_,
        JobRequirements memory template_
    ) {
        template = template_;
        token = token_;
        registry = registry_;
        market = market_;
        matcher = matcher_;
        arbiter = arbiter_;
        for (uint256 i; i < SUBMITTERS; ++i) {
            address submitter = makeAddr(string.concat("submitter", vm.toString(i)));
            submitters.push(submitter);
            fund(submitter);
        }
        for (uint256 i; i < NODES; ++i) {
            address operator = makeAddr(string.concat("operator", vm.toString(i)));
            address agent = makeAddr(string.concat("agent", vm.toString(i)));
            operators.push(operator);
            agents.push(agent);
            fund(operator);
            NodeCapabilities memory caps = NodeCapabilities({
                gpuModel: H100,
                gpuCount: uint16(1 + i),
                vramMiB: 81_920,
                cpuCores: 32,
                ramMiB: 262_144,
                pricePerGpuHour: 2e6,
                maxConcurrentJobs: uint8(1 + i)
            });
            vm.prank(operator);
            nodeIds.push(registry.register(agent, caps, "", 500e6));
        }
    }

    // ================================================================ actions

    function postJob(uint256 submitterSeed, uint96 bounty, uint32 lifetime, uint8 gpus, bool anyModel) external {
        address submitter = submitters[submitterSeed % SUBMITTERS];
        bounty = uint96(bound(bounty, 1, 1_000e6));
        lifetime = uint32(bound(lifetime, 1 hours, 3 days));
        JobRequirements memory requirements = template;
        requirements.gpuModel = anyModel ? bytes32(0) : H100;
        requirements.minGpuCount = uint16(bound(gpus, 1, NODES));
        vm.prank(submitter);
        uint64 jobId = market.postJob(requirements, bounty, uint40(block.timestamp + lifetime), "{\"version\":1}");
        record(jobId, JobStatus.None, "postJob");
    }

    function assign(uint256 jobSeed, uint256 nodeSeed, bool byClaim) external {
        (bool found, uint64 jobId, JobInfo memory job) = pick(jobSeed, JobStatus.Open, JobStatus.Open);
        if (!found || block.timestamp >= job.deadline) return;
        uint256 index = nodeSeed % NODES;
        uint64 nodeId = nodeIds[index];
        NodeInfo memory node = registry.getNode(nodeId);
        if (node.status != NodeStatus.Active || node.activeJobs >= node.capabilities.maxConcurrentJobs) return;
        if (node.capabilities.gpuCount < job.requirements.minGpuCount) return;
        if (byClaim) {
            vm.prank(node.agent);
            market.claim(jobId, nodeId);
        } else {
            vm.prank(matcher);
            market.assign(jobId, nodeId);
        }
        record(jobId, JobStatus.Open, "assign");
    }

    function submitResult(uint256 jobSeed, bytes32 resultHash) external {
        (bool found, uint64 jobId, JobInfo memory job) = pick(jobSeed, JobStatus.Assigned, JobStatus.Assigned);
        if (!found || block.timestamp >= job.deadline) return;
        vm.prank(registry.agentOf(job.nodeId));
        market.submitResult(jobId, resultHash, "ipfs://result");
        record(jobId, JobStatus.Assigned, "submitResult");
    }

    function accept(uint256 jobSeed) external {
        submitterActs(jobSeed, JobStatus.Submitted, market.accept, "accept");
    }

    function cancel(uint256 jobSeed) external {
        submitterActs(jobSeed, JobStatus.Open, market.cancel, "cancel");
    }

    function finalize(uint256 jobSeed) external {
        (bool found, uint64 jobId, JobInfo memory job) = pick(jobSeed, JobStatus.Submitted, JobStatus.Submitted);
        if (!found || block.timestamp < job.challengeEndsAt) return;
        market.finalize(jobId);
        record(jobId, JobStatus.Submitted, "finalize");
    }

    function dispute(uint256 jobSeed) external {
        (bool found, uint64 jobId, JobInfo memory job) = pick(jobSeed, JobStatus.Submitted, JobStatus.Submitted);
        if (!found || block.timestamp >= job.challengeEndsAt) return;
        vm.prank(job.submitter);
        market.dispute(jobId);
        bondOf[jobId] = market.params().disputeBond;
        record(jobId, JobStatus.Submitted, "dispute");
    }

    function resolve(uint256 jobSeed, bool providerWins) external {
        (bool found, uint64 jobId,) = pick(jobSeed, JobStatus.Disputed, JobStatus.Disputed);
        if (!found) return;
        vm.prank(arbiter);
        market.resolve(jobId, providerWins);
        bondOf[jobId] = 0;
        record(jobId, JobStatus.Disputed, "resolve");
    }

    function reclaim(uint256 jobSeed) external {
        (bool found, uint64 jobId, JobInfo memory job) = pick(jobSeed, JobStatus.Assigned, JobStatus.Assigned);
        if (!found) return;
        bool inactive = registry.statusOf(job.nodeId) == NodeStatus.Inactive;
        if (!inactive && block.timestamp <= uint256(job.assignedAt) + job.requirements.maxRuntime) return;
        market.reclaim(jobId);
        record(jobId, JobStatus.Assigned, "reclaim");
    }

    function reject(uint256 jobSeed) external {
        (bool found, uint64 jobId, JobInfo memory job) = pick(jobSeed, JobStatus.Assigned, JobStatus.Assigned);
        if (!found || block.timestamp >= job.deadline) return;
        // A node at fault must be reclaimed instead.
        if (block.timestamp > uint256(job.assignedAt) + job.requirements.maxRuntime) return;
        if (registry.statusOf(job.nodeId) == NodeStatus.Inactive) return;
        vm.prank(registry.agentOf(job.nodeId));
        market.reject(jobId, "image unusable");
        record(jobId, JobStatus.Assigned, "reject");
    }

    function abandon(uint256 jobSeed) external {
        (bool found, uint64 jobId, JobInfo memory job) = pick(jobSeed, JobStatus.Assigned, JobStatus.Assigned);
        if (!found || block.timestamp >= job.deadline) return;
        vm.prank(registry.agentOf(job.nodeId));
        market.abandon(jobId);
        record(jobId, JobStatus.Assigned, "abandon");
    }

    function expire(uint256 jobSeed) external {
        (bool found, uint64 jobId, JobInfo memory job) = pick(jobSeed, JobStatus.Open, JobStatus.Assigned);
        if (!found || block.timestamp < job.deadline) return;
        JobStatus before = job.status;
        market.expire(jobId);
        record(jobId, before, "expire");
    }

    function heartbeat(uint256 nodeSeed) external {
        uint256 index = nodeSeed % NODES;
        vm.prank(agents[index]);
        registry.heartbeat(nodeIds[index]);
        ++calls["heartbeat"];
    }

    /// Anyone once the heartbeat expired, or the node's own agent at any time (a worker
    /// shutting down gracefully).
    function markInactive(uint256 nodeSeed, bool byAgent) external {
        uint64 nodeId = nodeIds[nodeSeed % NODES];
        NodeInfo memory node = registry.getNode(nodeId);
        if (node.status != NodeStatus.Active) return;
        if (byAgent) {
            vm.prank(node.agent);
            registry.markInactive(nodeId);
            ++calls["markInactiveByAgent"];
            return;
        }
        if (block.timestamp <= uint256(node.lastHeartbeat) + registry.params().heartbeatTimeout) return;
        registry.markInactive(nodeId);
        ++calls["markInactive"];
    }

    function withdraw(uint256 actorSeed) external {
        address[] memory accounts = allAccounts();
        address account = accounts[actorSeed % accounts.length];
        if (market.creditOf(account) == 0) return;
        vm.prank(account);
        market.withdraw();
        ++calls["withdraw"];
    }

    function warp(uint32 seconds_) external {
        vm.warp(block.timestamp + bound(seconds_, 1, 30 minutes));
        ++calls["warp"];
    }

    /// Tries every settling call on a settled job; none may succeed.
    function settleAgain(uint256 jobSeed) external {
        (bool found, uint64 jobId, JobInfo memory job) = pick(jobSeed, JobStatus.Completed, JobStatus.Expired);
        if (!found) return;
        vm.startPrank(job.submitter);
        if (succeeds(abi.encodeCall(market.accept, (jobId)))) settledTwice = true;
        if (succeeds(abi.encodeCall(market.cancel, (jobId)))) settledTwice = true;
        vm.stopPrank();
        if (succeeds(abi.encodeCall(market.finalize, (jobId)))) settledTwice = true;
        if (succeeds(abi.encodeCall(market.expire, (jobId)))) settledTwice = true;
        if (succeeds(abi.encodeCall(market.reclaim, (jobId)))) settledTwice = true;
        vm.prank(registry.agentOf(job.nodeId));
        if (succeeds(abi.encodeCall(market.abandon, (jobId)))) settledTwice = true;
        vm.startPrank(arbiter);
        if (succeeds(abi.encodeCall(market.resolve, (jobId, true)))) settledTwice = true;
        if (succeeds(abi.encodeCall(market.resolve, (jobId, false)))) settledTwice = true;
        vm.stopPrank();
        ++calls["settleAgain"];
    }

    // ================================================================ views for invariants

    function allAccounts() public view returns (address[] memory accounts) {
        accounts = new address[](SUBMITTERS + NODES + 1);
        for (uint256 i; i < SUBMITTERS; ++i) {
            accounts[i] = submitters[i];
        }
        for (uint256 i; i < NODES; ++i) {
            accounts[SUBMITTERS + i] = operators[i];
        }
        accounts[SUBMITTERS + NODES] = market.params().feeRecipient;
    }

    function nodeCount() external pure returns (uint256) {
        return NODES;
    }

    // ================================================================ internal

    function fund(address account) internal {
        token.mint(account, 1e15);
        vm.startPrank(account);
        token.approve(address(market), type(uint256).max);
        token.approve(address(registry), type(uint256).max);
        vm.stopPrank();
    }

    /// Finds a job whose status lies in [from, to], starting at a seeded position.
    function pick(uint256 seed, JobStatus from, JobStatus to)
        internal
        view
        returns (bool found, uint64 jobId, JobInfo memory job)
    {
        uint64 count = market.jobCount();
        for (uint64 i; i < count; ++i) {
            jobId = uint64((seed % count + i) % count) + 1;
            job = market.getJob(jobId);
            if (job.status >= from && job.status <= to) return (true, jobId, job);
        }
    }

    /// Checks the job's move from `before` against the lifecycle, records it and counts the
    /// action that made it.
    function record(uint64 jobId, JobStatus before, bytes32 action) internal {
        if (lastStatus[jobId] != before) illegalTransition = true;
        JobStatus next = market.getJob(jobId).status;
        if (!allowed(before, next)) illegalTransition = true;
        lastStatus[jobId] = next;
        ++calls[action];
    }

    /// Has the submitter of a job in `status` call `action` on it, when there is such a job.
    function submitterActs(uint256 jobSeed, JobStatus status, function(uint64) external action, bytes32 name) internal {
        (bool found, uint64 jobId, JobInfo memory job) = pick(jobSeed, status, status);
        if (!found) return;
        vm.prank(job.submitter);
        action(jobId);
        record(jobId, status, name);
    }

    function allowed(JobStatus from, JobStatus to) internal pure returns (bool) {
        if (from == JobStatus.None) return to == JobStatus.Open;
        if (from == JobStatus.Open) {
            return to == JobStatus.Assigned || to == JobStatus.Cancelled || to == JobStatus.Expired;
        }
        if (from == JobStatus.Assigned) {
            return
                to == JobStatus.Submitted || to == JobStatus.Open || to == JobStatus.Failed || to == JobStatus.Expired;
        }
        if (from == JobStatus.Submitted) return to == JobStatus.Completed || to == JobStatus.Disputed;
        if (from == JobStatus.Disputed) return to == JobStatus.Completed || to == JobStatus.Failed;
        return false;
    }

    function succeeds(bytes memory call) internal returns (bool ok) {
        (ok,) = address(market).call(call);
    }
}
