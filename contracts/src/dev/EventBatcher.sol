// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IJobMarket} from "../interfaces/IJobMarket.sol";
import {JobTerms} from "../types/Types.sol";

/// @title EventBatcher
/// @notice Emits JobMarket's events in bulk, many per transaction, so indexer tests and
/// benchmarks can make 100k real logs on a local chain cheaply. It moves no money and
/// keeps no jobs: an indexer pointed at it as "the market" sees a flood of postings.
/// Local networks and tests only.
contract EventBatcher {
    uint64 internal _nextJobId = 1;

    /// @notice An event the market's ABI does not know.
    event Foreign(uint256 value);

    /// @notice Emits `count` JobPosted events with `terms` and `spec`, for consecutive job ids.
    function post(uint256 count, JobTerms calldata terms, bytes calldata spec) external {
        uint64 jobId = _nextJobId;
        for (uint256 i; i < count; ++i) {
            emit IJobMarket.JobPosted(jobId + uint64(i), address(uint160(terms.party >> 96)), terms, 0, spec);
        }
        _nextJobId = jobId + uint64(count);
    }

    /// @notice Emits `count` JobCancelled events (small messages) for consecutive job ids.
    function cancel(uint256 count) external {
        uint64 jobId = _nextJobId;
        for (uint256 i; i < count; ++i) {
            emit IJobMarket.JobCancelled(jobId + uint64(i), 1e6);
        }
        _nextJobId = jobId + uint64(count);
    }

    /// @notice Emits one JobPosted whose spec is `specBytes` bytes of `x`: the size the
    /// market allows (16 KiB) or larger than any stream message may be.
    function postSized(JobTerms calldata terms, uint256 specBytes) external {
        bytes memory spec = new bytes(specBytes);
        bytes32 xs = 0x7878787878787878787878787878787878787878787878787878787878787878;
        for (uint256 i; i < specBytes; i += 32) {
            assembly ("memory-safe") {
                mstore(add(add(spec, 0x20), i), xs)
            }
        }
        // The last word may have spilled past the end: the bytes are only `specBytes` long.
        uint64 jobId = _nextJobId++;
        emit IJobMarket.JobPosted(jobId, address(uint160(terms.party >> 96)), terms, 0, spec);
    }

    /// @notice Emits an event the market's ABI does not know.
    function emitForeign(uint256 value) external {
        emit Foreign(value);
    }
}
