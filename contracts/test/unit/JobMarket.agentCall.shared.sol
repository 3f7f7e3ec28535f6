// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarket_AssignedJob_Test} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {JobStatus} from "../../src/types/Types.sol";

/// @notice What `submitResult`, `abandon` and `reject` share: only the agent of the node a
/// job is assigned to may call them, and only on an assigned job. Each entry point's test
/// contract says how it calls.
abstract contract JobMarket_AgentCall_Shared is JobMarket_AssignedJob_Test {
    /// Calls the entry point under test on `id` as `caller`.
    function actAs(address caller, uint64 id) internal virtual;

    function test_RevertWhen_CallerNotAssignedAgent() external {
        expectNotAssignedAgent(jobId, stranger);
        actAs(stranger, jobId);
        assertNodeCounters(nodeId, 1, 0, 0, 0);
    }

    function test_RevertWhen_CallerIsOperator() external {
        expectNotAssignedAgent(jobId, operator);
        actAs(operator, jobId);
    }

    function test_RevertWhen_JobUnknown() external {
        expectUnknownJob(99);
        actAs(agent, 99);
    }

    function test_RevertWhen_JobOpen() external {
        uint64 open = postJob();
        expectWrongStatus(open, JobStatus.Open);
        actAs(agent, open);
    }
}

/// @notice What `abandon` and `reject` share besides: the agent gives a running job back,
/// and the job is requeued for another attempt.
abstract contract JobMarket_GiveBack_Shared is JobMarket_AgentCall_Shared {
    /// The requeued job is claimed again by the same node: its second attempt.
    function claimAgain() internal {
        expectMarketEmit();
        emit IJobMarket.JobAssigned(jobId, nodeId, agent, 2, true, uint40(block.timestamp));
        vm.prank(agent);
        market.claim(jobId, nodeId);
        assertEq(jobOf(jobId).attempts, 2);
    }

    function test_RevertWhen_CallerIsSubmitter() external {
        expectNotAssignedAgent(jobId, submitter);
        actAs(submitter, jobId);
    }

    function test_RevertWhen_JobSubmitted() external {
        submitJob(jobId);
        expectWrongStatus(JobStatus.Submitted);
        actAs(agent, jobId);
    }
}
