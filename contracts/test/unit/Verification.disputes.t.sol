// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {VerificationUnitTest} from "./Verification.base.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {IVerificationEvents} from "../../src/interfaces/IVerification.sol";
import {FailureKind, JobStatus, JobTerms, MarketParams, Seat, VerifiedState} from "../../src/types/Types.sol";

/// @notice A refereed job's dispute (design 18, §2.6): the submitter escrows the bond and r
/// bounties, r referees (never the provider nor its operator) re-execute the job, commit and
/// reveal; a majority upholds or overturns the provider's result, and without one the
/// arbiter decides (or lapses, and the result stands). Nobody profits from a fault they
/// can cause: an overturned provider repays what the referees cost.
contract VerificationDisputesTest is VerificationUnitTest {
    using JobView for JobTerms;
    using JobView for VerifiedState;

    bytes32 internal constant R = keccak256("the provider's result");
    bytes32 internal constant X = keccak256("another result");
    bytes32 internal constant Y = keccak256("a third result");
    uint96 internal constant B = 5e6;
    /// The seat number in the provider's seal.
    uint8 internal constant PROVIDER_SEAT = 255;

    uint64 internal provider;

    function fee() internal pure returns (uint96) {
        return B * FEE_BPS / 10_000;
    }

    function bond() internal pure returns (uint96) {
        return DISPUTE_BOND > B / 10 ? DISPUTE_BOND : B / 10;
    }

    /// A refereed r-job placed on a member of a pool of r + 1 nodes of r + 1 operators,
    /// which answers `R` when `answer`.
    function placed(uint8 r, bool answer) internal returns (uint64 id) {
        uint64[] memory members = pool(r + 1);
        provider = members[0];
        id = postVerified(refereed(r), B, uint40(block.timestamp + 1 days));
        vm.prank(matcher);
        referees.assignRefereed(id, provider, terms(id), verified[id]);
        sync();
        if (!answer) return id;
        vm.prank(agentOf[provider]);
        referees.submitRefereedResult(id, terms(id), verified[id], providerSeal(id, R), "gantry://results/1");
        sync();
    }

    /// The provider's seal of `digest`, as its worker makes it.
    function providerSeal(uint64 id, bytes32 digest) internal view returns (bytes32) {
        return sealOf(id, PROVIDER_SEAT, provider, digest, saltOf(id, PROVIDER_SEAT));
    }

    /// The market's storage slot of `_seats[id][PROVIDER_SEAT]` (`_seats` is slot 18, as
    /// `forge inspect JobMarket storageLayout` shows).
    function providerSlot(uint64 id) internal pure returns (bytes32) {
        return keccak256(abi.encode(uint256(PROVIDER_SEAT), keccak256(abi.encode(uint256(id), uint256(18)))));
    }

    /// The provider opens its seal (in the reveal phase).
    function revealProvider(uint64 id, bytes32 digest) internal {
        vm.prank(agentOf[provider]);
        referees.revealRefereed(id, terms(id), verified[id], digest, saltOf(id, PROVIDER_SEAT));
        sync();
    }

    /// A refereed r-job answered `R` by the provider (a pool member too) and disputed; its
    /// referees drawn from the rest of the pool.
    function disputed(uint8 r) internal returns (uint64 id) {
        id = placed(r, true);
        vm.prank(submitter);
        referees.requestReferees(id, terms(id), verified[id]);
        sync();
        drawWith(id, 1);
        for (uint256 i; i < r; ++i) {
            require(seatNode(id, i) != 0 && seatNode(id, i) != provider, "every referee seated, not the provider");
        }
    }

    function decideReferees(uint64 id) internal {
        vm.prank(stranger);
        referees.decideReferees(id, terms(id), verified[id], seatList(id));
        sync();
    }

    /// Every referee commits `digests[i]` (zero: not at all), the reveals open when the
    /// commit phase ends, the provider and each committed referee reveal.
    function referee(uint64 id, bytes32[] memory digests) internal {
        for (uint256 i; i < digests.length; ++i) {
            if (digests[i] != 0) commit(id, i, digests[i]);
        }
        vm.warp(verified[id].commitEnd() + 1);
        revealProvider(id, R);
        for (uint256 i; i < digests.length; ++i) {
            if (digests[i] != 0) reveal(id, i, digests[i]);
        }
    }

    function three(bytes32 a, bytes32 b, bytes32 c) internal pure returns (bytes32[] memory d) {
        d = new bytes32[](3);
        (d[0], d[1], d[2]) = (a, b, c);
    }

    // ---------------------------------------------------------------- requesting

    function test_requestReferees_escrowsTheBondAndThePrepay_andArmsADraw() public {
        uint64 id = placed(3, false);
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, id, JobStatus.Assigned));
        referees.requestReferees(id, terms(id), verified[id]);
        vm.prank(agentOf[provider]);
        referees.submitRefereedResult(id, terms(id), verified[id], providerSeal(id, R), "");
        sync();
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotSubmitter.selector, id, stranger));
        referees.requestReferees(id, terms(id), verified[id]);
        uint256 balance = token.balanceOf(submitter);
        vm.prank(submitter);
        referees.requestReferees(id, terms(id), verified[id]);
        sync();
        assertEq(balance - token.balanceOf(submitter), bond() + 3 * B, "the bond and three bounties");
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Committing));
        assertEq(verified[id].nodeId(), provider, "the provider stays named");
        assertGt(verified[id].drawBlock(), 0);
        assertEq(market.jobHash(id), keccak256(abi.encode(verified[id])), "the fold is the market's state");
        assertReplay();
    }

    function test_requestReferees_onlyWithinTheChallengeWindow() public {
        uint64 id = placed(3, true);
        uint40 until = verified[id].until();
        vm.warp(until);
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_ChallengeWindowClosed.selector, id, until));
        referees.requestReferees(id, terms(id), verified[id]);
    }

    /// Whatever the seed, neither the provider, nor another node of its operator, nor a
    /// node its agent serves referees.
    function testFuzz_theProviderAndItsOperator_neverReferee(uint256 seed) public {
        uint64[] memory members = pool(4);
        provider = members[0];
        address owner = node(provider).operator;
        uint64 twin = registerNode(owner, 0x7777, wasmNode(), STAKE);
        syncPool(twin);
        // Another operator's node served by the provider's own agent.
        address other = makeAddr("another operator");
        fund(other, 10_000e6);
        uint64 served = registerNode(other, 0xC0000, wasmNode(), STAKE);
        syncPool(served);
        uint64 id = postVerified(refereed(3), B, uint40(block.timestamp + 1 days));
        vm.prank(matcher);
        referees.assignRefereed(id, provider, terms(id), verified[id]);
        sync();
        vm.prank(agentOf[provider]);
        referees.submitRefereedResult(id, terms(id), verified[id], providerSeal(id, R), "");
        sync();
        vm.prank(submitter);
        referees.requestReferees(id, terms(id), verified[id]);
        sync();
        drawWith(id, seed);
        for (uint256 i; i < 3; ++i) {
            uint64 n = seatNode(id, i);
            assertTrue(n != provider && n != twin && n != served, "never the provider's operator or agent");
        }
    }

    // ---------------------------------------------------------------- the decision

    function test_aMajorityUpholds_theProviderIsPaidTheBountyAndTheBond() public {
        uint64 id = disputed(3);
        referee(id, three(R, R, X));
        uint64 liar = seatNode(id, 2);
        uint256 credits = market.creditOf(submitter);
        decideReferees(id);
        assertEq(node(provider).earnings, B - fee() + bond(), "the bounty and the bond");
        assertEq(node(provider).lockedStake, 0, "the hold released");
        assertEq(node(seatNode(id, 0)).earnings, B - fee(), "a referee with the majority is paid");
        assertEq(node(liar).stake, STAKE - verified[id].seatStake(), "a referee against it is slashed");
        assertEq(market.creditOf(submitter) - credits, B, "the unpaid referee's prepay back");
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Completed));
        assertReplay();
    }

    /// The provider lied: the referees overturn it. It loses its seat stake and repays the
    /// referees out of its hold; the submitter gets back everything it put in.
    function test_aMajorityOverturns_theSubmitterGetsAllBack_theProviderPays() public {
        uint64 id = disputed(3);
        referee(id, three(X, X, X));
        uint256 credits = market.creditOf(submitter);
        uint96 seatStake = verified[id].seatStake();
        vm.expectEmit(address(market));
        emit IJobMarket.JobFailed(id, FailureKind.RefereesOverturned, B);
        decideReferees(id);
        assertEq(market.creditOf(submitter) - credits, B + bond() + 3 * B, "all it put in");
        assertEq(node(provider).stake, STAKE - seatStake - 3 * B, "the seat stake and the referees' pay");
        assertEq(node(provider).lockedStake, 0);
        for (uint256 i; i < 3; ++i) {
            assertEq(node(seatNode(id, i)).earnings, B - fee(), "every referee paid");
        }
        assertReplay();
    }

    /// No majority (three different digests): the arbiter decides; nobody is slashed (each
    /// digest is alone), the prepay comes back; when the arbiter lapses the result stands
    /// and the bond comes back too.
    function test_noMajority_goesToTheArbiter_andALapseLetsTheResultStand() public {
        uint64 id = disputed(3);
        referee(id, three(R, X, Y));
        uint256 credits = market.creditOf(submitter);
        decideReferees(id);
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Arbitrating));
        assertEq(market.creditOf(submitter) - credits, 3 * B, "the prepay back");
        assertEq(node(provider).lockedStake, uint256(verified[id].seatStake()) + 3 * B, "the hold kept");
        assertEq(market.jobHash(id), keccak256(abi.encode(verified[id])));
        uint40 until = verified[id].until();
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_DisputeOpen.selector, id, until));
        referees.settleVerified(id, terms(id), verified[id]);
        vm.warp(until);
        vm.prank(arbiter);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_DisputeLapsed.selector, id, until));
        referees.resolveVerified(id, terms(id), verified[id], false);
        vm.prank(stranger);
        referees.settleVerified(id, terms(id), verified[id]);
        sync();
        assertEq(node(provider).earnings, B - fee(), "the result stands");
        assertEq(node(provider).lockedStake, 0);
        assertEq(market.creditOf(submitter) - credits, 3 * B + bond(), "and the bond back");
        assertReplay();
    }

    /// 5 referees: X, X, Y, Y and an absent one — no majority, both pairs paid from the
    /// prepay, the absent one slashed. The arbiter then finds against the provider: it
    /// repays the four paid referees out of its hold.
    function test_theArbiterAgainstTheProvider_repaysTheRefereesPaid() public {
        uint64 id = disputed(5);
        bytes32[] memory d = new bytes32[](5);
        (d[0], d[1], d[2], d[3]) = (X, X, Y, Y);
        referee(id, d);
        pastReveals(id);
        uint256 credits = market.creditOf(submitter);
        decideReferees(id);
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Arbitrating));
        assertEq(market.creditOf(submitter) - credits, B, "the absent referee's prepay back");
        vm.prank(stranger);
        vm.expectRevert();
        referees.resolveVerified(id, terms(id), verified[id], false);
        vm.prank(arbiter);
        referees.resolveVerified(id, terms(id), verified[id], false);
        sync();
        uint96 seatStake = verified[id].seatStake();
        assertEq(market.creditOf(submitter) - credits, B + B + bond() + 4 * B, "all it put in");
        assertEq(node(provider).stake, STAKE - seatStake - 4 * B);
        assertEq(node(provider).lockedStake, 0);
        assertReplay();
    }

    /// No referee commits (a job nobody can re-run, or no panel): the arbiter decides, and
    /// no referee is slashed.
    function test_noPanel_neverPaysTheProviderByDefault_andSlashesNoReferee() public {
        uint64 id = disputed(3);
        vm.warp(verified[id].commitEnd() + 1);
        revealProvider(id, R);
        pastReveals(id);
        decideReferees(id);
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Arbitrating), "not paid by default");
        for (uint256 i = 1; i < 4; ++i) {
            assertEq(node(uint64(i + 1)).stake, STAKE, "no referee slashed");
        }
        vm.prank(arbiter);
        referees.resolveVerified(id, terms(id), verified[id], true);
        sync();
        assertEq(node(provider).earnings, B - fee() + bond(), "the arbiter for the provider: bounty and bond");
        assertEq(node(provider).lockedStake, 0);
        assertReplay();
    }

    /// The refereed decision is `decideReferees`'; a replicated job's `decide` refuses it
    /// and it refuses a replicated job.
    function test_eachTierDecidesByItsOwnRules() public {
        uint64 id = disputed(3);
        referee(id, three(R, R, R));
        Seat[] memory list = seatList(id);
        vm.expectRevert(IVerificationEvents.Verification_InvalidPolicy.selector);
        verification.decide(id, terms(id), verified[id], list);
        decideReferees(id);
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Completed));
    }

    // ---------------------------------------------------------------- the provider's seal

    /// The provider's result is a seal until the referees committed: what a lazy referee
    /// can read on chain (the seal) is no digest of the job, and a referee that copies it
    /// is slashed; the provider's own reveal waits for the reveal phase.
    function test_theProvidersDigest_staysSealed_untilTheRefereesCommitted() public {
        uint64 id = disputed(3);
        bytes32 onChain = verified[id].result;
        assertEq(onChain, providerSeal(id, R), "the job holds the seal");
        assertTrue(onChain != R, "not the digest");
        vm.prank(agentOf[provider]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_RevealNotOpen.selector, id));
        referees.revealRefereed(id, terms(id), verified[id], R, saltOf(id, PROVIDER_SEAT));
        uint64 copier = seatNode(id, 2);
        referee(id, three(R, R, onChain));
        decideReferees(id);
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Completed), "upheld");
        assertEq(node(copier).stake, STAKE - verified[id].seatStake(), "the copier is slashed");
        assertEq(node(copier).earnings, 0);
        assertReplay();
    }

    /// A provider that does not open its seal loses, even when every referee found the
    /// digest it sealed: it never showed which result it stood by. The referees are paid
    /// (out of its hold, in the end); the submitter gets back all it put in.
    function test_aProviderThatDoesNotReveal_losesTheDispute() public {
        uint64 id = disputed(3);
        for (uint256 i; i < 3; ++i) {
            commit(id, i, R);
        }
        vm.warp(verified[id].commitEnd() + 1);
        for (uint256 i; i < 3; ++i) {
            reveal(id, i, R);
        }
        uint40 revealBy = verified[id].commitEnd() + W;
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_NotDecidable.selector, id, revealBy));
        referees.decideReferees(id, terms(id), verified[id], seatList(id));
        pastReveals(id);
        uint256 credits = market.creditOf(submitter);
        uint96 seatStake = verified[id].seatStake();
        vm.expectEmit(address(market));
        emit IVerificationEvents.RefereesDecided(id, provider, 3, R, 3, bond(), 0, 0);
        vm.expectEmit(address(market));
        emit IJobMarket.JobFailed(id, FailureKind.RefereesOverturned, B);
        decideReferees(id);
        assertEq(market.creditOf(submitter) - credits, B + bond() + 3 * B, "all it put in");
        assertEq(node(provider).stake, STAKE - seatStake - 3 * B, "the seat stake and the referees' pay");
        assertEq(node(provider).lockedStake, 0);
        for (uint256 i; i < 3; ++i) {
            assertEq(node(seatNode(id, i)).earnings, B - fee(), "every referee paid");
        }
        assertReplay();
    }

    /// Only the sealed digest with its salt opens the seal, once, within the reveal phase;
    /// whoever holds them may send it (the submitter received the salt with the outputs).
    function test_revealRefereed_opensOnlyTheSeal_once_withinThePhase() public {
        uint64 id = disputed(3);
        vm.warp(verified[id].commitEnd() + 1);
        bytes32 salt = saltOf(id, PROVIDER_SEAT);
        vm.prank(agentOf[provider]);
        vm.expectRevert(
            abi.encodeWithSelector(IVerificationEvents.Verification_SealMismatch.selector, id, PROVIDER_SEAT)
        );
        referees.revealRefereed(id, terms(id), verified[id], X, salt);
        vm.prank(agentOf[provider]);
        vm.expectRevert(
            abi.encodeWithSelector(IVerificationEvents.Verification_SealMismatch.selector, id, PROVIDER_SEAT)
        );
        referees.revealRefereed(id, terms(id), verified[id], R, keccak256("a guessed salt"));
        vm.prank(agentOf[provider]);
        vm.expectRevert(IVerificationEvents.Verification_EmptyDigest.selector);
        referees.revealRefereed(id, terms(id), verified[id], bytes32(0), salt);
        vm.expectEmit(address(market));
        emit IVerificationEvents.ProviderRevealed(id, provider, R);
        vm.prank(submitter);
        referees.revealRefereed(id, terms(id), verified[id], R, salt);
        vm.prank(agentOf[provider]);
        vm.expectRevert(
            abi.encodeWithSelector(IVerificationEvents.Verification_WrongPhase.selector, id, PROVIDER_SEAT, 3)
        );
        referees.revealRefereed(id, terms(id), verified[id], R, salt);
    }

    function test_revealRefereed_afterThePhase_isRefused() public {
        uint64 id = disputed(3);
        pastReveals(id);
        uint40 revealBy = verified[id].commitEnd() + W;
        vm.prank(agentOf[provider]);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_RevealClosed.selector, id, revealBy));
        referees.revealRefereed(id, terms(id), verified[id], R, saltOf(id, PROVIDER_SEAT));
    }

    /// With everyone revealed the dispute is decided at once, and the provider's reveal
    /// slot is cleared with it.
    function test_decideReferees_onceAllRevealed_clearsTheProvidersSlot() public {
        uint64 id = disputed(3);
        referee(id, three(R, R, R));
        assertEq(vm.load(address(market), providerSlot(id)), R, "the provider's digest, stored");
        decideReferees(id);
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Completed));
        assertEq(vm.load(address(market), providerSlot(id)), bytes32(0), "nothing left behind");
    }

    /// A market whose dispute period is one second still gives a dispute time to draw its
    /// panel: the commit phase is at least five minutes beside the referees' runtime.
    function test_aShortDisputePeriod_stillLeavesTimeToDrawThePanel() public {
        MarketParams memory p = marketParams();
        p.disputePeriod = 1;
        setParams(p);
        vm.prank(admin);
        verification.setVerifyParams(verifyParams());
        uint64 id = placed(3, true);
        vm.prank(submitter);
        referees.requestReferees(id, terms(id), verified[id]);
        sync();
        assertEq(verified[id].commitEnd(), block.timestamp + 5 minutes + terms(id).maxRuntime());
        vm.warp(block.timestamp + 24);
        drawWith(id, 7);
        for (uint256 i; i < 3; ++i) {
            assertTrue(seatNode(id, i) != 0, "every referee seated");
        }
    }
}
