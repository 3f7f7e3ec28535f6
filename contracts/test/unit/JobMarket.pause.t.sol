// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";

import {JobMarketBase} from "./JobMarketBase.sol";
import {JobStatus} from "../../src/types/Types.sol";

contract JobMarket_Pause_Test is JobMarketBase {
    function test_Pause_PausesMarket() external {
        vm.expectEmit(true, true, true, true, address(market));
        emit Pausable.Paused(pauser);
        pauseMarket();
        assertTrue(market.paused());
    }

    function test_Pause_LeavesRunningJobsSettleable() external {
        (uint64 jobId, uint64 nodeId) = submittedJob();
        uint64 running = postJob();
        assignJob(running, nodeId);
        pauseMarket();

        // Work in flight completes and money leaves while new work is refused.
        vm.prank(agent);
        market.submitResult(running, keccak256("r2"), "ipfs://r2");
        vm.warp(block.timestamp + CHALLENGE_WINDOW);
        market.finalize(jobId);
        market.finalize(running);
        vm.prank(operator);
        market.withdraw();
        assertStatus(jobId, JobStatus.Completed);
        assertStatus(running, JobStatus.Completed);
        assertEq(market.creditOf(operator), 0);
    }

    function test_RevertWhen_CallerNotPauser() external {
        bytes32 role = market.PAUSER_ROLE();
        vm.expectRevert(
            abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, stranger, role)
        );
        vm.prank(stranger);
        market.pause();
    }

    function test_RevertWhen_CallerIsAdmin() external {
        bytes32 role = market.PAUSER_ROLE();
        vm.expectRevert(abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, admin, role));
        vm.prank(admin);
        market.pause();
    }

    function test_RevertWhen_AlreadyPaused() external {
        pauseMarket();
        vm.expectRevert(Pausable.EnforcedPause.selector);
        vm.prank(pauser);
        market.pause();
    }
}
