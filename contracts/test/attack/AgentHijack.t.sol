// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {AttackBase} from "./AttackBase.sol";
import {JobMarket} from "../../src/JobMarket.sol";
import {NodeRegistry} from "../../src/NodeRegistry.sol";
import {Referees} from "../../src/Referees.sol";
import {Verification} from "../../src/Verification.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";

/// @notice An operator tries to bind someone else's agent key to its own node (so that the
/// victim's worker runs the attacker's jobs and answers for its faults): no signature, a
/// replayed or front-run consent, one signed for another operator, chain, market or
/// version, an expired one, a malleated one. The rule: an agent is bound only by its own
/// call or its EIP-712 `AgentConsent(operator, agent, nonce, deadline)` for this market on
/// this chain, with its current nonce, before the deadline; each consent works once.
contract AgentHijack is AttackBase {
    /// secp256k1's group order: `s` and `n - s` both verify in plain ecrecover.
    uint256 internal constant N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141;

    address internal attacker = makeAddr("attacker");

    function setUp() public override {
        super.setUp();
        fund(attacker, 10_000e6);
    }

    // ---------------------------------------------------------------- no consent

    function test_registeringAVictimsAgent_withoutItsSignature_isRefused() public {
        bytes memory bad = abi.encodeWithSelector(INodeRegistry.NodeRegistry_BadConsent.selector, agent);
        uint256 deadline = block.timestamp + 1 hours;
        vm.startPrank(attacker);
        vm.expectRevert(bad);
        nodes.register(h100Node(), "", STAKE, agent, deadline, "");
        vm.expectRevert(bad);
        nodes.register(h100Node(), "", STAKE, agent, deadline, new bytes(65));
        // The attacker's own signature, over the right digest, is not the agent's.
        bytes32 digest = nodes.consentDigest(attacker, agent, 0, deadline);
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(0xBAD, digest);
        vm.expectRevert(bad);
        nodes.register(h100Node(), "", STAKE, agent, deadline, abi.encodePacked(r, s, v));
        vm.stopPrank();
        assertEq(nodes.agentNonce(agent), 0, "a refused consent consumes nothing");
    }

    function test_rotatingToAVictimsAgent_withoutItsSignature_isRefused() public {
        vm.prank(attacker);
        uint64 nodeId = nodes.register(h100Node(), "", STAKE, attacker, 0, "");
        vm.prank(attacker);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_BadConsent.selector, agent));
        nodes.setAgent(nodeId, agent, block.timestamp + 1 hours, new bytes(65));
    }

    /// The victim's node cannot be re-pointed by anyone but its operator.
    function test_rotatingTheVictimsNode_isTheOperatorsAlone() public {
        uint64 nodeId = registerNode();
        vm.prank(attacker);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotOperator.selector, nodeId, attacker));
        nodes.setAgent(nodeId, attacker, 0, "");
        vm.prank(agent);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotOperator.selector, nodeId, agent));
        nodes.setAgent(nodeId, attacker, 0, "");
    }

    function test_theZeroAgent_isRefused() public {
        vm.prank(attacker);
        vm.expectRevert(INodeRegistry.NodeRegistry_ZeroAddress.selector);
        nodes.register(h100Node(), "", STAKE, address(0), 0, "");
    }

    // ---------------------------------------------------------------- replay

    /// A consent works once: replayed on a second registration or on a rotation, refused.
    function test_aConsent_cannotBeReplayed() public {
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory consent = signConsent(operator, AGENT_KEY, deadline);
        vm.prank(operator);
        uint64 nodeId = nodes.register(h100Node(), "", STAKE, agent, deadline, consent);
        assertEq(nodes.agentNonce(agent), 1);
        bytes memory bad = abi.encodeWithSelector(INodeRegistry.NodeRegistry_BadConsent.selector, agent);
        vm.prank(operator);
        vm.expectRevert(bad);
        nodes.register(h100Node(), "", STAKE, agent, deadline, consent);
        vm.prank(operator);
        nodes.setAgent(nodeId, operator, 0, "");
        vm.prank(operator);
        vm.expectRevert(bad);
        nodes.setAgent(nodeId, agent, deadline, consent);
    }

    /// The attacker copies a victim operator's pending registration (consent included) and
    /// sends it first from its own address: the consent names the operator, so it fails.
    function test_aFrontRunConsent_isRefused() public {
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory consent = signConsent(operator, AGENT_KEY, deadline);
        vm.prank(attacker);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_BadConsent.selector, agent));
        nodes.register(h100Node(), "", STAKE, agent, deadline, consent);
        vm.prank(operator);
        nodes.register(h100Node(), "", STAKE, agent, deadline, consent);
    }

    // ---------------------------------------------------------------- domain

    /// The consent's digest is EIP-712 over ("Gantry", "2", this chain, the market).
    function test_theDigest_bindsNameVersionChainAndMarket() public view {
        assertEq(
            consentDigestOn(block.chainid, address(market), "2", operator, agent, 0, 100),
            nodes.consentDigest(operator, agent, 0, 100)
        );
    }

    function test_aConsentForAnotherChain_isRefused() public {
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory elsewhere = sign(AGENT_KEY, consentDigestOn(1, address(market), "2", operator, agent, 0, deadline));
        bytes memory bad = abi.encodeWithSelector(INodeRegistry.NodeRegistry_BadConsent.selector, agent);
        vm.prank(operator);
        vm.expectRevert(bad);
        nodes.register(h100Node(), "", STAKE, agent, deadline, elsewhere);
        // Signed here, replayed after a fork to another chain id.
        bytes memory here = signConsent(operator, AGENT_KEY, deadline);
        vm.chainId(block.chainid + 1);
        vm.prank(operator);
        vm.expectRevert(bad);
        nodes.register(h100Node(), "", STAKE, agent, deadline, here);
    }

    function test_aConsentForAnotherMarketOrVersion_isRefused() public {
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory bad = abi.encodeWithSelector(INodeRegistry.NodeRegistry_BadConsent.selector, agent);
        address registry = market.nodeRegistry();
        address[2] memory elsewhere = [registry, address(deployOtherMarket())];
        for (uint256 i; i < elsewhere.length; ++i) {
            bytes memory consent =
                sign(AGENT_KEY, consentDigestOn(block.chainid, elsewhere[i], "2", operator, agent, 0, deadline));
            vm.prank(operator);
            vm.expectRevert(bad);
            nodes.register(h100Node(), "", STAKE, agent, deadline, consent);
        }
        bytes memory v1 =
            sign(AGENT_KEY, consentDigestOn(block.chainid, address(market), "1", operator, agent, 0, deadline));
        vm.prank(operator);
        vm.expectRevert(bad);
        nodes.register(h100Node(), "", STAKE, agent, deadline, v1);
    }

    /// A consent given to one market cannot be carried to another deployment.
    function test_aConsentForThisMarket_isRefusedByAnother() public {
        JobMarket other = deployOtherMarket();
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory consent = signConsent(operator, AGENT_KEY, deadline);
        vm.prank(operator);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_BadConsent.selector, agent));
        INodeRegistry(address(other)).register(h100Node(), "", STAKE, agent, deadline, consent);
    }

    // ---------------------------------------------------------------- deadline, malleability

    function test_anExpiredConsent_isRefused_andTheLastSecondIsNot() public {
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory consent = signConsent(operator, AGENT_KEY, deadline);
        vm.warp(deadline + 1);
        vm.prank(operator);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_ConsentExpired.selector, deadline));
        nodes.register(h100Node(), "", STAKE, agent, deadline, consent);
        vm.warp(deadline);
        vm.prank(operator);
        nodes.register(h100Node(), "", STAKE, agent, deadline, consent);
    }

    /// The operator stretches the deadline it was given: the signature no longer matches.
    function test_aStretchedDeadline_isRefused() public {
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory consent = signConsent(operator, AGENT_KEY, deadline);
        vm.prank(operator);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_BadConsent.selector, agent));
        nodes.register(h100Node(), "", STAKE, agent, deadline + 30 days, consent);
    }

    /// The other half of a signature (`n - s`, the parity flipped) is refused: a consent is
    /// one signature, not two.
    function test_aMalleatedSignature_isRefused() public {
        uint256 deadline = block.timestamp + 1 hours;
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(AGENT_KEY, nodes.consentDigest(operator, agent, 0, deadline));
        bytes memory twin = abi.encodePacked(r, bytes32(N - uint256(s)), v == 27 ? uint8(28) : uint8(27));
        vm.prank(operator);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_BadConsent.selector, agent));
        nodes.register(h100Node(), "", STAKE, agent, deadline, twin);
        vm.prank(operator);
        nodes.register(h100Node(), "", STAKE, agent, deadline, abi.encodePacked(r, s, v));
    }

    // ---------------------------------------------------------------- questionable

    /// QUESTIONABLE (reported): an agent cannot withdraw a consent it signed before its
    /// deadline. Its own calls bind it without consuming its nonce, so the only way to burn
    /// the nonce is to have some operator use it; an operator that was given a long-lived
    /// consent may still bind the key long after the agent changed its mind.
    function test_anAgentCannotRevokeAnOutstandingConsent() public {
        uint256 deadline = block.timestamp + 365 days;
        bytes memory consent = signConsent(operator, AGENT_KEY, deadline);
        fund(agent, STAKE);
        vm.prank(agent);
        nodes.register(h100Node(), "", STAKE, agent, 0, ""); // the agent's own node
        assertEq(nodes.agentNonce(agent), 0, "its own call leaves the nonce alone");
        vm.warp(block.timestamp + 300 days);
        vm.prank(operator);
        nodes.register(h100Node(), "", STAKE, agent, deadline, consent);
        assertEq(nodes.getNode(2).agent, agent, "bound 300 days later");
    }

    // ---------------------------------------------------------------- helpers

    function sign(uint256 key, bytes32 d) internal pure returns (bytes memory) {
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(key, d);
        return abi.encodePacked(r, s, v);
    }

    function deployOtherMarket() internal returns (JobMarket other) {
        other = new JobMarket(
            token, admin, marketParams(), new NodeRegistry(token), new Verification(token), new Referees(token)
        );
        vm.prank(operator);
        token.approve(address(other), type(uint256).max);
    }
}
