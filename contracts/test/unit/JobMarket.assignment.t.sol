// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Base} from "../Base.t.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {
    ENGINE_COUNT,
    ENGINE_DOCKER,
    ENGINE_WASM,
    JobRequirements,
    JobState,
    JobStatus,
    JobTerms,
    NodeCapabilities
} from "../../src/types/Types.sol";

/// Posting, assigning, claiming, answering: who may, when, and every refusal.
contract JobMarketAssignmentTest is Base {
    using JobView for JobTerms;
    using JobView for JobState;

    function _assignReverts(uint64 jobId, uint64 nodeId, bytes memory reason) internal {
        vm.prank(matcher);
        vm.expectRevert(reason);
        market.assign(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
    }

    function test_PostJob_FixesTheTerms_AndEscrowsTheBounty() public {
        uint256 before = token.balanceOf(address(market));
        uint64 jobId = postJob();
        JobTerms memory t = jobs[jobId].terms;
        assertEq(t.submitter(), submitter);
        assertEq(t.bounty(), BOUNTY);
        assertEq(t.policy(), 1);
        assertEq(t.specHash, keccak256(spec()));
        assertEq(market.jobHash(jobId), market.hashState(jobs[jobId].state));
        assertEq(market.hashTerms(t), jobs[jobId].state.terms);
        assertEq(token.balanceOf(address(market)) - before, BOUNTY);
        assertReplay();
    }

    function test_PostJob_RefusesBadInput() public {
        JobRequirements memory r = h100Job();
        uint40 deadline = uint40(block.timestamp + 1 days);
        vm.startPrank(submitter);
        vm.expectRevert(IJobMarket.JobMarket_ZeroBounty.selector);
        market.postJob(r, 0, deadline, spec());
        vm.expectRevert(IJobMarket.JobMarket_EmptySpec.selector);
        market.postJob(r, BOUNTY, deadline, "");
        r.priority = 11;
        vm.expectRevert(IJobMarket.JobMarket_InvalidRequirements.selector);
        market.postJob(r, BOUNTY, deadline, spec());
        r = h100Job();
        r.maxRuntime = 7 days + 1;
        vm.expectRevert(IJobMarket.JobMarket_InvalidRequirements.selector);
        market.postJob(r, BOUNTY, uint40(block.timestamp + 8 days), spec());
        r = h100Job();
        r.minGpuCount = 0;
        vm.expectRevert(IJobMarket.JobMarket_InvalidRequirements.selector);
        market.postJob(r, BOUNTY, deadline, spec());
        vm.stopPrank();
    }

    /// An engine the market does not know, or a WASM job asking for GPUs: no node could
    /// ever run it, so it is not posted (nothing escrowed to wait for its deadline).
    function test_PostJob_RefusesAnEngineNoNodeCouldRun() public {
        uint40 deadline = uint40(block.timestamp + 1 days);
        JobRequirements memory r = h100Job();
        r.engine = ENGINE_COUNT;
        vm.prank(submitter);
        vm.expectRevert(IJobMarket.JobMarket_InvalidRequirements.selector);
        market.postJob(r, BOUNTY, deadline, spec());
        r.engine = ENGINE_WASM;
        vm.prank(submitter);
        vm.expectRevert(IJobMarket.JobMarket_InvalidRequirements.selector);
        market.postJob(r, BOUNTY, deadline, spec());
        r = wasmJob();
        r.minVramMiB = 1;
        vm.prank(submitter);
        vm.expectRevert(IJobMarket.JobMarket_InvalidRequirements.selector);
        market.postJob(r, BOUNTY, deadline, spec());
        uint64 jobId = postJob(wasmJob(), BOUNTY, deadline);
        assertEq(uint8(status(jobId)), uint8(JobStatus.Open), "a CPU-only WASM job is posted");
    }

    /// A job goes only to a node that runs its engine: a Docker job never to a node
    /// without Docker, a WASM job never to a node without the WASM engine.
    function test_Assign_OnlyToANodeRunningTheJobsEngine() public {
        NodeCapabilities memory caps = cpuNode();
        caps.engines = WASM_ONLY;
        uint64 wasmNode = registerNode(operator, AGENT_KEY, caps, STAKE);
        caps.engines = DOCKER_ONLY;
        address operator2 = makeAddr("operator 2");
        fund(operator2, STAKE);
        uint64 dockerNode = registerNode(operator2, AGENT_KEY + 1, caps, STAKE);
        JobRequirements memory r = wasmJob();
        r.engine = ENGINE_DOCKER;
        uint64 dockerJob = postJob(r, BOUNTY, uint40(block.timestamp + 1 days));
        uint64 wasm = postJob(wasmJob(), BOUNTY, uint40(block.timestamp + 1 days));
        _assignReverts(
            dockerJob, wasmNode, abi.encodeWithSelector(IJobMarket.JobMarket_EngineNotServed.selector, ENGINE_DOCKER)
        );
        _assignReverts(
            wasm, dockerNode, abi.encodeWithSelector(IJobMarket.JobMarket_EngineNotServed.selector, ENGINE_WASM)
        );
        assign(dockerJob, dockerNode);
        assign(wasm, wasmNode);
        assertEq(jobs[dockerJob].state.nodeId(), dockerNode);
        assertEq(jobs[wasm].state.nodeId(), wasmNode);
    }

    function test_Assign_OnlyTheMatcher() public {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob();
        vm.prank(stranger);
        vm.expectRevert();
        market.assign(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
    }

    function test_Assign_ChecksEveryRequirement_AgainstTheStoredCapabilities() public {
        NodeCapabilities memory small = h100Node();
        small.gpuCount = 1;
        small.vramMiB = 8_000;
        small.cpuCores = 2;
        small.ramMiB = 4_000;
        small.pricePerGpuHour = 9e6;
        uint64 nodeId = registerNode(operator, AGENT_KEY, small, STAKE);
        JobRequirements memory r = h100Job();
        r.minGpuCount = 2;
        uint64 jobId = postJob(r, BOUNTY, uint40(block.timestamp + 1 days));
        _assignReverts(jobId, nodeId, abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientGpus.selector, 2, 1));
        r = h100Job();
        jobId = postJob(r, BOUNTY, uint40(block.timestamp + 1 days));
        _assignReverts(
            jobId, nodeId, abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientVram.selector, 40_000, 8_000)
        );
        r.minVramMiB = 0;
        jobId = postJob(r, BOUNTY, uint40(block.timestamp + 1 days));
        _assignReverts(jobId, nodeId, abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientCpu.selector, 8, 2));
        r.minCpuCores = 1;
        jobId = postJob(r, BOUNTY, uint40(block.timestamp + 1 days));
        _assignReverts(
            jobId, nodeId, abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientRam.selector, 64_000, 4_000)
        );
        r.minRamMiB = 0;
        jobId = postJob(r, BOUNTY, uint40(block.timestamp + 1 days));
        _assignReverts(
            jobId, nodeId, abi.encodeWithSelector(IJobMarket.JobMarket_PriceTooHigh.selector, uint256(3e6), 9e6)
        );
        r.maxPricePerGpuHour = 9e6;
        r.gpuModel = A100;
        jobId = postJob(r, BOUNTY, uint40(block.timestamp + 1 days));
        _assignReverts(jobId, nodeId, abi.encodeWithSelector(IJobMarket.JobMarket_GpuModelMismatch.selector, A100));
        r.gpuModel = bytes32(0);
        jobId = postJob(r, BOUNTY, uint40(block.timestamp + 1 days));
        assign(jobId, nodeId);
        assertEq(uint8(status(jobId)), uint8(JobStatus.Assigned), "any model, and the rest met");
    }

    function test_Claim_OnlyTheNodesAgent() public {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob();
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotNodeAgent.selector, nodeId, stranger));
        market.claim(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
        claim(jobId, nodeId);
        assertEq(jobs[jobId].state.nodeId(), nodeId);
        assertEq(jobs[jobId].state.until(), block.timestamp + RUNTIME);
    }

    function test_Assign_RefusesAnInactiveNode() public {
        uint64 nodeId = registerNode();
        vm.prank(agent);
        nodes.markInactive(nodeId);
        uint64 jobId = postJob();
        _assignReverts(jobId, nodeId, abi.encodeWithSelector(IJobMarket.JobMarket_NodeNotActive.selector, nodeId, 2));
    }

    function test_SubmitResult_OnlyTheAssignedAgent_UntilTheRuntimeEnds() public {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob();
        assign(jobId, nodeId);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotAssignedAgent.selector, jobId, stranger));
        market.submitResult(jobId, jobs[jobId].state, bytes32(uint256(1)), "");
        uint40 until = jobs[jobId].state.until();
        vm.warp(until + 1);
        vm.prank(agent);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_RuntimeOver.selector, jobId, until));
        market.submitResult(jobId, jobs[jobId].state, bytes32(uint256(1)), "");
    }

    function test_Reclaim_RefusedWhileTheNodeIsWithinItsRuntime() public {
        uint64 nodeId = registerNode();
        uint64 jobId = postJob();
        assign(jobId, nodeId);
        expectNotReclaimable(jobId);
    }

    function test_Reclaim_UsesAnAttempt_AndFailsTheJobAtTheLast() public {
        uint64 jobId = postJob(h100Job(), BOUNTY, uint40(block.timestamp + 10 days));
        for (uint256 i; i < MAX_ATTEMPTS; ++i) {
            address owner = makeAddr(string(abi.encode("node", i)));
            fund(owner, 1_000e6);
            uint64 nodeId = registerNode(owner, 0xD0 + i, h100Node(), STAKE);
            assign(jobId, nodeId);
            vm.warp(jobs[jobId].state.until() + 1);
            reclaim(jobId);
        }
        assertEq(uint8(status(jobId)), uint8(JobStatus.Failed));
        assertEq(market.creditOf(submitter), BOUNTY);
        assertReplay();
    }

    function test_Deposit_AndWithdraw_RefuseZero() public {
        vm.prank(submitter);
        vm.expectRevert(IJobMarket.JobMarket_ZeroAmount.selector);
        market.deposit(0);
        vm.prank(submitter);
        vm.expectRevert(IJobMarket.JobMarket_NothingToWithdraw.selector);
        market.withdraw();
        vm.expectRevert(IJobMarket.JobMarket_NothingToWithdraw.selector);
        market.withdrawTreasury();
    }
}
