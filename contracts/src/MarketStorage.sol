// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";

import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {JobCodec} from "./types/JobCodec.sol";
import {
    DETERMINISTIC_DOCKER,
    ENGINE_COUNT,
    ENGINE_WASM,
    JobPolicy,
    JobRequirements,
    JobTerms,
    NodeCapabilities,
    NodeStatus,
    VerifyParams
} from "./types/Types.sol";

/// @title MarketStorage
/// @notice The storage of the market and the rules its parts share. `JobMarket` (jobs,
/// admin), `NodeRegistry` (nodes) and `Verification` (verified jobs) — the last two run by
/// the market through `delegatecall`, as Compound's Comet runs its extension — inherit it
/// and declare no storage of their own, so all see the same layout. Slots are packed for
/// the job's path: see each struct.
abstract contract MarketStorage is AccessControl, EIP712, ReentrancyGuardTransient {
    using JobCodec for JobTerms;

    bytes32 public constant MATCHER_ROLE = keccak256("MATCHER_ROLE");
    bytes32 public constant ARBITER_ROLE = keccak256("ARBITER_ROLE");
    bytes32 public constant PAUSER_ROLE = keccak256("PAUSER_ROLE");

    uint16 internal constant BPS = 10_000;
    /// @dev The `engines` bits that can take a verified seat: WASM, and the deterministic
    /// Docker sandbox.
    uint8 internal constant VERIFIABLE = uint8(1 << ENGINE_WASM | 1 << DETERMINISTIC_DOCKER);
    /// @notice Longest metadata URI, result URI or reject reason, bytes.
    uint256 public constant MAX_TEXT_BYTES = 256;
    /// @notice Largest job spec accepted, bytes. It is emitted in full in JobPosted.
    uint256 public constant MAX_SPEC_BYTES = 16_384;
    uint8 internal constant MAX_PRIORITY = 10;
    /// @notice A job's dispute bond is at least this share of its bounty (and at least the
    /// market's `disputeBond`).
    uint16 public constant MIN_BOND_BPS = 1_000;
    /// @notice A reject this soon after the assignment, seconds, is free: the time a node
    /// needs to see an assignment and answer it (a job it cannot run, one beyond its slots
    /// that replicated matchers raced to give it). At most a tenth of the job's max runtime.
    uint32 public constant REJECT_GRACE = 30;
    /// @notice Longest max runtime a job may ask for, seconds.
    uint32 public constant MAX_RUNTIME = 7 days;

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
    /// payment pays no zero-to-nonzero write. `poolIndex`: the node's place in the
    /// verification pool, 1-based (0: not a member).
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
        uint32 poolIndex;
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
    /// @dev The verification rules of each policy version (`Verification.setVerifyParams`).
    mapping(uint32 version => VerifyParams) internal _verify;
    /// @dev The pool's rule's floor: the free stake a member needs (the latest
    /// `setVerifyParams`'; 0: no pool).
    uint96 internal _poolFloor;
    /// @dev The verification pool: the nodes a verified job's seats are drawn from (Active,
    /// serving WASM, free stake at least the current `poolFloor`), in no order.
    uint64[] internal _pool;
    /// @dev A pool position's value at the start of a block it was written in:
    /// `block << 64 | nodeId`; the draw reads the pool as it stood when its block began.
    mapping(uint256 index => uint256) internal _poolPrev;
    /// @dev The pool's length at the start of the block it last changed in: `block << 64 |
    /// length`.
    uint256 internal _poolLengthPrev;
    /// @dev A verified job's seats: the hash of each `Seat` (0: empty).
    mapping(uint64 jobId => mapping(uint256 seat => bytes32)) internal _seats;
    /// @dev Pool members that take WASM seats, and Docker seats (a member may take both):
    /// a replicated job is posted only while its kind has `minPool` members. A member's
    /// engines never change in the pool (`updateCapabilities` changing them takes it out
    /// first), so leaving takes off what joining added.
    PoolKinds internal _poolKinds;
    /// @dev `_poolKinds` at the start of the block it last changed in: `block << 64 | wasm
    /// << 32 | sandboxed`; a draw counts the kinds as its block began, as it reads the pool.
    uint256 internal _poolKindsPrev;

    struct PoolKinds {
        uint32 wasm;
        uint32 sandboxed;
    }

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

    /// @dev A job's dispute bond: the policy's floor, or a share of the bounty if larger.
    function _bond(JobPolicy memory policy_, uint96 bounty) internal pure returns (uint96) {
        uint96 share = uint96((uint256(bounty) * MIN_BOND_BPS) / BPS);
        return share > policy_.disputeBond ? share : policy_.disputeBond;
    }

    // ---------------------------------------------------------------- the pool

    /// @dev Joins or leaves the verification pool as the node now meets its rule or not:
    /// `syncPool`, which anyone may send (a worker sends it for its own node). A node joins
    /// only so; it leaves at once when a registry call ends its membership (`_poolDrop`),
    /// and through `syncPool` after what `JobMarket` changes (a slash, a dispute's hold).
    function _poolSync(uint64 nodeId, NodeRecord storage node) internal {
        bool member = _poolRule(node);
        uint32 index = node.poolIndex;
        if (member == (index != 0)) return;
        if (member) _poolJoin(nodeId, node);
        else _poolLeave(nodeId, node, index);
    }

    /// @dev Takes the node out of the pool if it is in it.
    function _poolDrop(uint64 nodeId, NodeRecord storage node) internal {
        uint32 index = node.poolIndex;
        if (index != 0) _poolLeave(nodeId, node, index);
    }

    /// @dev Active, serving WASM or verified Docker, and free stake at least the pool's floor.
    function _poolRule(NodeRecord storage node) internal view returns (bool) {
        NodeHot memory hot = node.hot;
        if (hot.status != NodeStatus.Active || hot.engines & VERIFIABLE == 0) return false;
        uint96 floor = _poolFloor;
        return floor != 0 && node.stake - node.locked >= floor;
    }

    function _poolJoin(uint64 nodeId, NodeRecord storage node) internal {
        _poolCount(node.hot.engines, true);
        uint256 length = _pool.length;
        // A position at or past the block's starting length is never drawn from: only the
        // length is saved.
        _poolSaveLength(length);
        _pool.push(nodeId);
        node.poolIndex = uint32(length + 1);
        emit INodeRegistry.PoolJoined(nodeId, uint32(length + 1));
    }

    /// @dev Swap-and-pop: the last member takes the leaver's place.
    function _poolLeave(uint64 nodeId, NodeRecord storage node, uint32 index) internal {
        _poolCount(node.hot.engines, false);
        uint256 last = _pool.length - 1;
        _poolSaveLength(last + 1);
        _poolSave(last, _pool[last]);
        if (index - 1 != last) {
            uint64 moved = _pool[last];
            _poolSave(index - 1, nodeId);
            _pool[index - 1] = moved;
            _nodes[moved].poolIndex = index;
        }
        _pool.pop();
        node.poolIndex = 0;
        emit INodeRegistry.PoolLeft(nodeId);
    }

    /// @dev Counts a member of `engines` in or out of its kinds (`_poolKinds`).
    function _poolCount(uint8 engines, bool joins) internal {
        PoolKinds memory kinds = _poolKinds;
        if (_poolKindsPrev >> 64 != block.number) {
            _poolKindsPrev = (block.number << 64) | (uint256(kinds.wasm) << 32) | kinds.sandboxed;
        }
        if ((engines >> ENGINE_WASM) & 1 == 1) kinds.wasm = joins ? kinds.wasm + 1 : kinds.wasm - 1;
        if ((engines >> DETERMINISTIC_DOCKER) & 1 == 1) {
            kinds.sandboxed = joins ? kinds.sandboxed + 1 : kinds.sandboxed - 1;
        }
        _poolKinds = kinds;
    }

    /// @dev The members of each kind as this block began (`_poolKinds`).
    function _poolKindsAtBlockStart() internal view returns (uint32 wasm, uint32 sandboxed) {
        uint256 prev = _poolKindsPrev;
        if (prev >> 64 == block.number) return (uint32(prev >> 32), uint32(prev));
        return (_poolKinds.wasm, _poolKinds.sandboxed);
    }

    /// @dev Keeps position `i`'s value as it was before its first write in this block.
    function _poolSave(uint256 i, uint64 value) internal {
        if (_poolPrev[i] >> 64 != block.number) _poolPrev[i] = (block.number << 64) | value;
    }

    function _poolSaveLength(uint256 length) internal {
        if (_poolLengthPrev >> 64 != block.number) _poolLengthPrev = (block.number << 64) | length;
    }

    /// @dev The pool's length as this block began.
    function _poolLengthAtBlockStart() internal view returns (uint256) {
        uint256 prev = _poolLengthPrev;
        return prev >> 64 == block.number ? uint64(prev) : _pool.length;
    }

    /// @dev Position `i` of the pool as this block began (`i` below that length).
    function _poolAtBlockStart(uint256 i) internal view returns (uint64) {
        uint256 prev = _poolPrev[i];
        return prev >> 64 == block.number ? uint64(prev) : _pool[i];
    }

    // ---------------------------------------------------------------- shared checks

    function _checkRequirements(JobRequirements calldata requirements) internal pure {
        if (
            requirements.priority == 0 || requirements.priority > MAX_PRIORITY || requirements.maxRuntime == 0
                || requirements.maxRuntime > MAX_RUNTIME
                || (requirements.gpuModel != bytes32(0) && requirements.minGpuCount == 0)
                || requirements.engine >= ENGINE_COUNT
                || (requirements.engine == ENGINE_WASM
                    && (requirements.minGpuCount != 0 || requirements.minVramMiB != 0))
        ) revert IJobMarket.JobMarket_InvalidRequirements();
    }

    function _checkSpec(uint256 length) internal pure {
        if (length == 0) revert IJobMarket.JobMarket_EmptySpec();
        if (length > MAX_SPEC_BYTES) revert IJobMarket.JobMarket_SpecTooLarge(length, MAX_SPEC_BYTES);
    }

    /// @dev The contract's eligibility rule (`gantry_protocol::eligibility` mirrors it): the
    /// node offers the job's engine, GPU model and count, memory, CPU and RAM, at a price
    /// within the job's.
    function _checkEligible(JobTerms calldata required, NodeHot memory offered) internal pure {
        uint8 engine = required.engine();
        if ((offered.engines >> engine) & 1 == 0) revert IJobMarket.JobMarket_EngineNotServed(engine);
        bytes32 model = required.gpuModel;
        if (model != bytes32(0) && _modelTag(model) != offered.gpuModel) {
            revert IJobMarket.JobMarket_GpuModelMismatch(model);
        }
        uint16 gpus = required.minGpuCount();
        if (offered.gpuCount < gpus) revert IJobMarket.JobMarket_InsufficientGpus(gpus, offered.gpuCount);
        uint32 vram = required.minVramMiB();
        if (offered.vramMiB < vram) revert IJobMarket.JobMarket_InsufficientVram(vram, offered.vramMiB);
        uint16 cpus = required.minCpuCores();
        if (offered.cpuCores < cpus) revert IJobMarket.JobMarket_InsufficientCpu(cpus, offered.cpuCores);
        uint32 ram = required.minRamMiB();
        if (offered.ramMiB < ram) revert IJobMarket.JobMarket_InsufficientRam(ram, offered.ramMiB);
        uint256 maxPrice = required.maxPricePerGpuHour;
        if (offered.pricePerGpuHour > maxPrice) {
            revert IJobMarket.JobMarket_PriceTooHigh(maxPrice, offered.pricePerGpuHour);
        }
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
