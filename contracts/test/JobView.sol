// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobState, JobStatus, JobTerms, VerifiedState} from "../src/types/Types.sol";

/// @notice What tests read of the packed `JobTerms` and `JobState` (memory copies of
/// `JobCodec`'s readers, plus the writer a consumer's fold needs).
library JobView {
    function submitter(JobTerms memory t) internal pure returns (address) {
        return address(uint160(t.party >> 96));
    }

    function bounty(JobTerms memory t) internal pure returns (uint96) {
        return uint96(t.party);
    }

    function deadline(JobTerms memory t) internal pure returns (uint40) {
        return uint40(t.limits >> 168);
    }

    function maxRuntime(JobTerms memory t) internal pure returns (uint32) {
        return uint32(t.limits >> 136);
    }

    function engine(JobTerms memory t) internal pure returns (uint8) {
        return uint8(t.limits >> 208);
    }

    function tier(JobTerms memory t) internal pure returns (uint8) {
        return uint8(t.limits >> 248);
    }

    function size(JobTerms memory t) internal pure returns (uint8) {
        return uint8(t.limits >> 240);
    }

    function quorum(JobTerms memory t) internal pure returns (uint8) {
        return uint8(t.limits >> 232);
    }

    function revealWindow(JobTerms memory t) internal pure returns (uint16) {
        return uint16(t.limits >> 216);
    }

    function policy(JobTerms memory t) internal pure returns (uint32) {
        return uint32(t.limits);
    }

    /// Completed, Failed, Cancelled or Expired: the market cleared the job's word. (The
    /// verified statuses come after these four in the enum: no ordering test.)
    function isSettled(JobStatus s) internal pure returns (bool) {
        return s == JobStatus.Completed || s == JobStatus.Failed || s == JobStatus.Cancelled || s == JobStatus.Expired;
    }

    function status(JobState memory s) internal pure returns (JobStatus) {
        return JobStatus(uint8(s.fields >> 248));
    }

    function faults(JobState memory s) internal pure returns (uint8) {
        return uint8(s.fields >> 240);
    }

    function barred(JobState memory s) internal pure returns (uint8) {
        return uint8(s.fields >> 232);
    }

    function nodeId(JobState memory s) internal pure returns (uint64) {
        return uint64(uint48(s.fields >> 184));
    }

    function until(JobState memory s) internal pure returns (uint40) {
        return uint40(s.fields >> 144);
    }

    function bounty(JobState memory s) internal pure returns (uint96) {
        return uint96(s.fields >> 48);
    }

    /// The state moved on, as the market's `JobCodec.next` does.
    function moved(JobState memory s, JobStatus status_, uint8 faults_, uint8 barred_, uint64 nodeId_, uint40 until_)
        internal
        pure
    {
        s.fields = (uint256(uint8(status_)) << 248) | (uint256(faults_) << 240) | (uint256(barred_) << 232)
            | (uint256(uint48(nodeId_)) << 184) | (uint256(until_) << 144) | (s.fields & ((1 << 144) - 1));
    }

    // ---------------------------------------------------------------- verified state

    function status(VerifiedState memory s) internal pure returns (JobStatus) {
        return JobStatus(uint8(s.fields >> 248));
    }

    function faults(VerifiedState memory s) internal pure returns (uint8) {
        return uint8(s.fields >> 240);
    }

    function barred(VerifiedState memory s) internal pure returns (uint8) {
        return uint8(s.fields >> 232);
    }

    function until(VerifiedState memory s) internal pure returns (uint40) {
        return uint40(s.fields >> 144);
    }

    function nodeId(VerifiedState memory s) internal pure returns (uint64) {
        return uint64(uint48(s.fields >> 184));
    }

    function bounty(VerifiedState memory s) internal pure returns (uint96) {
        return uint96(s.fields >> 48);
    }

    function drawBlock(VerifiedState memory s) internal pure returns (uint40) {
        return uint40(s.draw);
    }

    function rounds(VerifiedState memory s) internal pure returns (uint8) {
        return uint8(s.draw >> 40);
    }

    function commitEnd(VerifiedState memory s) internal pure returns (uint40) {
        return uint40(s.draw >> 48);
    }

    function seatStake(VerifiedState memory s) internal pure returns (uint96) {
        return uint96(s.draw >> 88);
    }

    /// The escrow a verified job's posting takes: n bounties replicated, one refereed.
    function escrow(JobTerms memory t) internal pure returns (uint256) {
        return tier(t) == 1 ? uint256(bounty(t)) * size(t) : bounty(t);
    }
}
