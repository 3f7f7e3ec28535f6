// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Base} from "../../Base.t.sol";
import {JobRequirements, JobStatus} from "../../../src/types/Types.sol";

/// @notice The gas of one job's whole life, tracked in `.gas-snapshot`. Gas metering is
/// paused around fixtures and assertions, so the figure is the four market calls'
/// execution gas (no intrinsic 21k or calldata). The contracts' accounts and storage are
/// cooled before each call, as each is a transaction of its own on a real chain.
contract Gas_Test is Base {
    uint64 internal nodeId;

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
    }

    /// post (with a ~400-byte spec) -> assign -> submitResult -> finalize, on a market
    /// that has never held a job: every balance and credit slot is written for the first time.
    function test_gas_fullLifecycle() external {
        lifecycle();
    }

    /// The same on a market in use: it already escrows another job, and the operator and
    /// the fee recipient already hold credits.
    function test_gas_fullLifecycle_marketInUse() external {
        vm.pauseGasMetering();
        (uint64 earlier) = postJob();
        assignJob(earlier, nodeId);
        submitJob(earlier);
        vm.warp(block.timestamp + CHALLENGE_WINDOW);
        market.finalize(earlier);
        postJob();
        vm.resumeGasMetering();
        lifecycle();
    }

    function lifecycle() internal {
        vm.pauseGasMetering();
        bytes memory spec = specJson();
        JobRequirements memory requirements = h100Job();
        uint40 deadline = uint40(block.timestamp + 1 days);
        uint256 creditBefore = market.creditOf(operator);
        assertGt(spec.length, 380);
        assertLt(spec.length, 440);
        coolAll();
        vm.resumeGasMetering();

        vm.prank(submitter);
        uint64 jobId = market.postJob(requirements, BOUNTY, deadline, spec);
        coolAll();
        vm.prank(matcher);
        market.assign(jobId, nodeId);
        coolAll();
        vm.prank(agent);
        market.submitResult(jobId, keccak256("result"), "ipfs://result");
        vm.warp(block.timestamp + CHALLENGE_WINDOW);
        coolAll();
        market.finalize(jobId);

        vm.pauseGasMetering();
        assertEq(uint8(market.getJob(jobId).status), uint8(JobStatus.Completed));
        assertEq(market.creditOf(operator) - creditBefore, BOUNTY - fee(BOUNTY));
        vm.resumeGasMetering();
    }

    /// Marks the contracts and their storage cold, as at the start of a transaction.
    function coolAll() internal {
        vm.pauseGasMetering();
        vm.cool(address(market));
        vm.cool(address(registry));
        vm.cool(address(token));
        vm.resumeGasMetering();
    }
}
