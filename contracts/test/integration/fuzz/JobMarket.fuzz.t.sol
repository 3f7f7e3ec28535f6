// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarketBase} from "../../unit/JobMarketBase.sol";
import {JobInfo, JobRequirements, JobStatus, NodeCapabilities} from "../../../src/types/Types.sol";

contract JobMarket_Fuzz_Test is JobMarketBase {
    function testFuzz_PostJob_EscrowsBountyAndHashesSpec(uint96 bounty, bytes calldata spec, uint32 lifetime) external {
        bounty = uint96(bound(bounty, 1, 10_000e6));
        vm.assume(spec.length > 0 && spec.length <= market.MAX_SPEC_BYTES());
        lifetime = uint32(bound(lifetime, 1, 365 days));
        uint256 before = token.balanceOf(submitter);

        vm.prank(submitter);
        uint64 jobId = market.postJob(h100Job(), bounty, uint40(block.timestamp + lifetime), spec);

        JobInfo memory job = market.getJob(jobId);
        assertEq(job.bounty, bounty);
        assertEq(job.specHash, keccak256(spec));
        assertEq(uint8(job.status), uint8(JobStatus.Open));
        assertEq(token.balanceOf(address(market)), bounty);
        assertEq(before - token.balanceOf(submitter), bounty);
    }

    function testFuzz_Finalize_SplitsBountyIntoPayoutAndFee(uint96 bounty, uint16 feeBps) external {
        bounty = uint96(bound(bounty, 1, 10_000e6));
        feeBps = uint16(bound(feeBps, 0, 1_000));
        setProtocolFee(feeBps);

        uint64 nodeId = registerNode();
        vm.prank(submitter);
        uint64 jobId = market.postJob(h100Job(), bounty, uint40(block.timestamp + 1 days), specJson());
        assignJob(jobId, nodeId);
        submitJob(jobId);
        vm.warp(block.timestamp + CHALLENGE_WINDOW);
        market.finalize(jobId);

        uint256 expectedFee = (uint256(bounty) * feeBps) / 10_000;
        assertEq(market.creditOf(treasury), expectedFee);
        assertEq(market.creditOf(operator), bounty - expectedFee);
        assertEq(token.balanceOf(address(market)), bounty, "everything is still owed to someone");
    }

    function testFuzz_Resolve_SubmitterWinRefundsBountyBondAndSlash(uint96 stake, uint16 slashBps) external {
        uint96 slashed;
        (stake, slashed) = boundStakeAndSlash(stake, slashBps);
        (uint64 nodeId, uint64 jobId) = assignToNodeStaking(stake);
        submitJob(jobId);
        vm.prank(submitter);
        market.dispute(jobId);

        vm.prank(arbiter);
        market.resolve(jobId, false);

        assertEq(market.creditOf(submitter), uint256(BOUNTY) + DISPUTE_BOND + slashed);
        assertEq(registry.getNode(nodeId).stake, stake - slashed);
        assertEq(token.balanceOf(address(registry)), stake - slashed);
        assertEq(token.balanceOf(address(market)), uint256(BOUNTY) + DISPUTE_BOND + slashed);
    }

    /// Whenever the agent gives a job back before the deadline, the node loses exactly its
    /// slash, the submitter gains it, and the job is Open again with its bounty in escrow.
    function testFuzz_Abandon_MovesSlashFromNodeToSubmitter(uint96 stake, uint16 slashBps, uint32 elapsed) external {
        uint96 slashed;
        (stake, slashed) = boundStakeAndSlash(stake, slashBps);
        (uint64 nodeId, uint64 jobId) = assignToNodeStaking(stake);
        elapsed = uint32(bound(elapsed, 0, 1 days - 1));
        vm.warp(block.timestamp + elapsed);

        vm.prank(agent);
        market.abandon(jobId);

        assertEq(uint8(market.getJob(jobId).status), uint8(JobStatus.Open));
        assertEq(market.creditOf(submitter), slashed);
        assertEq(registry.getNode(nodeId).stake, stake - slashed);
        assertEq(registry.getNode(nodeId).failedJobs, 1);
        assertEq(registry.getNode(nodeId).activeJobs, 0);
        assertEq(token.balanceOf(address(registry)), stake - slashed);
        assertEq(token.balanceOf(address(market)), uint256(BOUNTY) + slashed);
    }

    /// Assignment succeeds exactly when the node offers everything the job requires.
    function testFuzz_Assign_SucceedsIffNodeMeetsRequirements(
        NodeCapabilities memory offered,
        JobRequirements memory required,
        bool sameModel
    ) external {
        offered.gpuCount = uint16(bound(offered.gpuCount, 1, 16));
        offered.gpuModel = H100;
        offered.vramMiB = uint32(bound(offered.vramMiB, 1, 200_000));
        offered.cpuCores = uint16(bound(offered.cpuCores, 1, 256));
        offered.ramMiB = uint32(bound(offered.ramMiB, 0, 2_000_000));
        offered.pricePerGpuHour = uint96(bound(offered.pricePerGpuHour, 0, 100e6));
        offered.maxConcurrentJobs = uint8(bound(offered.maxConcurrentJobs, 1, 8));
        required.gpuModel = sameModel ? H100 : A100;
        required.minGpuCount = uint16(bound(required.minGpuCount, 1, 16));
        required.minVramMiB = uint32(bound(required.minVramMiB, 0, 200_000));
        required.minCpuCores = uint16(bound(required.minCpuCores, 0, 256));
        required.minRamMiB = uint32(bound(required.minRamMiB, 0, 2_000_000));
        required.maxPricePerGpuHour = uint96(bound(required.maxPricePerGpuHour, 0, 100e6));
        required.maxRuntime = uint32(bound(required.maxRuntime, 1, 1 days));
        required.priority = uint8(bound(required.priority, 1, 10));

        vm.prank(operator);
        uint64 nodeId = registry.register(agent, offered, "", STAKE);
        vm.prank(submitter);
        uint64 jobId = market.postJob(required, BOUNTY, uint40(block.timestamp + 1 days), specJson());

        bool eligible = sameModel && offered.gpuCount >= required.minGpuCount && offered.vramMiB >= required.minVramMiB
            && offered.cpuCores >= required.minCpuCores && offered.ramMiB >= required.minRamMiB
            && offered.pricePerGpuHour <= required.maxPricePerGpuHour;
        vm.prank(matcher);
        (bool ok,) = address(market).call(abi.encodeCall(market.assign, (jobId, nodeId)));

        assertEq(ok, eligible);
        assertEq(uint8(market.getJob(jobId).status), uint8(eligible ? JobStatus.Assigned : JobStatus.Open));
        assertEq(registry.getNode(nodeId).activeJobs, eligible ? 1 : 0);
    }

    /// Bounds a fuzzed stake to [MIN_STAKE, 1M tokens] and a slash rate to [0, 100%], sets the
    /// rate, and returns the stake with the slash it will take.
    function boundStakeAndSlash(uint96 stake, uint16 slashBps) internal returns (uint96, uint96 slashed) {
        stake = uint96(bound(stake, MIN_STAKE, 1_000_000e6));
        slashBps = uint16(bound(slashBps, 0, 10_000));
        setSlashBps(slashBps);
        return (stake, uint96((uint256(stake) * slashBps) / 10_000));
    }

    /// Registers a node of `operator` staking `stake` and assigns it a freshly posted job.
    function assignToNodeStaking(uint96 stake) internal returns (uint64 nodeId, uint64 jobId) {
        fund(operator, stake);
        vm.prank(operator);
        nodeId = registry.register(agent, h100Node(), "", stake);
        jobId = postJob();
        assignJob(jobId, nodeId);
    }
}
