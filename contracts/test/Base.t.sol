// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Test, Vm} from "forge-std/Test.sol";

import {JobMarket} from "../src/JobMarket.sol";
import {NodeRegistry} from "../src/NodeRegistry.sol";
import {Referees} from "../src/Referees.sol";
import {Verification} from "../src/Verification.sol";
import {GantryTestToken} from "../src/dev/GantryTestToken.sol";
import {IJobMarket} from "../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../src/interfaces/INodeRegistry.sol";
import {JobView} from "./JobView.sol";
import {Assignment, JobPolicy, JobRequirements, JobState, JobStatus, JobTerms} from "../src/types/Types.sol";
import {
    DETERMINISTIC_DOCKER,
    ENGINE_COUNT,
    ENGINE_DOCKER,
    ENGINE_WASM,
    MarketParams,
    NodeCapabilities,
    NodeInfo
} from "../src/types/Types.sol";
import {Seat, VerifiedState, VerifyParams, VerifyPolicy} from "../src/types/Types.sol";
import {IVerification, IVerificationEvents} from "../src/interfaces/IVerification.sol";

/// @notice Deploys the market as `make dev` does and offers the steps of a job's life.
///
/// Tests never build a job's state by hand: every step records the market's logs and
/// `sync` folds them into `jobs` (terms and state, as a consumer of the chain stream
/// would), and replays every credit and debit into the `replay*` balances. A step that
/// passes a folded state the market does not agree with reverts `StaleState`, so each test
/// also checks that the events tell the whole story; `assertReplay` checks the money.
abstract contract Base is Test {
    using JobView for JobTerms;
    using JobView for JobState;

    bytes32 internal constant H100 = bytes32("NVIDIA-H100-80GB");
    bytes32 internal constant A100 = bytes32("NVIDIA-A100-40GB");

    uint96 internal constant MIN_STAKE = 100e6;
    /// A node's engine sets.
    uint8 internal constant DOCKER_ONLY = uint8(1) << ENGINE_DOCKER;
    uint8 internal constant WASM_ONLY = uint8(1) << ENGINE_WASM;
    uint8 internal constant DOCKER_AND_WASM = DOCKER_ONLY | WASM_ONLY;
    /// Docker in the deterministic sandbox: takes verified Docker seats.
    uint8 internal constant SANDBOXED = DOCKER_ONLY | uint8(1) << DETERMINISTIC_DOCKER;
    uint32 internal constant HEARTBEAT_TIMEOUT = 5 minutes;
    uint32 internal constant UNBONDING = 10 days;
    uint16 internal constant SLASH_BPS = 1_000; // 10%
    uint32 internal constant CHALLENGE_WINDOW = 1 hours;
    uint16 internal constant FEE_BPS = 250; // 2.5%
    uint8 internal constant MAX_ATTEMPTS = 3;
    uint96 internal constant DISPUTE_BOND = 10e6;
    uint32 internal constant DISPUTE_PERIOD = 3 days;

    uint96 internal constant BOUNTY = 50e6;
    uint96 internal constant STAKE = 500e6;
    uint96 internal constant PRICE = 2e6;
    uint32 internal constant RUNTIME = 1 hours;

    uint256 internal constant AGENT_KEY = 0xA11CE;
    uint256 internal constant OTHER_AGENT_KEY = 0xB0B;

    GantryTestToken internal token;
    JobMarket internal market;
    /// The node calls, served at the market's address.
    INodeRegistry internal nodes;

    address internal admin = makeAddr("admin");
    address internal matcher = makeAddr("matcher");
    address internal arbiter = makeAddr("arbiter");
    address internal pauser = makeAddr("pauser");
    address internal treasury = makeAddr("treasury");
    address internal operator = makeAddr("operator");
    address internal agent = vm.addr(AGENT_KEY);
    address internal otherAgent = vm.addr(OTHER_AGENT_KEY);
    address internal submitter = makeAddr("submitter");
    address internal stranger = makeAddr("stranger");

    /// A job as the events tell it.
    struct Job {
        JobTerms terms;
        JobState state;
    }

    mapping(uint64 jobId => Job) internal jobs;
    /// Verified jobs' states, as the events tell them (their terms are in `jobs`).
    mapping(uint64 jobId => VerifiedState) internal verified;
    /// Verified jobs' seats, as the events tell them.
    mapping(uint64 jobId => mapping(uint256 seat => Seat)) internal seatOf;
    mapping(uint32 version => JobPolicy) internal policies;
    mapping(uint64 nodeId => NodeCapabilities) internal capsOf;
    mapping(uint64 nodeId => address) internal agentOf;

    // Balances replayed from the events alone.
    mapping(address account => uint256) internal replayCredits;
    mapping(uint64 nodeId => uint256) internal replayStake;
    mapping(uint64 nodeId => uint256) internal replayEarnings;
    mapping(uint64 nodeId => uint256) internal replayFeesOwed;
    uint256 internal replayTreasury;
    /// Escrowed bounties of unsettled jobs plus bonds of open disputes.
    uint256 internal replayEscrow;
    address[] internal accounts;
    uint64 internal lastJob;
    uint64 internal lastNode;

    function setUp() public virtual {
        vm.warp(1_750_000_000);
        vm.recordLogs();
        token = new GantryTestToken();
        NodeRegistry registry = new NodeRegistry(token);
        market = new JobMarket(token, admin, marketParams(), registry, new Verification(token), new Referees(token));
        nodes = INodeRegistry(address(market));
        vm.startPrank(admin);
        market.grantRole(market.MATCHER_ROLE(), matcher);
        market.grantRole(market.ARBITER_ROLE(), arbiter);
        market.grantRole(market.PAUSER_ROLE(), pauser);
        vm.stopPrank();

        fund(operator, 10_000e6);
        fund(submitter, 10_000e6);
        accounts.push(submitter);
        accounts.push(operator);
        sync();
    }

    // ---------------------------------------------------------------- fixtures

    function marketParams() internal view returns (MarketParams memory) {
        return MarketParams({
            treasury: treasury,
            challengeWindow: CHALLENGE_WINDOW,
            protocolFeeBps: FEE_BPS,
            maxAttempts: MAX_ATTEMPTS,
            disputeBond: DISPUTE_BOND,
            disputePeriod: DISPUTE_PERIOD,
            slashBps: SLASH_BPS,
            minStake: MIN_STAKE,
            heartbeatTimeout: HEARTBEAT_TIMEOUT,
            unbondingPeriod: UNBONDING
        });
    }

    function h100Node() internal pure returns (NodeCapabilities memory) {
        return NodeCapabilities({
            gpuModel: H100,
            gpuCount: 8,
            vramMiB: 81_920,
            cpuCores: 64,
            ramMiB: 512_000,
            pricePerGpuHour: PRICE,
            maxConcurrentJobs: 2,
            engines: DOCKER_AND_WASM
        });
    }

    function h100Job() internal pure returns (JobRequirements memory) {
        return JobRequirements({
            gpuModel: H100,
            minGpuCount: 1,
            minVramMiB: 40_000,
            minCpuCores: 8,
            minRamMiB: 64_000,
            maxPricePerGpuHour: 3e6,
            maxRuntime: RUNTIME,
            priority: 5,
            engine: ENGINE_DOCKER
        });
    }

    /// A CPU node (no GPU) running both engines.
    function cpuNode() internal pure returns (NodeCapabilities memory caps) {
        caps = h100Node();
        caps.gpuModel = bytes32(0);
        caps.gpuCount = 0;
        caps.vramMiB = 0;
    }

    /// A small WASM job: CPU only.
    function wasmJob() internal pure returns (JobRequirements memory r) {
        r = h100Job();
        r.gpuModel = bytes32(0);
        r.minGpuCount = 0;
        r.minVramMiB = 0;
        r.engine = ENGINE_WASM;
    }

    /// The verification rules of the devnet: a ticket costs 100 gUSD of free stake, a seat
    /// at least 20 gUSD or twice the bounty.
    function verifyParams() internal pure returns (VerifyParams memory) {
        return VerifyParams({
            poolFloor: 100e6, seatFloor: 20e6, seatBps: 20_000, minVerifiedBounty: 1e6, minRevealWindow: 30, minPool: 3
        });
    }

    /// The admin offers verified jobs under the current policy (`verifyParams`).
    function enableVerification() internal {
        vm.prank(admin);
        IVerification(address(market)).setVerifyParams(verifyParams());
        sync();
    }

    function spec() internal pure returns (bytes memory) {
        return bytes(
            '{"v":1,"image":"ghcr.io/acme/train@sha256:4f1c2e8a9b7d6c5e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e",'
            '"command":["python","train.py","--epochs","3","--batch-size","64"],"env":{"WANDB_MODE":"offline",'
            '"SEED":"42"},"inputs":[{"uri":"https://data.example.org/cifar10.tar","sha256":'
            '"9f2b5c1d3e4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a2b4c6d8e0f2a4b6c","path":"data/cifar10.tar"}],'
            '"outputPath":"/outputs","timeoutSecs":3000}'
        );
    }

    function fund(address account, uint256 amount) internal {
        token.mint(account, amount);
        vm.prank(account);
        token.approve(address(market), type(uint256).max);
    }

    /// A step: `who`'s call, then the fold of its logs.
    modifier calledBy(address who) {
        vm.prank(who);
        _;
        sync();
    }

    // ---------------------------------------------------------------- nodes

    /// Registers an H100 node of `operator` served by `agent`, who consents by calling.
    function registerNode() internal returns (uint64) {
        return registerNode(operator, AGENT_KEY, h100Node(), STAKE);
    }

    /// Registers a node; the agent consents with an EIP-712 signature.
    function registerNode(address owner, uint256 agentKey, NodeCapabilities memory caps, uint96 stake)
        internal
        returns (uint64 nodeId)
    {
        address nodeAgent = vm.addr(agentKey);
        bytes memory consent = signConsent(owner, agentKey, block.timestamp + 1 hours);
        vm.prank(owner);
        nodeId = nodes.register(caps, "ipfs://node", stake, nodeAgent, block.timestamp + 1 hours, consent);
        sync();
    }

    function signConsent(address owner, uint256 agentKey, uint256 deadline) internal view returns (bytes memory) {
        address nodeAgent = vm.addr(agentKey);
        bytes32 digest = nodes.consentDigest(owner, nodeAgent, nodes.agentNonce(nodeAgent), deadline);
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(agentKey, digest);
        return abi.encodePacked(r, s, v);
    }

    /// The consent digest computed here from EIP-712, for any chain and verifying contract.
    function consentDigestOn(
        uint256 chainId,
        address verifyingContract,
        address owner,
        address agent_,
        uint256 nonce,
        uint256 deadline
    ) internal pure returns (bytes32) {
        return consentDigestOn(chainId, verifyingContract, "2", owner, agent_, nonce, deadline);
    }

    /// The same, for any version of the signing domain.
    function consentDigestOn(
        uint256 chainId,
        address verifyingContract,
        string memory version,
        address owner,
        address agent_,
        uint256 nonce,
        uint256 deadline
    ) internal pure returns (bytes32) {
        bytes32 domain = keccak256(
            abi.encode(
                keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
                keccak256("Gantry"),
                keccak256(bytes(version)),
                chainId,
                verifyingContract
            )
        );
        bytes32 structHash = keccak256(
            abi.encode(
                keccak256("AgentConsent(address operator,address agent,uint256 nonce,uint256 deadline)"),
                owner,
                agent_,
                nonce,
                deadline
            )
        );
        return keccak256(abi.encodePacked("\x19\x01", domain, structHash));
    }

    function heartbeat(uint64 id) internal calledBy(agentOf[id]) {
        nodes.heartbeat(id);
    }

    function markInactive(uint64 id, address by) internal calledBy(by) {
        nodes.markInactive(id);
    }

    function beginExit(uint64 id) internal calledBy(nodes.getNode(id).operator) {
        nodes.beginExit(id);
    }

    function topUp(uint64 id, uint96 amount) internal calledBy(nodes.getNode(id).operator) {
        nodes.topUpStake(id, amount);
    }

    function withdrawStake(uint64 id) internal calledBy(nodes.getNode(id).operator) {
        nodes.withdrawStake(id);
    }

    function withdrawEarnings(uint64 id) internal calledBy(nodes.getNode(id).operator) {
        nodes.withdrawEarnings(id);
    }

    /// The stake is refused until the unbonding ends at `endsAt`, and comes out then.
    function withdrawStakeAt(uint64 id, uint40 endsAt) internal {
        vm.prank(nodes.getNode(id).operator);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_StillUnbonding.selector, id, endsAt));
        nodes.withdrawStake(id);
        vm.warp(endsAt);
        withdrawStake(id);
    }

    // ---------------------------------------------------------------- jobs

    function postJob() internal returns (uint64) {
        return postJob(h100Job(), BOUNTY, uint40(block.timestamp + 1 days));
    }

    function postJob(JobRequirements memory requirements, uint96 bounty, uint40 deadline)
        internal
        returns (uint64 jobId)
    {
        vm.prank(submitter);
        jobId = market.postJob(requirements, bounty, deadline, spec());
        sync();
    }

    function assign(uint64 jobId, uint64 nodeId) internal calledBy(matcher) {
        market.assign(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
    }

    function claim(uint64 jobId, uint64 nodeId) internal calledBy(agentOf[nodeId]) {
        market.claim(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
    }

    function submit(uint64 jobId) internal {
        submit(jobId, keccak256("result"));
    }

    function submit(uint64 jobId, bytes32 resultHash) internal calledBy(agentOf[jobs[jobId].state.nodeId()]) {
        market.submitResult(jobId, jobs[jobId].state, resultHash, "gantry://results/1");
    }

    /// The rule of a reject's charge, stated: free for the grace (30 s, at most a tenth of
    /// the runtime), then the share of one slash that the time held past it is of the
    /// rest of the runtime.
    function rejectCharge(uint256 slash, uint256 held, uint256 maxRuntime) internal pure returns (uint256) {
        uint256 grace = maxRuntime / 10 < 30 ? maxRuntime / 10 : 30;
        return held <= grace ? 0 : slash * (held - grace) / (maxRuntime - grace);
    }

    function reject(uint64 jobId) internal calledBy(agentOf[jobs[jobId].state.nodeId()]) {
        market.reject(jobId, jobs[jobId].terms, jobs[jobId].state, "bad image");
    }

    function finalize(uint64 jobId) internal {
        vm.warp(jobs[jobId].state.until());
        market.finalize(jobId, jobs[jobId].state);
        sync();
    }

    function accept(uint64 jobId) internal calledBy(jobs[jobId].terms.submitter()) {
        market.accept(jobId, jobs[jobId].terms, jobs[jobId].state);
    }

    function dispute(uint64 jobId) internal calledBy(jobs[jobId].terms.submitter()) {
        market.dispute(jobId, jobs[jobId].terms, jobs[jobId].state);
    }

    function resolve(uint64 jobId, bool providerWins) internal calledBy(arbiter) {
        market.resolve(jobId, jobs[jobId].terms, jobs[jobId].state, providerWins);
    }

    function settleDispute(uint64 jobId) internal {
        vm.warp(jobs[jobId].state.until());
        vm.prank(stranger);
        market.settleDispute(jobId, jobs[jobId].terms, jobs[jobId].state);
        sync();
    }

    function reclaim(uint64 jobId) internal calledBy(stranger) {
        market.reclaim(jobId, jobs[jobId].terms, jobs[jobId].state);
    }

    function cancel(uint64 jobId) internal calledBy(jobs[jobId].terms.submitter()) {
        market.cancel(jobId, jobs[jobId].terms, jobs[jobId].state);
    }

    function expire(uint64 jobId) internal calledBy(stranger) {
        market.expire(jobId, jobs[jobId].terms, jobs[jobId].state);
    }

    /// A stranger's reclaim of the job is refused: the attempt is not at fault.
    function expectNotReclaimable(uint64 jobId) internal {
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotReclaimable.selector, jobId));
        market.reclaim(jobId, jobs[jobId].terms, jobs[jobId].state);
    }

    /// Neither the matcher (assign) nor the node's agent (claim) can give the job to the
    /// node: both are refused with `reason`.
    function expectCannotTake(uint64 jobId, uint64 nodeId, bytes memory reason) internal {
        vm.prank(matcher);
        vm.expectRevert(reason);
        market.assign(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
        vm.prank(agentOf[nodeId]);
        vm.expectRevert(reason);
        market.claim(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
    }

    /// The admin replaces the market's parameters (a new policy version).
    function setParams(MarketParams memory p) internal calledBy(admin) {
        market.setParams(p);
    }

    /// A batch of two assignments (job `a` to node `nodeA`, `b` to `nodeB`) with the folded
    /// terms and states.
    function batchOf(uint64 a, uint64 nodeA, uint64 b, uint64 nodeB) internal view returns (Assignment[] memory batch) {
        batch = new Assignment[](2);
        batch[0] = Assignment(a, nodeA, jobs[a].terms, jobs[a].state);
        batch[1] = Assignment(b, nodeB, jobs[b].terms, jobs[b].state);
    }

    function assignBatch(Assignment[] memory batch) internal calledBy(matcher) {
        market.assignBatch(batch);
    }

    /// Two jobs' ids and folded states, as `finalizeBatch` takes them.
    function idsAndStates(uint64 a, uint64 b) internal view returns (uint64[] memory ids, JobState[] memory states) {
        ids = new uint64[](2);
        ids[0] = a;
        ids[1] = b;
        states = new JobState[](2);
        states[0] = jobs[a].state;
        states[1] = jobs[b].state;
    }

    /// A job run to its result on a fresh node: (jobId, nodeId).
    function submittedJob() internal returns (uint64 jobId, uint64 nodeId) {
        nodeId = lastNode == 0 ? registerNode() : lastNode;
        jobId = postJob();
        assign(jobId, nodeId);
        submit(jobId);
    }

    function status(uint64 jobId) internal view returns (JobStatus) {
        return jobs[jobId].state.status();
    }

    function node(uint64 nodeId) internal view returns (NodeInfo memory) {
        return nodes.getNode(nodeId);
    }

    // ---------------------------------------------------------------- the fold

    /// Folds the logs recorded since the last call into `jobs` and the replayed balances.
    function sync() internal {
        Vm.Log[] memory logs = vm.getRecordedLogs();
        for (uint256 i; i < logs.length; ++i) {
            if (logs[i].emitter == address(market)) apply_(logs[i]);
        }
    }

    function apply_(Vm.Log memory log) internal {
        bytes32 t = log.topics[0];
        if (t == IJobMarket.JobPosted.selector) {
            uint64 jobId = uint64(uint256(log.topics[1]));
            (JobTerms memory terms, uint96 fromCredits,) = abi.decode(log.data, (JobTerms, uint96, bytes));
            replayCredits[terms.submitter()] -= fromCredits;
            jobs[jobId].terms = terms;
            JobPolicy memory p = policies[terms.policy()];
            jobs[jobId].state = JobState({
                terms: keccak256(abi.encode(terms)),
                fields: (uint256(uint8(JobStatus.Open)) << 248) | (uint256(terms.bounty()) << 48)
                    | (uint256(p.feeBps) << 32) | p.challengeWindow
            });
            replayEscrow += terms.escrow();
            lastJob = jobId;
        } else if (t == IVerificationEvents.VerifiedJobPosted.selector) {
            // After `JobPosted`: the verified state replaces the two-word one.
            uint64 jobId = uint64(uint256(log.topics[1]));
            (, uint96 seatStake, uint40 commitEnd) = abi.decode(log.data, (VerifyPolicy, uint96, uint40));
            JobState memory s = jobs[jobId].state;
            if (commitEnd != 0) s.moved(JobStatus.Committing, 0, 0, 0, commitEnd);
            jobs[jobId].state = s;
            verified[jobId] = VerifiedState({
                terms: s.terms,
                fields: s.fields,
                seats: 0,
                draw: (uint256(commitEnd) << 48) | (uint256(seatStake) << 88),
                result: bytes32(0)
            });
        } else if (t == IVerificationEvents.DrawArmed.selector) {
            uint64 jobId = uint64(uint256(log.topics[1]));
            (uint40 drawBlock, uint8 round) = abi.decode(log.data, (uint40, uint8));
            VerifiedState storage v = verified[jobId];
            v.draw = (v.draw & ~uint256(type(uint48).max)) | (uint256(round) << 40) | drawBlock;
        } else if (t == IVerificationEvents.SeatDrawn.selector) {
            (uint8 seat, uint40 until, uint96 locked) = abi.decode(log.data, (uint8, uint40, uint96));
            uint256 fields = (uint256(1) << 248) | (uint256(uint48(uint256(log.topics[2]))) << 200)
                | (uint256(block.timestamp) << 160) | (uint256(until) << 120) | locked;
            seatOf[uint64(uint256(log.topics[1]))][seat] = Seat(fields, 0, 0);
        } else if (t == IVerificationEvents.Drawn.selector) {
            uint64 jobId = uint64(uint256(log.topics[1]));
            (uint8 round, uint256 seats) = abi.decode(log.data, (uint8, uint256));
            VerifiedState storage v = verified[jobId];
            v.seats = seats;
            v.draw = (v.draw & ~uint256(type(uint48).max)) | (uint256(round + 1) << 40);
        } else if (t == IVerificationEvents.SealCommitted.selector) {
            (uint8 seat, bytes32 seal) = abi.decode(log.data, (uint8, bytes32));
            Seat storage st = seatOf[uint64(uint256(log.topics[1]))][seat];
            st.fields = withPhase(st.fields, 2);
            st.seal = seal;
        } else if (t == IVerificationEvents.ResultRevealed.selector) {
            (uint8 seat, bytes32 digest) = abi.decode(log.data, (uint8, bytes32));
            Seat storage st = seatOf[uint64(uint256(log.topics[1]))][seat];
            st.fields = withPhase(st.fields, 3);
            st.digest = digest;
        } else if (t == IVerificationEvents.SeatFreed.selector) {
            // A decline leaves the seat Declined, its lock gone (a reclaim vacates it next).
            (uint8 seat, bool fault,,) = abi.decode(log.data, (uint8, bool, uint96, uint96));
            Seat storage st = seatOf[uint64(uint256(log.topics[1]))][seat];
            if (!fault) st.fields = withPhase(st.fields, 4) & ~uint256(type(uint96).max);
        } else if (t == IVerificationEvents.SeatVacated.selector) {
            uint64 jobId = uint64(uint256(log.topics[1]));
            (uint8 seat, bool fault) = abi.decode(log.data, (uint8, bool));
            delete seatOf[jobId][seat];
            VerifiedState storage v = verified[jobId];
            v.seats &= ~(uint256(type(uint48).max) << (48 * uint256(seat)));
            uint256 faults = uint8(v.fields >> 240) + (fault ? 1 : 0);
            uint256 barred = uint8(v.fields >> 232) + 1;
            v.fields = (v.fields & ~(uint256(type(uint16).max) << 232)) | (faults << 240) | (barred << 232);
        } else if (t == IVerificationEvents.RevealsOpened.selector) {
            VerifiedState storage v = verified[uint64(uint256(log.topics[1]))];
            uint40 revealBy = abi.decode(log.data, (uint40));
            v.fields = (v.fields & ~(uint256(type(uint8).max) << 248) & ~(uint256(type(uint40).max) << 144))
                | (uint256(uint8(JobStatus.Revealing)) << 248) | (uint256(revealBy) << 144);
        } else if (t == IVerificationEvents.SeatReleased.selector) {
            (uint8 seat,) = abi.decode(log.data, (uint8, uint96));
            delete seatOf[uint64(uint256(log.topics[1]))][seat];
        } else if (t == IVerificationEvents.ReplicaPaid.selector) {
            (uint96 payout, uint96 fee) = abi.decode(log.data, (uint96, uint96));
            replayEarnings[uint64(uint256(log.topics[2]))] += payout;
            replayFeesOwed[uint64(uint256(log.topics[2]))] += fee;
            replayEscrow -= uint256(payout) + fee;
        } else if (t == IVerificationEvents.ReplicaForfeited.selector) {
            uint96 forfeited = abi.decode(log.data, (uint96));
            replayTreasury += forfeited;
            replayEscrow -= forfeited;
        } else if (t == IVerificationEvents.JobVerified.selector) {
            uint64 jobId = uint64(uint256(log.topics[1]));
            (,, uint96 refund) = abi.decode(log.data, (bytes32, uint8, uint96));
            settleRefund(jobId, refund, JobStatus.Completed);
        } else if (t == IVerificationEvents.RefereesRequested.selector) {
            uint64 jobId = uint64(uint256(log.topics[1]));
            (uint96 bond, uint96 prepay, uint96 fromCredits, uint40 commitEnd) =
                abi.decode(log.data, (uint96, uint96, uint96, uint40));
            VerifiedState storage v = verified[jobId];
            v.fields = (v.fields & ~(uint256(type(uint8).max) << 248) & ~(uint256(type(uint40).max) << 144))
                | (uint256(uint8(JobStatus.Committing)) << 248) | (uint256(commitEnd) << 144);
            v.seats = 0;
            v.draw = (uint256(commitEnd) << 48) | (v.draw & (uint256(type(uint96).max) << 88));
            replayCredits[jobs[jobId].terms.submitter()] -= fromCredits;
            replayEscrow += uint256(bond) + prepay;
        } else if (t == IVerificationEvents.RefereesDecided.selector) {
            uint64 jobId = uint64(uint256(log.topics[1]));
            (uint8 outcome,, uint8 paid, uint96 toSubmitter, uint96 toProvider, uint40 until) =
                abi.decode(log.data, (uint8, bytes32, uint8, uint96, uint96, uint40));
            replayCredits[jobs[jobId].terms.submitter()] += toSubmitter;
            replayEarnings[uint64(uint256(log.topics[2]))] += toProvider;
            replayEscrow -= uint256(toSubmitter) + toProvider;
            if (outcome == 2) {
                VerifiedState storage v = verified[jobId];
                v.fields = (v.fields & ~(uint256(type(uint8).max) << 248) & ~(uint256(type(uint40).max) << 144))
                    | (uint256(uint8(JobStatus.Arbitrating)) << 248) | (uint256(until) << 144);
                v.seats = 0;
                v.draw = (v.draw & ~uint256(type(uint40).max)) | (uint256(paid) << 184);
            }
        } else if (t == IVerificationEvents.HoldForfeited.selector) {
            uint64 jobId = uint64(uint256(log.topics[1]));
            uint96 amount = abi.decode(log.data, (uint96));
            replayStake[uint64(uint256(log.topics[2]))] -= amount;
            replayCredits[jobs[jobId].terms.submitter()] += amount;
        } else if (t == IJobMarket.MarketParamsUpdated.selector) {
            (MarketParams memory p, uint32 version) = abi.decode(log.data, (MarketParams, uint32));
            policies[version] = JobPolicy({
                feeBps: p.protocolFeeBps,
                challengeWindow: p.challengeWindow,
                disputeBond: p.disputeBond,
                disputePeriod: p.disputePeriod,
                slashBps: p.slashBps,
                maxAttempts: p.maxAttempts
            });
        } else if (t == IJobMarket.JobAssigned.selector) {
            JobState memory s = jobs[uint64(uint256(log.topics[1]))].state;
            (, uint40 until) = abi.decode(log.data, (bool, uint40));
            s.moved(JobStatus.Assigned, s.faults(), s.barred(), uint64(uint256(log.topics[2])), until);
            jobs[uint64(uint256(log.topics[1]))].state = s;
            movedVerified(uint64(uint256(log.topics[1])), s);
        } else if (t == IJobMarket.ResultSubmitted.selector) {
            JobState memory s = jobs[uint64(uint256(log.topics[1]))].state;
            (bytes32 resultHash,, uint40 until) = abi.decode(log.data, (bytes32, string, uint40));
            s.moved(JobStatus.Submitted, s.faults(), s.barred(), s.nodeId(), until);
            jobs[uint64(uint256(log.topics[1]))].state = s;
            movedVerified(uint64(uint256(log.topics[1])), s);
            if (verified[uint64(uint256(log.topics[1]))].terms != 0) {
                verified[uint64(uint256(log.topics[1]))].result = resultHash;
            }
        } else if (t == IJobMarket.JobDisputed.selector) {
            JobState memory s = jobs[uint64(uint256(log.topics[1]))].state;
            (uint96 bond,, uint40 until) = abi.decode(log.data, (uint96, uint96, uint40));
            s.moved(JobStatus.Disputed, s.faults(), s.barred(), s.nodeId(), until);
            jobs[uint64(uint256(log.topics[1]))].state = s;
            replayEscrow += bond;
        } else if (t == IJobMarket.DisputeResolved.selector) {
            uint64 jobId = uint64(uint256(log.topics[1]));
            (,, uint96 toSubmitter, uint96 toProvider,) = abi.decode(log.data, (bool, bool, uint96, uint96, address));
            replayCredits[jobs[jobId].terms.submitter()] += toSubmitter;
            replayEarnings[uint64(uint256(log.topics[2]))] += toProvider;
            replayEscrow -= uint256(toSubmitter) + toProvider;
        } else if (t == IJobMarket.JobCompleted.selector) {
            uint64 jobId = uint64(uint256(log.topics[1]));
            (uint96 payout, uint96 fee,) = abi.decode(log.data, (uint96, uint96, uint8));
            replayEarnings[uint64(uint256(log.topics[2]))] += payout;
            replayFeesOwed[uint64(uint256(log.topics[2]))] += fee;
            replayEscrow -= uint256(payout) + fee;
            settled(jobId, JobStatus.Completed);
        } else if (t == IJobMarket.JobRequeued.selector) {
            JobState memory s = jobs[uint64(uint256(log.topics[1]))].state;
            (uint8 faults, uint8 barred) = abi.decode(log.data, (uint8, uint8));
            s.moved(JobStatus.Open, faults, barred, 0, 0);
            jobs[uint64(uint256(log.topics[1]))].state = s;
            movedVerified(uint64(uint256(log.topics[1])), s);
        } else if (t == IJobMarket.JobFailed.selector) {
            uint64 jobId = uint64(uint256(log.topics[1]));
            (, uint96 refund) = abi.decode(log.data, (uint8, uint96));
            settleRefund(jobId, refund, JobStatus.Failed);
        } else if (t == IJobMarket.JobCancelled.selector) {
            uint64 jobId = uint64(uint256(log.topics[1]));
            settleRefund(jobId, abi.decode(log.data, (uint96)), JobStatus.Cancelled);
        } else if (t == IJobMarket.JobExpired.selector) {
            uint64 jobId = uint64(uint256(log.topics[1]));
            settleRefund(jobId, abi.decode(log.data, (uint96)), JobStatus.Expired);
        } else if (t == IJobMarket.Deposited.selector) {
            replayCredits[address(uint160(uint256(log.topics[1])))] += abi.decode(log.data, (uint256));
        } else if (t == IJobMarket.Withdrawn.selector) {
            replayCredits[address(uint160(uint256(log.topics[1])))] -= abi.decode(log.data, (uint256));
        } else if (t == IJobMarket.TreasuryWithdrawn.selector) {
            replayTreasury -= abi.decode(log.data, (uint256));
        } else if (t == INodeRegistry.NodeRegistered.selector) {
            uint64 nodeId = uint64(uint256(log.topics[1]));
            (NodeCapabilities memory caps,, uint96 stake,) =
                abi.decode(log.data, (NodeCapabilities, string, uint96, uint32));
            capsOf[nodeId] = caps;
            agentOf[nodeId] = address(uint160(uint256(log.topics[3])));
            replayStake[nodeId] = stake;
            lastNode = nodeId;
        } else if (t == INodeRegistry.NodeCapabilitiesUpdated.selector) {
            (NodeCapabilities memory caps,) = abi.decode(log.data, (NodeCapabilities, string));
            capsOf[uint64(uint256(log.topics[1]))] = caps;
        } else if (t == INodeRegistry.NodeAgentChanged.selector) {
            agentOf[uint64(uint256(log.topics[1]))] = address(uint160(uint256(log.topics[2])));
        } else if (t == INodeRegistry.NodeStakeAdded.selector) {
            (uint96 amount,) = abi.decode(log.data, (uint96, uint96));
            replayStake[uint64(uint256(log.topics[1]))] += amount;
        } else if (t == INodeRegistry.NodeStakeWithdrawn.selector) {
            (uint96 amount,) = abi.decode(log.data, (uint96, uint96));
            replayStake[uint64(uint256(log.topics[1]))] -= amount;
        } else if (t == INodeRegistry.NodeSlashed.selector) {
            (uint96 amount,) = abi.decode(log.data, (uint96, uint96));
            replayStake[uint64(uint256(log.topics[1]))] -= amount;
            replayTreasury += amount;
        } else if (t == INodeRegistry.FeesSwept.selector) {
            uint96 fees = abi.decode(log.data, (uint96));
            replayFeesOwed[uint64(uint256(log.topics[1]))] -= fees;
            replayTreasury += fees;
        } else if (t == INodeRegistry.NodeEarningsWithdrawn.selector) {
            replayEarnings[uint64(uint256(log.topics[1]))] -= abi.decode(log.data, (uint96));
        }
    }

    function settleRefund(uint64 jobId, uint96 refund, JobStatus final_) internal {
        replayCredits[jobs[jobId].terms.submitter()] += refund;
        replayEscrow -= refund;
        settled(jobId, final_);
    }

    /// A settled job: the market cleared its word; the fold keeps its last status.
    function settled(uint64 jobId, JobStatus final_) internal {
        JobState memory s = jobs[jobId].state;
        s.moved(final_, s.faults(), s.barred(), s.nodeId(), 0);
        jobs[jobId].state = s;
        VerifiedState storage v = verified[jobId];
        if (v.terms != 0) {
            v.fields = (v.fields & ~(uint256(type(uint8).max) << 248)) | (uint256(uint8(final_)) << 248);
        }
    }

    /// A refereed job moves as a tier-none job does (the same `fields`).
    function movedVerified(uint64 jobId, JobState memory s) internal {
        if (verified[jobId].terms != 0) verified[jobId].fields = s.fields;
    }

    /// A seat's `fields` in phase `phase` (1 Seated, 2 Committed, 3 Revealed, 4 Declined).
    function withPhase(uint256 fields, uint8 phase) internal pure returns (uint256) {
        return (uint256(phase) << 248) | (fields & ((1 << 248) - 1));
    }

    /// The replayed balances equal the market's, and the market holds exactly what it owes.
    function assertReplay() internal view {
        uint256 owed = replayTreasury + replayEscrow;
        assertEq(market.treasuryBalance(), replayTreasury, "treasury");
        for (uint256 i; i < accounts.length; ++i) {
            assertEq(market.creditOf(accounts[i]), replayCredits[accounts[i]], "credits");
            owed += replayCredits[accounts[i]];
        }
        for (uint64 n = 1; n <= lastNode; ++n) {
            NodeInfo memory info = nodes.getNode(n);
            assertEq(info.stake, replayStake[n], "stake");
            assertEq(info.earnings, replayEarnings[n], "earnings");
            assertEq(info.feesOwed, replayFeesOwed[n], "fees owed");
            owed += replayStake[n] + replayEarnings[n] + replayFeesOwed[n];
        }
        assertEq(token.balanceOf(address(market)), owed, "the market holds what it owes");
    }
}
