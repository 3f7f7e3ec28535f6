// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";

import {JobMarket_Assignment_Shared} from "./JobMarket.assignment.shared.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";

contract JobMarket_Assign_Test is JobMarket_Assignment_Shared {
    function take(uint64 id, uint64 node) internal override {
        assignJob(id, node);
    }

    function test_Assign_AssignsJob() external {
        assertTaken(false);
    }

    /// The admin lowered maxAttempts after the job was requeued: no attempt is left.
    function test_RevertWhen_NoAttemptsLeft() external {
        assignAndReject(jobId, nodeId);
        setMaxAttempts(1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NoAttemptsLeft.selector, jobId, uint8(1)));
        assignJob(jobId, nodeId);
    }

    function test_RevertWhen_CallerNotMatcher() external {
        bytes32 role = market.MATCHER_ROLE();
        vm.expectRevert(abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, agent, role));
        vm.prank(agent);
        market.assign(jobId, nodeId);
    }
}
