// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {JobInfo, JobRequirements, JobStatus} from "../../src/types/Types.sol";

contract JobMarket_PostJob_Test is JobMarketBase {
    function post(JobRequirements memory requirements, uint96 bounty, uint40 dl, bytes memory spec)
        internal
        returns (uint64)
    {
        vm.prank(submitter);
        return market.postJob(requirements, bounty, dl, spec);
    }

    function deadline() internal view returns (uint40) {
        return uint40(block.timestamp + 1 days);
    }

    /// The rows of the requirements table the market refuses, each breaking one rule of `h100Job`.
    enum Broken {
        NoPriority,
        PriorityAboveMax,
        NoRuntime,
        ModelWithoutGpus
    }

    function expectRefused(Broken row) internal {
        JobRequirements memory req = h100Job();
        if (row == Broken.NoPriority) req.priority = 0;
        if (row == Broken.PriorityAboveMax) req.priority = 11;
        if (row == Broken.NoRuntime) req.maxRuntime = 0;
        if (row == Broken.ModelWithoutGpus) req.minGpuCount = 0;
        vm.expectRevert(IJobMarket.JobMarket_InvalidRequirements.selector);
        post(req, BOUNTY, deadline(), specJson());
        assertEq(market.jobCount(), 0);
    }

    function test_PostJob_EscrowsBountyAndStoresJob() external {
        JobRequirements memory req = h100Job();
        bytes memory spec = specJson();
        uint40 dl = deadline();
        uint256 submitterBefore = token.balanceOf(submitter);

        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobPosted(1, submitter, req, BOUNTY, dl, keccak256(spec), spec);
        uint64 jobId = post(req, BOUNTY, dl, spec);

        assertEq(jobId, 1);
        assertEq(market.jobCount(), 1);
        assertEq(token.balanceOf(submitter), submitterBefore - BOUNTY);
        assertEq(token.balanceOf(address(market)), BOUNTY);
        assertEq(market.creditOf(submitter), 0);

        JobInfo memory job = jobOf(jobId);
        assertEq(job.submitter, submitter);
        assertEq(uint8(job.status), uint8(JobStatus.Open));
        assertEq(job.attempts, 0);
        assertEq(job.deadline, dl);
        assertEq(job.bounty, BOUNTY);
        assertEq(job.specHash, keccak256(spec));
        assertEq(job.requirements.gpuModel, req.gpuModel);
        assertEq(job.requirements.minGpuCount, req.minGpuCount);
        assertEq(job.requirements.minVramMiB, req.minVramMiB);
        assertEq(job.requirements.minCpuCores, req.minCpuCores);
        assertEq(job.requirements.minRamMiB, req.minRamMiB);
        assertEq(job.requirements.maxPricePerGpuHour, req.maxPricePerGpuHour);
        assertEq(job.requirements.maxRuntime, req.maxRuntime);
        assertEq(job.requirements.priority, req.priority);
        assertEq(job.nodeId, 0);
        assertEq(job.assignedAt, 0);
        assertEq(job.challengeEndsAt, 0);
        assertEq(job.resultHash, bytes32(0));
    }

    function test_PostJob_AssignsSequentialIds() external {
        assertEq(market.jobCount(), 0);
        bytes memory spec2 = bytes('{"version":1,"image":"busybox"}');

        assertEq(post(h100Job(), BOUNTY, deadline(), specJson()), 1);
        assertEq(market.jobCount(), 1);

        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobPosted(2, submitter, h100Job(), 2 * BOUNTY, deadline(), keccak256(spec2), spec2);
        assertEq(post(h100Job(), 2 * BOUNTY, deadline(), spec2), 2);
        assertEq(market.jobCount(), 2);

        assertEq(jobOf(2).bounty, 2 * BOUNTY);
        assertEq(jobOf(2).specHash, keccak256(spec2));
        assertEq(jobOf(1).specHash, keccak256(specJson()));
        assertEq(token.balanceOf(address(market)), 3 * BOUNTY);
    }

    function test_PostJob_AnyGpuModelWithoutGpus() external {
        JobRequirements memory req = h100Job();
        req.gpuModel = bytes32(0);
        req.minGpuCount = 0;
        req.minVramMiB = 0;
        uint64 jobId = post(req, BOUNTY, deadline(), specJson());
        assertEq(jobOf(jobId).requirements.gpuModel, bytes32(0));
        assertEq(jobOf(jobId).requirements.minGpuCount, 0);
        assertStatus(jobId, JobStatus.Open);
    }

    function test_PostJob_AcceptsPriorityBounds() external {
        JobRequirements memory req = h100Job();
        req.priority = 1;
        uint64 low = post(req, BOUNTY, deadline(), specJson());
        req.priority = 10;
        uint64 high = post(req, BOUNTY, deadline(), specJson());
        assertEq(jobOf(low).requirements.priority, 1);
        assertEq(jobOf(high).requirements.priority, 10);
    }

    function test_PostJob_AcceptsDeadlineOneSecondAhead() external {
        uint40 dl = uint40(block.timestamp + 1);
        uint64 jobId = post(h100Job(), BOUNTY, dl, specJson());
        assertEq(jobOf(jobId).deadline, dl);
    }

    function test_PostJob_AcceptsMaxSpecSize() external {
        bytes memory spec = new bytes(market.MAX_SPEC_BYTES());
        spec[0] = "{";
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobPosted(1, submitter, h100Job(), BOUNTY, deadline(), keccak256(spec), spec);
        uint64 jobId = post(h100Job(), BOUNTY, deadline(), spec);
        assertEq(jobOf(jobId).specHash, keccak256(spec));
    }

    function test_RevertWhen_PriorityIsZero() external {
        expectRefused(Broken.NoPriority);
    }

    function test_RevertWhen_PriorityAboveMax() external {
        expectRefused(Broken.PriorityAboveMax);
    }

    function test_RevertWhen_MaxRuntimeIsZero() external {
        expectRefused(Broken.NoRuntime);
    }

    function test_RevertWhen_GpuModelWithoutGpuCount() external {
        expectRefused(Broken.ModelWithoutGpus);
    }

    function test_RevertWhen_BountyIsZero() external {
        vm.expectRevert(IJobMarket.JobMarket_ZeroBounty.selector);
        post(h100Job(), 0, deadline(), specJson());
    }

    function test_RevertWhen_DeadlineInPast() external {
        uint40 dl = uint40(block.timestamp - 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_DeadlineInPast.selector, dl));
        post(h100Job(), BOUNTY, dl, specJson());
    }

    function test_RevertWhen_DeadlineIsNow() external {
        uint40 dl = uint40(block.timestamp);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_DeadlineInPast.selector, dl));
        post(h100Job(), BOUNTY, dl, specJson());
    }

    function test_RevertWhen_SpecIsEmpty() external {
        vm.expectRevert(IJobMarket.JobMarket_EmptySpec.selector);
        post(h100Job(), BOUNTY, deadline(), "");
    }

    function test_RevertWhen_SpecTooLarge() external {
        uint256 max = market.MAX_SPEC_BYTES();
        bytes memory spec = new bytes(max + 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_SpecTooLarge.selector, max + 1, max));
        post(h100Job(), BOUNTY, deadline(), spec);
    }

    function test_RevertWhen_Paused() external {
        pauseMarket();
        vm.expectRevert(Pausable.EnforcedPause.selector);
        post(h100Job(), BOUNTY, deadline(), specJson());
    }

    function test_RevertWhen_AllowanceInsufficient() external {
        vm.prank(submitter);
        token.approve(address(market), BOUNTY - 1);
        expectAllowanceShort(BOUNTY - 1, BOUNTY);
        post(h100Job(), BOUNTY, deadline(), specJson());
    }

    function test_RevertWhen_BalanceInsufficient() external {
        token.mint(stranger, BOUNTY - 1);
        vm.startPrank(stranger);
        token.approve(address(market), type(uint256).max);
        vm.expectRevert(
            abi.encodeWithSelector(IERC20Errors.ERC20InsufficientBalance.selector, stranger, BOUNTY - 1, BOUNTY)
        );
        market.postJob(h100Job(), BOUNTY, deadline(), specJson());
        vm.stopPrank();
    }
}
