// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";

import {JobMarketBase} from "./JobMarketBase.sol";
import {JobStatus} from "../../src/types/Types.sol";

contract JobMarket_Unpause_Test is JobMarketBase {
    function setUp() public override {
        super.setUp();
        pauseMarket();
    }

    function test_Unpause_UnpausesMarket() external {
        vm.expectEmit(true, true, true, true, address(market));
        emit Pausable.Unpaused(pauser);
        vm.prank(pauser);
        market.unpause();

        assertFalse(market.paused());
        uint64 jobId = postJob();
        assignJob(jobId, registerNode());
        assertStatus(jobId, JobStatus.Assigned);
    }

    function test_RevertWhen_CallerNotPauser() external {
        bytes32 role = market.PAUSER_ROLE();
        vm.expectRevert(abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, matcher, role));
        vm.prank(matcher);
        market.unpause();
        assertTrue(market.paused());
    }

    function test_RevertWhen_NotPaused() external {
        vm.prank(pauser);
        market.unpause();
        vm.expectRevert(Pausable.ExpectedPause.selector);
        vm.prank(pauser);
        market.unpause();
    }
}
