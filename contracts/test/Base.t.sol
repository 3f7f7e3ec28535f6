// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Test} from "forge-std/Test.sol";

import {JobMarket} from "../src/JobMarket.sol";
import {NodeRegistry} from "../src/NodeRegistry.sol";
import {GantryTestToken} from "../src/dev/GantryTestToken.sol";
import {IJobMarket} from "../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../src/interfaces/INodeRegistry.sol";
import {
    JobRequirements,
    JobStatus,
    MarketParams,
    NodeCapabilities,
    NodeInfo,
    NodeStatus,
    RegistryParams
} from "../src/types/Types.sol";

/// @notice Deploys the market as `make dev` does and offers the steps of a job's life.
abstract contract Base is Test {
    bytes32 internal constant H100 = bytes32("NVIDIA-H100-80GB");
    bytes32 internal constant A100 = bytes32("NVIDIA-A100-40GB");

    uint96 internal constant MIN_STAKE = 100e6;
    uint32 internal constant HEARTBEAT_TIMEOUT = 5 minutes;
    uint32 internal constant UNBONDING = 7 days;
    uint16 internal constant SLASH_BPS = 1_000; // 10%
    uint32 internal constant CHALLENGE_WINDOW = 1 hours;
    uint16 internal constant FEE_BPS = 250; // 2.5%
    uint8 internal constant MAX_ATTEMPTS = 3;
    uint96 internal constant DISPUTE_BOND = 10e6;

    uint96 internal constant BOUNTY = 50e6;
    uint96 internal constant STAKE = 500e6;
    uint96 internal constant PRICE = 2e6;

    GantryTestToken internal token;
    NodeRegistry internal registry;
    JobMarket internal market;

    address internal admin = makeAddr("admin");
    address internal matcher = makeAddr("matcher");
    address internal arbiter = makeAddr("arbiter");
    address internal pauser = makeAddr("pauser");
    address internal treasury = makeAddr("treasury");
    address internal operator = makeAddr("operator");
    address internal agent = makeAddr("agent");
    address internal submitter = makeAddr("submitter");
    address internal stranger = makeAddr("stranger");

    function setUp() public virtual {
        vm.warp(1_750_000_000);
        token = new GantryTestToken();
        registry = new NodeRegistry(token, admin, registryParams());
        market = new JobMarket(token, registry, admin, marketParams());
        vm.startPrank(admin);
        registry.grantRole(registry.MARKET_ROLE(), address(market));
        registry.grantRole(registry.PAUSER_ROLE(), pauser);
        market.grantRole(market.MATCHER_ROLE(), matcher);
        market.grantRole(market.ARBITER_ROLE(), arbiter);
        market.grantRole(market.PAUSER_ROLE(), pauser);
        vm.stopPrank();

        fund(operator, 10_000e6);
        fund(submitter, 10_000e6);
    }

    // ---------------------------------------------------------------- fixtures

    function registryParams() internal pure returns (RegistryParams memory) {
        return RegistryParams({
            minStake: MIN_STAKE, heartbeatTimeout: HEARTBEAT_TIMEOUT, unbondingPeriod: UNBONDING, slashBps: SLASH_BPS
        });
    }

    function marketParams() internal view returns (MarketParams memory) {
        return MarketParams({
            feeRecipient: treasury,
            challengeWindow: CHALLENGE_WINDOW,
            protocolFeeBps: FEE_BPS,
            maxAttempts: MAX_ATTEMPTS,
            disputeBond: DISPUTE_BOND
        });
    }

    /// Capabilities in the struct's order: model, GPUs, VRAM MiB, CPU cores, RAM MiB, price
    /// per GPU-hour, job slots.
    function h100Node() internal pure returns (NodeCapabilities memory) {
        return NodeCapabilities(H100, 8, 81_920, 64, 524_288, PRICE, 2);
    }

    function h100Job() internal pure returns (JobRequirements memory) {
        return JobRequirements({
            gpuModel: H100,
            minGpuCount: 1,
            minVramMiB: 40_960,
            minCpuCores: 8,
            minRamMiB: 65_536,
            maxPricePerGpuHour: 3e6,
            maxRuntime: 2 hours,
            priority: 5
        });
    }

    /// A job spec of about 400 bytes, like the ones the CLI posts.
    function specJson() internal pure returns (bytes memory) {
        return bytes(
            '{"version":1,"image":"ghcr.io/acme/train@sha256:9f2c4e1b7a0d3c5e8f1a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e",'
            '"command":["python","train.py","--epochs","3","--batch-size","64"],'
            '"env":{"WANDB_MODE":"offline","SEED":"42"},'
            '"inputs":[{"uri":"https://data.example.org/cifar10.tar","sha256":"3f1c6a0e5b7d9f2a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a","path":"/data/in"}],'
            '"outputs":{"path":"/data/out"},"timeoutSecs":7200}'
        );
    }

    // ---------------------------------------------------------------- steps

    function fund(address account, uint256 amount) internal {
        token.mint(account, amount);
        vm.startPrank(account);
        token.approve(address(registry), type(uint256).max);
        token.approve(address(market), type(uint256).max);
        vm.stopPrank();
    }

    function registerNode() internal returns (uint64 nodeId) {
        vm.prank(operator);
        nodeId = registry.register(agent, h100Node(), "ipfs://node-meta", STAKE);
    }

    function postJob() internal returns (uint64 jobId) {
        vm.prank(submitter);
        jobId = market.postJob(h100Job(), BOUNTY, uint40(block.timestamp + 1 days), specJson());
    }

    function assignJob(uint64 jobId, uint64 nodeId) internal {
        vm.prank(matcher);
        market.assign(jobId, nodeId);
    }

    function submitJob(uint64 jobId) internal {
        vm.prank(agent);
        market.submitResult(jobId, keccak256("result"), "ipfs://result");
    }

    /// A job that is Submitted by a freshly registered node.
    function submittedJob() internal returns (uint64 jobId, uint64 nodeId) {
        nodeId = registerNode();
        jobId = postJob();
        assignJob(jobId, nodeId);
        submitJob(jobId);
    }

    function fee(uint96 bounty) internal pure returns (uint96) {
        return uint96((uint256(bounty) * FEE_BPS) / 10_000);
    }

    function heartbeat(uint64 nodeId) internal {
        vm.prank(registry.agentOf(nodeId));
        registry.heartbeat(nodeId);
    }

    function beginExit(uint64 nodeId) internal {
        vm.prank(operator);
        registry.beginExit(nodeId);
    }

    function setRegistryParams(RegistryParams memory p) internal {
        vm.prank(admin);
        registry.setParams(p);
    }

    /// Sets the registry's slash rate, leaving the other parameters as deployed.
    function setSlashBps(uint16 slashBps) internal {
        RegistryParams memory p = registryParams();
        p.slashBps = slashBps;
        setRegistryParams(p);
    }

    /// The operator hands the node to a new agent key, `makeAddr("newAgent")`.
    function setNewAgent(uint64 nodeId) internal returns (address newAgent) {
        newAgent = makeAddr("newAgent");
        vm.prank(operator);
        registry.setAgent(nodeId, newAgent);
    }

    // ---------------------------------------------------------------- checks

    function assertNodeCounters(
        uint64 nodeId,
        uint256 activeJobs,
        uint256 settlingJobs,
        uint256 completedJobs,
        uint256 failedJobs
    ) internal view {
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.activeJobs, activeJobs, "activeJobs");
        assertEq(node.settlingJobs, settlingJobs, "settlingJobs");
        assertEq(node.completedJobs, completedJobs, "completedJobs");
        assertEq(node.failedJobs, failedJobs, "failedJobs");
    }

    function expectNotActive(uint64 nodeId, NodeStatus status) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotActive.selector, nodeId, status));
    }

    function expectUnknownNode(uint64 nodeId) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_UnknownNode.selector, nodeId));
    }
}

/// @notice A node registered by `operator`, run by `agent`, with the `h100Node` capabilities.
abstract contract RegisteredNode is Base {
    uint64 internal nodeId;

    function setUp() public virtual override {
        super.setUp();
        nodeId = registerNode();
    }

    /// Expects the fixture's node to be refused for not being Active.
    function expectNotActive(NodeStatus status) internal {
        expectNotActive(nodeId, status);
    }
}
