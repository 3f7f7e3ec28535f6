// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "forge-std/Vm.sol";

import {AttackBase} from "./AttackBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";

/// @notice Anyone tries to stall the indexer or bloat every consumer's stream with huge
/// payloads: a giant spec, giant URIs, a giant reject reason. The rules: a spec is at most
/// `MAX_SPEC_BYTES` (16 KiB), every string at most `MAX_TEXT_BYTES` (256); the largest event
/// the market can emit stays under 64 KiB of log data.
contract OversizedPayload is AttackBase {
    uint256 internal constant MAX_SPEC = 16_384;
    uint256 internal constant MAX_TEXT = 256;
    uint256 internal constant LOG_LIMIT = 64 * 1024;

    function test_theLimits_areTheDocumentedOnes() public view {
        assertEq(market.MAX_SPEC_BYTES(), MAX_SPEC);
        assertEq(market.MAX_TEXT_BYTES(), MAX_TEXT);
    }

    function test_aSpecOverTheLimit_isRefused_byBothWaysOfPosting() public {
        bytes memory big = new bytes(MAX_SPEC + 1);
        bytes memory tooLarge =
            abi.encodeWithSelector(IJobMarket.JobMarket_SpecTooLarge.selector, MAX_SPEC + 1, MAX_SPEC);
        uint40 deadline = uint40(block.timestamp + 1 days);
        vm.startPrank(submitter);
        vm.expectRevert(tooLarge);
        market.postJob(h100Job(), BOUNTY, deadline, big);
        vm.expectRevert(tooLarge);
        market.postJobWithPermit(h100Job(), BOUNTY, deadline, big, 0, 0, 0, 0);
        vm.expectRevert(IJobMarket.JobMarket_EmptySpec.selector);
        market.postJob(h100Job(), BOUNTY, deadline, "");
        vm.stopPrank();
    }

    function test_aMetadataUriOverTheLimit_isRefused_atRegistrationAndUpdate() public {
        bytes memory tooLong = abi.encodeWithSelector(INodeRegistry.NodeRegistry_TextTooLong.selector, 257, 256);
        vm.prank(agent);
        vm.expectRevert(tooLong);
        nodes.register(h100Node(), string(new bytes(MAX_TEXT + 1)), STAKE, agent, 0, "");
        uint64 nodeId = registerNode();
        vm.prank(operator);
        vm.expectRevert(tooLong);
        nodes.updateCapabilities(nodeId, h100Node(), string(new bytes(MAX_TEXT + 1)));
        vm.prank(operator);
        nodes.updateCapabilities(nodeId, h100Node(), string(new bytes(MAX_TEXT)));
    }

    function test_aResultUriOverTheLimit_isRefused() public {
        (uint64 jobId,) = assignedJob();
        expectTooLongFrom(agent);
        market.submitResult(jobId, jobs[jobId].state, bytes32(uint256(1)), string(new bytes(MAX_TEXT + 1)));
        vm.prank(agent);
        market.submitResult(jobId, jobs[jobId].state, bytes32(uint256(1)), string(new bytes(MAX_TEXT)));
        sync();
        assertReplay();
    }

    function test_aRejectReasonOverTheLimit_isRefused() public {
        (uint64 jobId,) = assignedJob();
        expectTooLongFrom(agent);
        market.reject(jobId, jobs[jobId].terms, jobs[jobId].state, string(new bytes(MAX_TEXT + 1)));
        vm.prank(agent);
        market.reject(jobId, jobs[jobId].terms, jobs[jobId].state, string(new bytes(MAX_TEXT)));
        sync();
        assertReplay();
    }

    /// The largest event of each kind the market can emit, measured: JobPosted is five
    /// words of terms, `fromCredits`, the spec's offset and length and the spec itself
    /// (16,640 bytes at the limit, about a quarter of 64 KiB); the events with a string carry
    /// at most 256 bytes of it.
    function test_theLargestEvents_stayUnder64KiB() public {
        string memory longest = string(new bytes(MAX_TEXT));
        uint256 text = 32 + MAX_TEXT; // a string's length word and its bytes
        fund(agent, STAKE);

        vm.prank(submitter);
        uint64 jobId = market.postJob(h100Job(), BOUNTY, uint40(block.timestamp + 1 days), new bytes(MAX_SPEC));
        uint256 posted = take(IJobMarket.JobPosted.selector);
        assertEq(posted, 5 * 32 + 32 + 32 + 32 + MAX_SPEC, "JobPosted");
        assertEq(posted, 16_640);

        vm.prank(agent);
        uint64 nodeId = nodes.register(h100Node(), longest, STAKE, agent, 0, "");
        assertEq(take(INodeRegistry.NodeRegistered.selector), 8 * 32 + 3 * 32 + text, "NodeRegistered");

        vm.prank(operator);
        vm.expectRevert(); // not its node: registered by the agent itself
        nodes.updateCapabilities(nodeId, h100Node(), longest);
        vm.prank(agent);
        nodes.updateCapabilities(nodeId, h100Node(), longest);
        assertEq(take(INodeRegistry.NodeCapabilitiesUpdated.selector), 8 * 32 + 32 + text, "CapabilitiesUpdated");

        claim(jobId, nodeId);
        vm.prank(agent);
        market.reject(jobId, jobs[jobId].terms, jobs[jobId].state, longest);
        assertEq(take(IJobMarket.JobRejected.selector), 32 + text, "JobRejected");

        uint64 other = registerNode(operator, OTHER_AGENT_KEY, h100Node(), STAKE);
        claim(jobId, other);
        vm.prank(otherAgent);
        market.submitResult(jobId, jobs[jobId].state, bytes32(uint256(1)), longest);
        assertEq(take(IJobMarket.ResultSubmitted.selector), 3 * 32 + text, "ResultSubmitted");

        assertLt(posted, LOG_LIMIT, "the largest event of all stays under 64 KiB");
        assertReplay();
    }

    /// `who`'s next call is expected to be refused: a text of 257 bytes where 256 are allowed.
    function expectTooLongFrom(address who) internal {
        vm.prank(who);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_TextTooLong.selector, 257, 256));
    }

    /// The recorded logs folded into the fixture (as `sync` does), and the data size of the
    /// one with topic `selector`.
    function take(bytes32 selector) internal returns (uint256 size) {
        Vm.Log[] memory logs = vm.getRecordedLogs();
        bool found;
        for (uint256 i; i < logs.length; ++i) {
            if (logs[i].emitter != address(market)) continue;
            apply_(logs[i]);
            if (logs[i].topics[0] == selector) (found, size) = (true, logs[i].data.length);
        }
        assertTrue(found, "the event was emitted");
    }
}
