// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Base} from "../Base.t.sol";
import {Assignment, JobState} from "../../src/types/Types.sol";
import {Vm} from "forge-std/Vm.sol";
import {JobView} from "../JobView.sol";
import {console2} from "forge-std/console2.sol";

contract Probe is Base {
    function show(string memory what) internal view {
        Vm.Gas memory g = vm.lastCallGas();
        console2.log(what, uint256(g.gasTotalUsed), uint256(int256(g.gasRefunded)));
    }

    function test_probe() public {
        uint64 nodeId = registerNode();
        uint64 jobId = uint64(market.jobCount() + 1);
        vm.prank(submitter);
        market.postJob(h100Job(), BOUNTY, uint40(block.timestamp + 1 days), spec());
        show("post");
        sync();
        vm.prank(matcher);
        market.assign(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
        show("assign");
        sync();
        vm.prank(agent);
        market.submitResult(jobId, jobs[jobId].state, keccak256("r"), "gantry://results/1");
        show("submit");
        sync();
        vm.warp(JobView.until(jobs[jobId].state));
        market.finalize(jobId, jobs[jobId].state);
        show("finalize");
        sync();
        assertReplay();
    }
}

contract ProbeBatch is Base {
    function show(string memory what) internal view returns (uint256) {
        Vm.Gas memory g = vm.lastCallGas();
        console2.log(what, uint256(g.gasTotalUsed), uint256(int256(g.gasRefunded)));
        uint256 refund = uint256(int256(g.gasRefunded));
        uint256 cap = uint256(g.gasTotalUsed) / 5;
        return uint256(g.gasTotalUsed) - (refund < cap ? refund : cap);
    }

    function test_batch() public {
        uint64[] memory nodeIds = new uint64[](10);
        for (uint256 i; i < 10; ++i) {
            address owner = makeAddr(string(abi.encode(i)));
            fund(owner, 1_000e6);
            nodeIds[i] = registerNode(owner, 0x1000 + i, h100Node(), STAKE);
        }
        uint256 total;
        uint64 first = uint64(market.jobCount() + 1);
        for (uint256 i; i < 10; ++i) {
            vm.prank(submitter);
            market.postJob(h100Job(), BOUNTY, uint40(block.timestamp + 1 days), spec());
            total += show("post");
            sync();
        }
        Assignment[] memory batch = new Assignment[](10);
        for (uint64 i; i < 10; ++i) {
            batch[i] = Assignment(first + i, nodeIds[i], jobs[first + i].terms, jobs[first + i].state);
        }
        vm.prank(matcher);
        market.assignBatch(batch);
        total += show("assignBatch");
        sync();
        uint64[] memory ids = new uint64[](10);
        JobState[] memory states = new JobState[](10);
        for (uint64 i; i < 10; ++i) {
            vm.prank(agentOf[nodeIds[i]]);
            market.submitResult(first + i, jobs[first + i].state, keccak256("r"), "gantry://results/1");
            total += show("submit");
            sync();
        }
        for (uint64 i; i < 10; ++i) {
            ids[i] = first + i;
            states[i] = jobs[first + i].state;
        }
        vm.warp(block.timestamp + CHALLENGE_WINDOW);
        market.finalizeBatch(ids, states);
        total += show("finalizeBatch");
        sync();
        console2.log("per job", total / 10);
        assertReplay();
    }
}
