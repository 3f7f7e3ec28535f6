// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {MarketStorage} from "./MarketStorage.sol";
import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {IVerificationEvents} from "./interfaces/IVerification.sol";
import {JobCodec} from "./types/JobCodec.sol";
import {JobStatus, JobTerms, Seat, VerifiedState} from "./types/Types.sol";

/// @title VerificationBase
/// @notice What the verified jobs' extensions share: `Verification` (posting, the draw,
/// seats, the replicated decision) and `Referees` (the refereed tier). Both run only
/// inside the JobMarket, which forwards their calls with `delegatecall`; their own
/// addresses hold nothing and refuse calls. Two contracts because one would not fit
/// the 24,576-byte limit (design 18, §5).
abstract contract VerificationBase is IVerificationEvents, MarketStorage {
    using JobCodec for JobTerms;
    using JobCodec for VerifiedState;
    using JobCodec for Seat;

    /// @dev A verified job's shortest max runtime: ten graces, so that a seat or a
    /// refereed provider always has the whole `REJECT_GRACE` to refuse a job it cannot run.
    uint32 internal constant MIN_VERIFIED_RUNTIME = 10 * REJECT_GRACE;

    /// @dev Blocks between arming a draw and the first block it may be drawn in: the
    /// draw's seed is that block's `prevrandao`, unknown when the round is armed.
    uint40 internal constant DRAW_DELAY = 2;
    /// @dev Draw rounds a job may use (the first and its refills).
    uint8 internal constant MAX_ROUNDS = 8;
    uint8 internal constant MAX_SEATS = 5;
    /// @dev A seat's phases (`Seat.fields`).
    uint8 internal constant SEATED = 1;
    uint8 internal constant COMMITTED = 2;
    uint8 internal constant REVEALED = 3;
    /// @dev Given back by its node (`rejectSeat`), its lock released, until vacated.
    uint8 internal constant DECLINED = 4;

    address private immutable _self = address(this);

    /// @dev Only the market's delegatecall is served (see `NodeRegistry.onlyDelegated`).
    modifier onlyDelegated() {
        if (address(this) == _self) revert Verification_OnlyThroughMarket();
        _;
    }

    constructor(IERC20 token_) MarketStorage(token_) {}

    /// @dev `state` is the job's (its hash is the job's word) and `terms` its terms.
    function _checkState(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state) internal view {
        if (_jobs[jobId] != keccak256(abi.encode(state))) revert IJobMarket.JobMarket_StaleState(jobId);
        if (keccak256(abi.encode(terms)) != state.terms) revert IJobMarket.JobMarket_WrongTerms(jobId);
    }

    /// @dev How a replicated job's seats revealed: `agreed` seats revealed `digest`, the
    /// most common digest; `quorum` when they are at least k. `filled`: seat words;
    /// `unrevealed`: seats committed and not revealed.
    struct Tally {
        uint256 filled;
        uint256 unrevealed;
        bytes32 digest;
        uint8 agreed;
        bool quorum;
        /// Set by the caller before `_settleSeats`: a Docker job's (see there).
        bool sandboxed;
        /// Written by `_settleSeats`: seats paid, and seats whose share went to the treasury.
        uint256 paid;
        uint256 forfeited;
    }

    function _tally(Seat[] calldata seats, uint256 n, uint8 k) internal pure returns (Tally memory t) {
        for (uint256 i; i < n; ++i) {
            uint8 phase = seats[i].phase();
            if (phase == 0) continue;
            ++t.filled;
            if (phase == COMMITTED) ++t.unrevealed;
            if (phase != REVEALED) continue;
            uint8 same;
            for (uint256 j; j < n; ++j) {
                if (seats[j].phase() == REVEALED && seats[j].digest == seats[i].digest) ++same;
            }
            if (same > t.agreed) (t.agreed, t.digest) = (same, seats[i].digest);
        }
        // 2k > n: at most one digest reaches k.
        t.quorum = t.agreed >= k;
    }

    /// @dev Whether revealed seat `i`'s digest is another revealed seat's too.
    function _matched(Seat[] calldata seats, uint256 n, uint256 i) internal pure returns (bool) {
        for (uint256 j; j < n; ++j) {
            if (j != i && seats[j].phase() == REVEALED && seats[j].digest == seats[i].digest) {
                return true;
            }
        }
        return false;
    }

    /// @dev Ends every seat of a decided job by the tally `t`; counts in `t` how many were
    /// paid (`bounty` - `fee` each, the fee owed to the treasury) and how many forfeited
    /// their share to the treasury. Paid: with the quorum, the seats that revealed its
    /// digest; without, each revealer another revealer matched. Slashed: with the quorum,
    /// every other seat; without, a seat that committed and did not reveal, and one that
    /// never committed only if two seats agreed (the job ran): a lone digest cannot be told
    /// a lie, and a job nobody showed to run slashes nobody who could not run it. A
    /// declined seat's lock ended with its decline; its word goes with the job.
    /// `t.sandboxed` (a Docker job, deterministic by its submitter's word only): a seat
    /// that revealed and is not paid (apart from the quorum, or alone without one) is not
    /// slashed, since a job that is not deterministic, or a different CPU, can part honest
    /// nodes; its share goes to the treasury, not back to the submitter, who could
    /// otherwise part the seats on purpose and read its answer from the public digests for
    /// free (design 18, §1).
    function _settleSeats(uint64 jobId, Seat[] calldata seats, uint256 n, Tally memory t, uint96 bounty, uint96 fee)
        internal
    {
        for (uint256 i; i < n; ++i) {
            uint8 phase = seats[i].phase();
            if (phase == 0) continue;
            if (phase == DECLINED) {
                delete _seats[jobId][i];
                continue;
            }
            bool pays = phase == REVEALED && (t.quorum ? seats[i].digest == t.digest : _matched(seats, n, i));
            if (t.sandboxed && phase == REVEALED && !pays) {
                ++t.forfeited;
                _settleSeat(jobId, i, seats[i], 0, 0, false);
                _treasury.balance += bounty;
                emit ReplicaForfeited(jobId, seats[i].nodeId(), bounty);
                continue;
            }
            bool slashes = !pays && (t.quorum || phase == COMMITTED || (phase == SEATED && t.agreed >= 2));
            _settleSeat(jobId, i, seats[i], pays ? bounty - fee : 0, pays ? fee : 0, slashes);
            if (pays) ++t.paid;
        }
    }

    /// @dev Ends a decided job's seat: releases its lock, pays it, slashes its seat stake,
    /// deletes its word.
    function _settleSeat(uint64 jobId, uint256 i, Seat calldata s, uint96 payout, uint96 fee, bool slashes) internal {
        uint64 nodeId = s.nodeId();
        NodeRecord storage node = _nodes[nodeId];
        uint96 locked = s.locked();
        node.locked -= locked;
        delete _seats[jobId][i];
        emit SeatReleased(jobId, nodeId, uint8(i), locked);
        if (payout != 0 || fee != 0) {
            node.earnings += payout;
            node.feesOwed += fee;
            emit ReplicaPaid(jobId, nodeId, payout, fee);
        }
        if (slashes) _slash(node, nodeId, jobId, locked);
        _poolSync(nodeId, node);
    }

    /// @dev `seats` is every seat's word, in order: entry i hashes to seat i's stored word
    /// (an empty seat: the zero entry against a zero word). A seat word and the job's
    /// `seats` entry are written together, so the entry's node is the word's.
    function _checkSeats(uint64 jobId, Seat[] calldata seats, uint256 n) internal view {
        if (seats.length != n) revert Verification_SeatMismatch(jobId, seats.length);
        for (uint256 i; i < n; ++i) {
            bytes32 word = _seats[jobId][i];
            bool matches = word == 0
                ? seats[i].fields == 0 && seats[i].seal == 0 && seats[i].digest == 0
                : word == keccak256(abi.encode(seats[i]));
            if (!matches) revert Verification_SeatMismatch(jobId, i);
        }
    }

    /// @dev The end of the job's reveal phase; reverts before it begins (Revealing: until
    /// its `until`; Committing past the commit phase's end: until that plus the window).
    function _revealBy(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state)
        internal
        view
        returns (uint40)
    {
        JobStatus status = state.status();
        if (status == JobStatus.Revealing) return state.until();
        if (status == JobStatus.Committing && block.timestamp > state.commitEnd()) {
            return state.commitEnd() + terms.revealWindow();
        }
        revert Verification_RevealNotOpen(jobId);
    }
}
