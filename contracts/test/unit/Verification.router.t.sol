// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {VerificationUnitTest} from "./Verification.base.sol";
import {JobMarket} from "../../src/JobMarket.sol";
import {NodeRegistry} from "../../src/NodeRegistry.sol";
import {Referees} from "../../src/Referees.sol";
import {Verification} from "../../src/Verification.sol";
import {GantryTestToken} from "../../src/dev/GantryTestToken.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {IReferees, IVerification, IVerificationEvents} from "../../src/interfaces/IVerification.sol";
import {JobStatus, JobTerms, VerifiedState} from "../../src/types/Types.sol";

/// @notice The market's fallback sends exactly `IVerification`'s calls to the
/// `Verification` extension (its selectors are literals there) and everything else to the
/// registry; the extension's own address runs nothing that writes.
contract VerificationRouterTest is VerificationUnitTest {
    /// The routed list is the whole interface: a function added to `IVerification` changes
    /// its id and fails this until the router (and this list) name it.
    function test_theRoutedSelectors_areTheWholeInterface() public pure {
        bytes4[13] memory routed = [
            IVerification.postVerifiedJob.selector,
            IVerification.expireVerified.selector,
            IVerification.setVerifyParams.selector,
            IVerification.verifyParams.selector,
            IVerification.poolFloor.selector,
            IVerification.draw.selector,
            IVerification.commitSeat.selector,
            IVerification.rejectSeat.selector,
            IVerification.reclaimSeat.selector,
            IVerification.openReveals.selector,
            IVerification.revealSeat.selector,
            IVerification.decide.selector,
            IVerification.cancelVerified.selector
        ];
        bytes4 id;
        for (uint256 i; i < routed.length; ++i) {
            id ^= routed[i];
        }
        assertEq(id, type(IVerification).interfaceId);
        // The router's literals, as `JobMarket` spells them.
        bytes4[13] memory literals = [
            bytes4(0x5251167e),
            0x1b3cddf4,
            0x2b21d8ad,
            0x6260cb30,
            0xc0639dac,
            0x9c081ff9,
            0x79f4de50,
            0xbc144078,
            0x75b85119,
            0x6d42b2b7,
            0x7bc93dcc,
            0x6b842ed2,
            0x21987453
        ];
        for (uint256 i; i < routed.length; ++i) {
            assertEq(routed[i], literals[i]);
        }
        // The refereed tier's, to `Referees`.
        bytes4[12] memory refereed = [
            IReferees.requestReferees.selector,
            IReferees.assignRefereed.selector,
            IReferees.claimRefereed.selector,
            IReferees.submitRefereedResult.selector,
            IReferees.rejectRefereed.selector,
            IReferees.reclaimRefereed.selector,
            IReferees.acceptVerified.selector,
            IReferees.finalizeVerified.selector,
            IReferees.decideReferees.selector,
            IReferees.resolveVerified.selector,
            IReferees.settleVerified.selector,
            IReferees.revealRefereed.selector
        ];
        bytes4[12] memory refereedLiterals = [
            bytes4(0xfff72ab5),
            0x45dc9994,
            0xe722b90a,
            0xec243e5b,
            0x5352a63f,
            0x5f1a9e0c,
            0xaa09a815,
            0x833b2e20,
            0xd223ce35,
            0x415b2171,
            0x27425206,
            0x68bf9d94
        ];
        bytes4 refereedId;
        for (uint256 i; i < refereed.length; ++i) {
            refereedId ^= refereed[i];
            assertEq(refereed[i], refereedLiterals[i]);
        }
        assertEq(refereedId, type(IReferees).interfaceId);
        // The heartbeat skips the list: its literal is the registry's.
        assertEq(INodeRegistry.heartbeat.selector, bytes4(0x9bf6fa57));
    }

    /// Each call reaches the extension: its answers and its own errors come back (the
    /// registry has none of these functions and would revert without data).
    function test_everyVerificationCall_isServedByTheExtension() public {
        assertEq(verification.poolFloor(), verifyParams().poolFloor);
        assertEq(verification.verifyParams(1).minPool, verifyParams().minPool);
        vm.prank(admin);
        verification.setVerifyParams(verifyParams());
        uint64 id = postRefereed();
        JobTerms memory t = terms(id);
        VerifiedState memory v = verified[id];
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_NotExpired.selector, id));
        verification.expireVerified(id, t, v);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, id, JobStatus.Open));
        verification.draw(id, t, v);
        vm.prank(submitter);
        verification.cancelVerified(id, t, v);
    }

    function test_theExtensionRefusesDirectCalls() public {
        Verification extension = Verification(market.verification());
        assertTrue(address(extension) != address(market));
        VerifiedState memory none;
        JobTerms memory noTerms;
        vm.expectRevert(IVerificationEvents.Verification_OnlyThroughMarket.selector);
        extension.postVerifiedJob(wasmJob(), refereed(3), BOUNTY, uint40(block.timestamp + 1 days), spec());
        vm.expectRevert(IVerificationEvents.Verification_OnlyThroughMarket.selector);
        extension.cancelVerified(1, noTerms, none);
        Referees refereesExtension = Referees(market.referees());
        vm.expectRevert(IVerificationEvents.Verification_OnlyThroughMarket.selector);
        refereesExtension.settleVerified(1, noTerms, none);
        vm.expectRevert(IVerificationEvents.Verification_OnlyThroughMarket.selector);
        extension.expireVerified(1, noTerms, none);
        vm.expectRevert(IVerificationEvents.Verification_OnlyThroughMarket.selector);
        vm.prank(admin);
        extension.setVerifyParams(verifyParams());
    }

    /// A market wired to an extension of another token (either) is refused at deployment.
    function test_aMarketWithAForeignExtension_isRefused() public {
        Verification foreign = new Verification(new GantryTestToken());
        NodeRegistry registry = NodeRegistry(market.nodeRegistry());
        Referees referees = Referees(market.referees());
        vm.expectRevert(IJobMarket.JobMarket_RegistryMismatch.selector);
        new JobMarket(token, admin, marketParams(), registry, foreign, referees);
        Verification ours = Verification(market.verification());
        Referees foreignReferees = new Referees(new GantryTestToken());
        vm.expectRevert(IJobMarket.JobMarket_RegistryMismatch.selector);
        new JobMarket(token, admin, marketParams(), registry, ours, foreignReferees);
    }
}
