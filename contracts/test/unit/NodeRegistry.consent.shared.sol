// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ConsentWallet, NodeRegistryUnitTest} from "./NodeRegistry.base.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {JobMarket} from "../../src/JobMarket.sol";
import {NodeRegistry} from "../../src/NodeRegistry.sol";
import {Referees} from "../../src/Referees.sol";
import {Verification} from "../../src/Verification.sol";

/// @notice What `register` and `setAgent` share: the agent's consent. It is the agent's own
/// call, or its EIP-712 `AgentConsent(operator, agent, nonce, deadline)` signature with its
/// current nonce, before the deadline, for this operator, chain and market; a contract
/// agent consents through ERC-1271. Each entry point's test contract says how it binds an
/// agent and which agent it binds.
abstract contract NodeRegistryConsentShared is NodeRegistryUnitTest {
    uint256 internal constant WALLET_OWNER_KEY = 0xC0FFEE;

    /// The key of the agent the tests bind (it must not be `operator`).
    function consentKey() internal view virtual returns (uint256);

    /// `caller` binds `agent_` through the entry point under test: one call, nothing else
    /// (an expected revert applies to it).
    function bind(address caller, address agent_, uint256 deadline, bytes memory signature) internal virtual;

    /// The agent the last successful `bind` left on its node.
    function boundAgent() internal view virtual returns (address);

    function consentAgent() internal view returns (address) {
        return vm.addr(consentKey());
    }

    /// The agent's signature for `operator` with its current nonce.
    function consent(uint256 deadline) internal view returns (bytes memory) {
        return signConsent(operator, consentKey(), nodes.agentNonce(consentAgent()), deadline);
    }

    /// `operator`'s bind of `agent_` with `signature` is refused as a bad consent.
    function expectBadBind(address agent_, uint256 deadline, bytes memory signature) internal {
        expectBadConsent(agent_);
        bind(operator, agent_, deadline, signature);
    }

    // ---------------------------------------------------------------- accepted

    function test_Consent_BySignature_SpendsTheAgentsNonce() external {
        address a = consentAgent();
        uint256 nonce = nodes.agentNonce(a);
        bind(operator, a, block.timestamp + 1 hours, consent(block.timestamp + 1 hours));
        sync();
        assertEq(boundAgent(), a);
        assertEq(nodes.agentNonce(a), nonce + 1, "the consent is spent");
        assertReplay();
    }

    function test_Consent_ByTheAgentsOwnCall_NeedsNoSignatureNorDeadline() external {
        // The operator is the agent: its call is its consent; the deadline and the (empty)
        // signature are not looked at, and no nonce is spent.
        vm.warp(block.timestamp + 365 days);
        bind(operator, operator, 0, "");
        sync();
        assertEq(boundAgent(), operator);
        assertEq(nodes.agentNonce(operator), 0);
        assertReplay();
    }

    function test_Consent_AcceptedAtItsDeadline() external {
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory signature = consent(deadline);
        vm.warp(deadline);
        bind(operator, consentAgent(), deadline, signature);
        assertEq(boundAgent(), consentAgent());
    }

    function test_Consent_ByAnERC1271Wallet() external {
        ConsentWallet wallet = new ConsentWallet(vm.addr(WALLET_OWNER_KEY));
        uint256 deadline = block.timestamp + 1 hours;
        bytes32 digest = nodes.consentDigest(operator, address(wallet), 0, deadline);
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(WALLET_OWNER_KEY, digest);
        bind(operator, address(wallet), deadline, abi.encodePacked(r, s, v));
        sync();
        assertEq(boundAgent(), address(wallet));
        assertEq(nodes.agentNonce(address(wallet)), 1, "a wallet's consent is spent too");
    }

    // ---------------------------------------------------------------- refused

    function test_Consent_RevertWhen_AgentIsZeroAddress() external {
        vm.expectRevert(INodeRegistry.NodeRegistry_ZeroAddress.selector);
        bind(operator, address(0), block.timestamp, "");
    }

    function test_Consent_RevertWhen_Expired() external {
        uint256 deadline = block.timestamp + 1 hours;
        uint256 nonce = nodes.agentNonce(consentAgent());
        bytes memory signature = consent(deadline);
        vm.warp(deadline + 1);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_ConsentExpired.selector, deadline));
        bind(operator, consentAgent(), deadline, signature);
        assertEq(nodes.agentNonce(consentAgent()), nonce, "nothing spent");
    }

    function testFuzz_Consent_RevertWhen_Expired(uint256 deadline) external {
        deadline = bound(deadline, 0, block.timestamp - 1);
        bytes memory signature = consent(deadline);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_ConsentExpired.selector, deadline));
        bind(operator, consentAgent(), deadline, signature);
    }

    function testFuzz_Consent_RevertWhen_SignedByAnotherKey(uint256 key) external {
        key = bound(key, 1, SECP256K1_ORDER - 1);
        vm.assume(key != consentKey());
        uint256 deadline = block.timestamp + 1 hours;
        address a = consentAgent();
        // The agent's digest, signed by another key.
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(key, nodes.consentDigest(operator, a, nodes.agentNonce(a), deadline));
        expectBadBind(a, deadline, abi.encodePacked(r, s, v));
    }

    function test_Consent_RevertWhen_Replayed() external {
        address a = consentAgent();
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory signature = consent(deadline);
        bind(operator, a, deadline, signature);
        uint256 nonce = nodes.agentNonce(a);
        expectBadBind(a, deadline, signature);
        assertEq(nodes.agentNonce(a), nonce, "a refused consent spends nothing");
    }

    function test_Consent_RevertWhen_NonceIsNotTheCurrentOne() external {
        address a = consentAgent();
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory ahead = signConsent(operator, consentKey(), nodes.agentNonce(a) + 1, deadline);
        expectBadBind(a, deadline, ahead);
    }

    function test_Consent_RevertWhen_SignedForAnotherOperator() external {
        address a = consentAgent();
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory forStranger = signConsent(stranger, consentKey(), nodes.agentNonce(a), deadline);
        expectBadBind(a, deadline, forStranger);
    }

    function test_Consent_RevertWhen_SignedForAnotherChain() external {
        address a = consentAgent();
        uint256 deadline = block.timestamp + 1 hours;
        bytes32 digest = consentDigestOn(block.chainid + 1, address(market), operator, a, nodes.agentNonce(a), deadline);
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(consentKey(), digest);
        expectBadBind(a, deadline, abi.encodePacked(r, s, v));
    }

    function test_Consent_RevertWhen_SignedForAnotherMarket() external {
        JobMarket other = new JobMarket(
            token, admin, marketParams(), new NodeRegistry(token), new Verification(token), new Referees(token)
        );
        address a = consentAgent();
        uint256 deadline = block.timestamp + 1 hours;
        bytes32 digest = INodeRegistry(address(other)).consentDigest(operator, a, nodes.agentNonce(a), deadline);
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(consentKey(), digest);
        expectBadBind(a, deadline, abi.encodePacked(r, s, v));
    }

    function test_Consent_RevertWhen_SignatureMalformed() external {
        address a = consentAgent();
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory good = consent(deadline);
        expectBadBind(a, deadline, "");
        bytes memory truncated = new bytes(64);
        for (uint256 i; i < 64; ++i) {
            truncated[i] = good[i];
        }
        expectBadBind(a, deadline, truncated);
        good[64] = bytes1(uint8(good[64]) ^ 0x01); // v 27 <-> 28: another signer
        expectBadBind(a, deadline, good);
    }

    function test_Consent_RevertWhen_ERC1271WalletRefuses() external {
        ConsentWallet wallet = new ConsentWallet(vm.addr(WALLET_OWNER_KEY));
        uint256 deadline = block.timestamp + 1 hours;
        bytes32 digest = nodes.consentDigest(operator, address(wallet), 0, deadline);
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(consentKey(), digest); // not the wallet's owner
        expectBadConsent(address(wallet));
        bind(operator, address(wallet), deadline, abi.encodePacked(r, s, v));
    }

    function test_Consent_RevertWhen_AgentIsAContractWithoutERC1271() external {
        // A contract agent is asked through ERC-1271 only: an ECDSA signature does not do.
        address a = address(token);
        uint256 deadline = block.timestamp + 1 hours;
        (uint8 v, bytes32 r, bytes32 s) = vm.sign(consentKey(), nodes.consentDigest(operator, a, 0, deadline));
        expectBadBind(a, deadline, abi.encodePacked(r, s, v));
    }
}
