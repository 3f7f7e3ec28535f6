// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarket_SubmittedJob_Test} from "./JobMarketBase.sol";
import {JobStatus} from "../../src/types/Types.sol";

/// @notice What `accept`, `dispute` and `finalize` share: each acts on a Submitted job only,
/// and checks the job's status before any time. Each entry point's test contract says how it
/// acts on a job.
abstract contract JobMarket_Settle_Shared is JobMarket_SubmittedJob_Test {
    /// Acts on `id` through the entry point under test, as the caller it expects.
    function settle(uint64 id) internal virtual;

    function test_RevertWhen_JobUnknown() external {
        expectUnknownJob(99);
        settle(99);
    }

    /// At the end of the fixture's challenge window, so that only the status may refuse it.
    function test_RevertWhen_JobAssigned() external {
        uint64 assigned = assignAnotherJob();
        vm.warp(endsAt);
        expectWrongStatus(assigned, JobStatus.Assigned);
        settle(assigned);
    }
}
