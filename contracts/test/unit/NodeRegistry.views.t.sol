// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistryUnitTest} from "./NodeRegistry.base.sol";
import {NodeRegistry} from "../../src/NodeRegistry.sol";
import {NodeInfo, NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistryViewsTest is NodeRegistryUnitTest {
    bytes32 internal constant TYPEHASH =
        keccak256("AgentConsent(address operator,address agent,uint256 nonce,uint256 deadline)");

    /// The EIP-712 digest, computed here from the standard: the domain is the market's
    /// (the contract the agent deals with), not the extension's.
    function expectedDigest(address owner, address agent_, uint256 nonce, uint256 deadline)
        internal
        view
        returns (bytes32)
    {
        return consentDigestOn(block.chainid, address(market), owner, agent_, nonce, deadline);
    }

    /// Times recorded in storage (the IR pipeline may re-read `block.timestamp` for a local).
    uint256 internal registeredAt;
    uint256 internal inactiveAt;

    // ---------------------------------------------------------------- getNode

    function test_GetNode_OfAnUnknownNode_IsEmpty() external view {
        NodeInfo memory n = nodes.getNode(1);
        assertEq(uint8(n.status), uint8(NodeStatus.None));
        assertEq(n.operator, address(0));
        assertEq(n.agent, address(0));
        assertEq(n.stake, 0);
        assertEq(n.registeredAt, 0);
        assertEq(nodes.getNode(0).operator, address(0));
        assertEq(nodes.getNode(type(uint64).max).operator, address(0));
    }

    function test_GetNode_ReportsEveryField() external {
        uint64 id = registerNode();
        registeredAt = block.timestamp;
        (, uint96 payout, uint96 fee) = paidJob(id, BOUNTY);
        (uint64 jobId,) = submittedJob();
        dispute(jobId);
        makeInactive(id);
        inactiveAt = block.timestamp;
        beginExit(id);

        NodeInfo memory n = assertedNode(id, operator, agent, NodeStatus.Exiting);
        assertEq(n.lastHeartbeat, registeredAt);
        assertEq(n.stake, STAKE);
        assertEq(n.lockedStake, (STAKE * SLASH_BPS) / 10_000);
        assertEq(n.earnings, payout);
        assertEq(n.feesOwed, fee);
        assertEq(n.registeredAt, registeredAt);
        assertEq(n.gpuModelTag, tagOf(H100));
        assertEq(n.inactiveSince, inactiveAt);
        assertEq(n.unbondingEndsAt, uint40(block.timestamp) + UNBONDING);
    }

    // ---------------------------------------------------------------- nodeCount

    function test_NodeCount_CountsRegistrations() external {
        assertEq(nodes.nodeCount(), 0);
        registerNode();
        assertEq(nodes.nodeCount(), 1);
        uint64 second = registerSelf(stranger, cpuOnlyNode(), MIN_STAKE);
        assertEq(nodes.nodeCount(), 2);
        // An exit does not uncount a node.
        exitAndWithdraw(second);
        assertEq(nodes.nodeCount(), 2);
    }

    // ---------------------------------------------------------------- agentNonce

    function test_AgentNonce_CountsSignedConsents() external {
        assertEq(nodes.agentNonce(agent), 0);
        uint64 id = registerNode();
        assertEq(nodes.agentNonce(agent), 1);
        bytes memory signature = signConsent(operator, AGENT_KEY, block.timestamp + 1 hours);
        vm.prank(operator);
        nodes.setAgent(id, agent, block.timestamp + 1 hours, signature);
        assertEq(nodes.agentNonce(agent), 2);
        assertEq(nodes.agentNonce(otherAgent), 0, "each agent has its own");
        registerSelf(stranger, cpuOnlyNode(), MIN_STAKE);
        assertEq(nodes.agentNonce(stranger), 0, "a self-consent spends none");
    }

    // ---------------------------------------------------------------- consentDigest

    function testFuzz_ConsentDigest_IsTheEIP712DigestInTheMarketsDomain(
        address owner,
        address agent_,
        uint256 nonce,
        uint256 deadline
    ) external view {
        assertEq(nodes.consentDigest(owner, agent_, nonce, deadline), expectedDigest(owner, agent_, nonce, deadline));
    }

    function test_ConsentDigest_MatchesTheMarketsEIP712Domain() external view {
        (, string memory name, string memory version, uint256 chainId, address verifyingContract,,) =
            market.eip712Domain();
        assertEq(name, "Gantry");
        assertEq(version, "2");
        assertEq(chainId, block.chainid);
        assertEq(verifyingContract, address(market));
        assertEq(NodeRegistry(address(market)).AGENT_CONSENT_TYPEHASH(), TYPEHASH);
    }

    function test_ConsentDigest_FollowsTheChain() external {
        bytes32 here = nodes.consentDigest(operator, agent, 0, 1);
        vm.chainId(777);
        bytes32 fork = nodes.consentDigest(operator, agent, 0, 1);
        assertTrue(here != fork);
        assertEq(fork, consentDigestOn(777, address(market), operator, agent, 0, 1));
    }

    function test_ConsentDigest_IsWhatRegisterChecks() external {
        uint256 deadline = block.timestamp + 1 hours;
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(AGENT_KEY, expectedDigest(operator, agent, 0, deadline));
        vm.prank(operator);
        uint64 id = nodes.register(h100Node(), META, STAKE, agent, deadline, abi.encodePacked(r, s, v));
        assertEq(nodes.getNode(id).agent, agent);
    }
}
