// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobRequirements, JobState, JobStatus, JobTerms, Seat, VerifiedState, VerifyPolicy} from "./Types.sol";

/// @title JobCodec
/// @notice Reads and writes the packed words of `JobTerms` and `JobState`. The layouts are
/// documented on the structs; `gantry_protocol::market` mirrors them bit for bit, and a test
/// on both sides checks them against each other.
library JobCodec {
    // ---------------------------------------------------------------- terms

    function pack(
        address submitter_,
        uint96 bounty_,
        bytes32 specHash_,
        JobRequirements calldata r,
        uint40 deadline_,
        uint32 policy_
    ) internal pure returns (JobTerms memory) {
        return JobTerms({
            party: (uint256(uint160(submitter_)) << 96) | bounty_,
            specHash: specHash_,
            gpuModel: r.gpuModel,
            limits: (uint256(r.engine) << 208) | (uint256(deadline_) << 168) | (uint256(r.maxRuntime) << 136)
                | (uint256(r.minGpuCount) << 120) | (uint256(r.minVramMiB) << 88) | (uint256(r.minCpuCores) << 72)
                | (uint256(r.minRamMiB) << 40) | (uint256(r.priority) << 32) | policy_,
            maxPricePerGpuHour: r.maxPricePerGpuHour
        });
    }

    function submitter(JobTerms calldata t) internal pure returns (address) {
        return address(uint160(t.party >> 96));
    }

    function bounty(JobTerms calldata t) internal pure returns (uint96) {
        return uint96(t.party);
    }

    function engine(JobTerms calldata t) internal pure returns (uint8) {
        return uint8(t.limits >> 208);
    }

    function deadline(JobTerms calldata t) internal pure returns (uint40) {
        return uint40(t.limits >> 168);
    }

    function maxRuntime(JobTerms calldata t) internal pure returns (uint32) {
        return uint32(t.limits >> 136);
    }

    function minGpuCount(JobTerms calldata t) internal pure returns (uint16) {
        return uint16(t.limits >> 120);
    }

    function minVramMiB(JobTerms calldata t) internal pure returns (uint32) {
        return uint32(t.limits >> 88);
    }

    function minCpuCores(JobTerms calldata t) internal pure returns (uint16) {
        return uint16(t.limits >> 72);
    }

    function minRamMiB(JobTerms calldata t) internal pure returns (uint32) {
        return uint32(t.limits >> 40);
    }

    function policy(JobTerms calldata t) internal pure returns (uint32) {
        return uint32(t.limits);
    }

    // The verification policy, in `limits`' high 40 bits (zero for tier none): tier 8 @248 |
    // size 8 @240 | quorum 8 @232 | revealWindow 16 @216.

    /// @dev `t` with verification policy `v`.
    function verified(JobTerms memory t, VerifyPolicy calldata v) internal pure returns (JobTerms memory) {
        t.limits |= (uint256(v.tier) << 248) | (uint256(v.size) << 240) | (uint256(v.quorum) << 232)
            | (uint256(v.revealWindow) << 216);
        return t;
    }

    function tier(JobTerms calldata t) internal pure returns (uint8) {
        return uint8(t.limits >> 248);
    }

    function size(JobTerms calldata t) internal pure returns (uint8) {
        return uint8(t.limits >> 240);
    }

    function quorum(JobTerms calldata t) internal pure returns (uint8) {
        return uint8(t.limits >> 232);
    }

    function revealWindow(JobTerms calldata t) internal pure returns (uint16) {
        return uint16(t.limits >> 216);
    }

    // ---------------------------------------------------------------- state

    /// @dev The `fields` of a newly posted (Open) job.
    function opened(uint96 bounty_, uint16 feeBps_, uint32 challengeWindow_) internal pure returns (uint256) {
        return (uint256(uint8(JobStatus.Open)) << 248) | (uint256(bounty_) << 48) | (uint256(feeBps_) << 32)
            | challengeWindow_;
    }

    /// @dev `fields` with status, faults, barred, node and `until` replaced (the rest is
    /// fixed at posting).
    function next(uint256 f, JobStatus status_, uint8 faults_, uint8 barred_, uint64 nodeId_, uint40 until_)
        internal
        pure
        returns (uint256)
    {
        return (uint256(uint8(status_)) << 248) | (uint256(faults_) << 240) | (uint256(barred_) << 232)
            | (uint256(uint48(nodeId_)) << 184) | (uint256(until_) << 144) | (f & ((1 << 144) - 1));
    }

    function status(JobState calldata s) internal pure returns (JobStatus) {
        return JobStatus(uint8(s.fields >> 248));
    }

    function faults(JobState calldata s) internal pure returns (uint8) {
        return uint8(s.fields >> 240);
    }

    function barred(JobState calldata s) internal pure returns (uint8) {
        return uint8(s.fields >> 232);
    }

    function nodeId(JobState calldata s) internal pure returns (uint64) {
        return uint64(uint48(s.fields >> 184));
    }

    function until(JobState calldata s) internal pure returns (uint40) {
        return uint40(s.fields >> 144);
    }

    function bounty(JobState calldata s) internal pure returns (uint96) {
        return uint96(s.fields >> 48);
    }

    function feeBps(JobState calldata s) internal pure returns (uint16) {
        return uint16(s.fields >> 32);
    }

    function challengeWindow(JobState calldata s) internal pure returns (uint32) {
        return uint32(s.fields);
    }

    // ---------------------------------------------------------------- verified state

    /// @dev The `draw` word: drawBlock 40 @0 | rounds 8 @40 | commitEnd 40 @48 | seatStake 96 @88.
    function draw(uint40 drawBlock_, uint8 rounds_, uint40 commitEnd_, uint96 seatStake_)
        internal
        pure
        returns (uint256)
    {
        return
            uint256(drawBlock_) | (uint256(rounds_) << 40) | (uint256(commitEnd_) << 48) | (uint256(seatStake_) << 88);
    }

    function status(VerifiedState calldata s) internal pure returns (JobStatus) {
        return JobStatus(uint8(s.fields >> 248));
    }

    function drawBlock(VerifiedState calldata s) internal pure returns (uint40) {
        return uint40(s.draw);
    }

    function rounds(VerifiedState calldata s) internal pure returns (uint8) {
        return uint8(s.draw >> 40);
    }

    function commitEnd(VerifiedState calldata s) internal pure returns (uint40) {
        return uint40(s.draw >> 48);
    }

    function seatStake(VerifiedState calldata s) internal pure returns (uint96) {
        return uint96(s.draw >> 88);
    }

    /// @dev Arbitrating: the referees paid from the prepay.
    function paidReferees(VerifiedState calldata s) internal pure returns (uint8) {
        return uint8(s.draw >> 184);
    }

    /// @dev The node in seat `i` (0: empty).
    function seat(VerifiedState calldata s, uint256 i) internal pure returns (uint64) {
        return uint64(uint48(s.seats >> (48 * i)));
    }

    function faults(VerifiedState calldata s) internal pure returns (uint8) {
        return uint8(s.fields >> 240);
    }

    function barred(VerifiedState calldata s) internal pure returns (uint8) {
        return uint8(s.fields >> 232);
    }

    function until(VerifiedState calldata s) internal pure returns (uint40) {
        return uint40(s.fields >> 144);
    }

    function bounty(VerifiedState calldata s) internal pure returns (uint96) {
        return uint96(s.fields >> 48);
    }

    function nodeId(VerifiedState calldata s) internal pure returns (uint64) {
        return uint64(uint48(s.fields >> 184));
    }

    function challengeWindow(VerifiedState calldata s) internal pure returns (uint32) {
        return uint32(s.fields);
    }

    function feeBps(VerifiedState calldata s) internal pure returns (uint16) {
        return uint16(s.fields >> 32);
    }

    // ---------------------------------------------------------------- seats

    /// @dev A seat's `fields`, by bits: phase 248..255, nodeId 200..247, seatedAt 160..199,
    /// until 120..159, locked 0..95.
    function seatFields(uint8 phase_, uint64 nodeId_, uint40 seatedAt_, uint40 until_, uint96 locked_)
        internal
        pure
        returns (uint256)
    {
        return (uint256(phase_) << 248) | (uint256(uint48(nodeId_)) << 200) | (uint256(seatedAt_) << 160)
            | (uint256(until_) << 120) | locked_;
    }

    /// @dev A seat's `fields` moved to phase `phase_` (the rest is fixed when it is drawn).
    function withPhase(uint256 fields, uint8 phase_) internal pure returns (uint256) {
        return (uint256(phase_) << 248) | (fields & ((1 << 248) - 1));
    }

    function phase(Seat calldata s) internal pure returns (uint8) {
        return uint8(s.fields >> 248);
    }

    function nodeId(Seat calldata s) internal pure returns (uint64) {
        return uint64(uint48(s.fields >> 200));
    }

    function seatedAt(Seat calldata s) internal pure returns (uint40) {
        return uint40(s.fields >> 160);
    }

    function until(Seat calldata s) internal pure returns (uint40) {
        return uint40(s.fields >> 120);
    }

    function locked(Seat calldata s) internal pure returns (uint96) {
        return uint96(s.fields);
    }
}
