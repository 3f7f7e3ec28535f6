// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarket_GiveBack_Shared} from "./JobMarket.agentCall.shared.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {FailureKind, JobStatus} from "../../src/types/Types.sol";

contract JobMarket_Reject_Test is JobMarket_GiveBack_Shared {
    string internal constant REASON = "image pull failed";

    function reject(address caller, uint64 id) internal {
        vm.prank(caller);
        market.reject(id, REASON);
    }

    function actAs(address caller, uint64 id) internal override {
        reject(caller, id);
    }

    function expectRejected() internal {
        expectMarketEmit();
        emit IJobMarket.JobRejected(jobId, nodeId, REASON);
    }

    function test_Reject_RequeuesWithoutSlash() external {
        uint256 registryBefore = token.balanceOf(address(registry));
        expectRejected();
        expectRequeued(jobId, 1);
        reject(agent, jobId);

        assertRequeued(jobId, nodeId, 0, 0, registryBefore);
    }

    function test_Reject_RequeuedJobIsAssignedAgain() external {
        reject(agent, jobId);
        claimAgain();
    }

    function test_Reject_FailsJobOutOfAttempts() external {
        for (uint8 attempt = 1; attempt < MAX_ATTEMPTS; attempt++) {
            reject(agent, jobId);
            assignJob(jobId, nodeId);
        }
        expectRejected();
        expectFailed(jobId, FailureKind.OutOfAttempts, BOUNTY);
        reject(agent, jobId);

        assertFailedOutOfAttempts(jobId, nodeId, 0, 0);
    }

    /// Past the deadline the node is at fault: the job is expired (with the slash), not rejected.
    function test_RevertWhen_PastDeadline() external {
        vm.warp(deadline);
        expectPastDeadline(jobId);
        reject(agent, jobId);
    }

    function test_RevertWhen_PastMaxRuntime() external {
        vm.warp(block.timestamp + h100Job().maxRuntime + 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_MustBeReclaimed.selector, jobId));
        reject(agent, jobId);
    }

    function test_Reject_AtMaxRuntimeBoundary() external {
        vm.warp(block.timestamp + h100Job().maxRuntime);
        reject(agent, jobId);
        assertStatus(jobId, JobStatus.Open);
    }

    function test_RevertWhen_NodeInactive() external {
        makeInactive(nodeId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_MustBeReclaimed.selector, jobId));
        reject(agent, jobId);
    }

    function test_Reject_ByNewAgentAfterAgentChange() external {
        reject(setNewAgent(nodeId), jobId);
        assertStatus(jobId, JobStatus.Open);
    }
}
