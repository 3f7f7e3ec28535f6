// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {JobRequirements, JobStatus} from "../../src/types/Types.sol";

contract JobMarket_PostJobWithPermit_Test is JobMarketBase {
    bytes32 internal constant PERMIT_TYPEHASH =
        keccak256("Permit(address owner,address spender,uint256 value,uint256 nonce,uint256 deadline)");

    address internal signer;
    uint256 internal signerKey;

    function setUp() public override {
        super.setUp();
        (signer, signerKey) = makeAddrAndKey("permit-signer");
        token.mint(signer, 1_000e6); // no approval: the permit provides it
    }

    struct Sig {
        uint8 v;
        bytes32 r;
        bytes32 s;
    }

    function sign(uint256 value, uint256 permitDeadline) internal view returns (Sig memory sig) {
        bytes32 structHash = keccak256(
            abi.encode(PERMIT_TYPEHASH, signer, address(market), value, token.nonces(signer), permitDeadline)
        );
        bytes32 digest = keccak256(abi.encodePacked("\x19\x01", token.DOMAIN_SEPARATOR(), structHash));
        (sig.v, sig.r, sig.s) = vm.sign(signerKey, digest);
    }

    function postWithPermit(address from, uint256 permitDeadline, Sig memory sig) internal returns (uint64) {
        return postWithPermit(from, h100Job(), permitDeadline, sig);
    }

    function postWithPermit(address from, JobRequirements memory req, uint256 permitDeadline, Sig memory sig)
        internal
        returns (uint64)
    {
        vm.prank(from);
        return market.postJobWithPermit(
            req, BOUNTY, uint40(block.timestamp + 1 days), specJson(), permitDeadline, sig.v, sig.r, sig.s
        );
    }

    function test_PostJobWithPermit_PostsWithSignature() external {
        uint256 permitDeadline = block.timestamp + 1 hours;
        Sig memory sig = sign(BOUNTY, permitDeadline);
        assertEq(token.allowance(signer, address(market)), 0);

        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobPosted(
            1, signer, h100Job(), BOUNTY, uint40(block.timestamp + 1 days), keccak256(specJson()), specJson()
        );
        uint64 jobId = postWithPermit(signer, permitDeadline, sig);

        assertEq(jobId, 1);
        assertEq(market.jobCount(), 1);
        assertEq(token.nonces(signer), 1, "permit used");
        assertEq(token.allowance(signer, address(market)), 0, "allowance spent");
        assertEq(token.balanceOf(signer), 1_000e6 - BOUNTY);
        assertEq(token.balanceOf(address(market)), BOUNTY);
        assertEq(jobOf(jobId).submitter, signer);
        assertEq(jobOf(jobId).bounty, BOUNTY);
        assertStatus(jobId, JobStatus.Open);
    }

    function test_PostJobWithPermit_PostsWhenPermitFrontRun() external {
        uint256 permitDeadline = block.timestamp + 1 hours;
        Sig memory sig = sign(BOUNTY, permitDeadline);
        // Someone submits the permit from the mempool first.
        vm.prank(stranger);
        token.permit(signer, address(market), BOUNTY, permitDeadline, sig.v, sig.r, sig.s);
        assertEq(token.allowance(signer, address(market)), BOUNTY);

        uint64 jobId = postWithPermit(signer, permitDeadline, sig);

        assertEq(jobId, 1);
        assertEq(token.nonces(signer), 1);
        assertEq(token.allowance(signer, address(market)), 0);
        assertEq(token.balanceOf(address(market)), BOUNTY);
        assertEq(jobOf(jobId).submitter, signer);
    }

    function test_PostJobWithPermit_PostsWithBadSignatureWhenAllowanceExists() external {
        // The submitter approved the market in setUp; the signature is garbage.
        Sig memory sig = Sig({v: 27, r: bytes32(uint256(1)), s: bytes32(uint256(2))});
        uint256 before = token.balanceOf(submitter);
        uint64 jobId = postWithPermit(submitter, block.timestamp + 1 hours, sig);
        assertEq(jobOf(jobId).submitter, submitter);
        assertEq(token.balanceOf(submitter), before - BOUNTY);
        assertEq(token.balanceOf(address(market)), BOUNTY);
    }

    function test_RevertWhen_PermitFailsAndNoAllowance() external {
        uint256 permitDeadline = block.timestamp + 1 hours;
        Sig memory sig = sign(BOUNTY, permitDeadline);
        // Signed by `signer`, sent by `stranger`: the permit fails, stranger has no allowance.
        token.mint(stranger, BOUNTY);
        expectAllowanceShort(0, BOUNTY);
        postWithPermit(stranger, permitDeadline, sig);
    }

    function test_RevertWhen_PermitAlreadyUsedAndAllowanceSpent() external {
        uint256 permitDeadline = block.timestamp + 1 hours;
        Sig memory sig = sign(BOUNTY, permitDeadline);
        postWithPermit(signer, permitDeadline, sig);
        // Replaying the same permit: nonce used, allowance spent by the first post.
        expectAllowanceShort(0, BOUNTY);
        postWithPermit(signer, permitDeadline, sig);
    }

    function test_RevertWhen_PermitExpiredAndNoAllowance() external {
        uint256 permitDeadline = block.timestamp - 1;
        Sig memory sig = sign(BOUNTY, permitDeadline);
        expectAllowanceShort(0, BOUNTY);
        postWithPermit(signer, permitDeadline, sig);
    }

    function test_RevertWhen_RequirementsInvalid() external {
        uint256 permitDeadline = block.timestamp + 1 hours;
        Sig memory sig = sign(BOUNTY, permitDeadline);
        JobRequirements memory req = h100Job();
        req.priority = 0;
        vm.expectRevert(IJobMarket.JobMarket_InvalidRequirements.selector);
        postWithPermit(signer, req, permitDeadline, sig);
        assertEq(token.nonces(signer), 0, "permit rolled back");
    }

    function test_RevertWhen_Paused() external {
        uint256 permitDeadline = block.timestamp + 1 hours;
        Sig memory sig = sign(BOUNTY, permitDeadline);
        pauseMarket();
        vm.expectRevert(Pausable.EnforcedPause.selector);
        postWithPermit(signer, permitDeadline, sig);
    }
}
