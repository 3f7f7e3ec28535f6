// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Base} from "../Base.t.sol";
import {JobView} from "../JobView.sol";
import {IReferees, IVerification} from "../../src/interfaces/IVerification.sol";
import {
    JobRequirements,
    JobState,
    JobStatus,
    JobTerms,
    NodeCapabilities,
    Seat,
    VERIFY_REFEREED,
    VERIFY_REPLICATED,
    VerifiedState,
    VerifyPolicy
} from "../../src/types/Types.sol";

/// @notice Shared fixtures of the verified jobs' unit tests (`Verification.<part>.t.sol`):
/// verification offered under the devnet's rules (`Base.verifyParams`), CPU nodes of
/// distinct operators serving WASM, and verified jobs posted and folded like any other.
abstract contract VerificationUnitTest is Base {
    using JobView for JobTerms;
    using JobView for JobState;
    using JobView for VerifiedState;

    IVerification internal verification;
    IReferees internal referees;
    uint16 internal constant W = 60;

    function setUp() public virtual override {
        super.setUp();
        verification = IVerification(address(market));
        referees = IReferees(address(market));
        enableVerification();
    }

    // ---------------------------------------------------------------- nodes

    /// A CPU box running WASM only.
    function wasmNode() internal pure returns (NodeCapabilities memory) {
        return NodeCapabilities(bytes32(0), 0, 0, 16, 65_536, 0, 2, WASM_ONLY);
    }

    /// Registers the `i`th WASM node, of its own operator, with `stake`; it is not in the
    /// pool until synced.
    function registerWasmNode(uint256 i, uint96 stake) internal returns (uint64) {
        address owner = makeAddr(string.concat("wasm operator ", vm.toString(i)));
        fund(owner, 10_000e6);
        return registerNode(owner, 0xC0000 + i, wasmNode(), stake);
    }

    /// Anyone syncs `id`'s pool membership.
    function syncPool(uint64 id) internal {
        uint64[] memory ids = new uint64[](1);
        ids[0] = id;
        vm.prank(stranger);
        nodes.syncPool(ids);
        sync();
    }

    /// `n` WASM nodes of `n` operators, each in the pool.
    function pool(uint256 n) internal returns (uint64[] memory ids) {
        ids = new uint64[](n);
        for (uint256 i; i < n; ++i) {
            ids[i] = registerWasmNode(i, STAKE);
        }
        vm.prank(stranger);
        nodes.syncPool(ids);
        sync();
    }

    // ---------------------------------------------------------------- jobs

    function replicated(uint8 n, uint8 k) internal pure returns (VerifyPolicy memory) {
        return VerifyPolicy({tier: VERIFY_REPLICATED, size: n, quorum: k, revealWindow: W});
    }

    function refereed(uint8 r) internal pure returns (VerifyPolicy memory) {
        return VerifyPolicy({tier: VERIFY_REFEREED, size: r, quorum: 0, revealWindow: W});
    }

    /// A deadline that leaves a replicated job its first draw, one run and the reveals.
    function replicatedDeadline() internal view returns (uint40) {
        return uint40(block.timestamp + 10 minutes + RUNTIME + W + 1 hours);
    }

    function postVerified(VerifyPolicy memory policy, uint96 bounty, uint40 deadline) internal returns (uint64 jobId) {
        vm.prank(submitter);
        jobId = verification.postVerifiedJob(wasmJob(), policy, bounty, deadline, spec());
        sync();
    }

    function postReplicated() internal returns (uint64) {
        return postVerified(replicated(3, 2), BOUNTY, replicatedDeadline());
    }

    function postRefereed() internal returns (uint64) {
        return postVerified(refereed(3), BOUNTY, uint40(block.timestamp + 1 days));
    }

    function terms(uint64 jobId) internal view returns (JobTerms memory) {
        return jobs[jobId].terms;
    }

    // ---------------------------------------------------------------- seats

    /// Anyone draws the job's armed round, from its first block, with `seed`.
    function drawWith(uint64 jobId, uint256 seed) internal {
        vm.roll(verified[jobId].drawBlock());
        vm.prevrandao(bytes32(seed));
        vm.prank(stranger);
        verification.draw(jobId, terms(jobId), verified[jobId]);
        sync();
    }

    /// A replicated n/k job posted to a pool of exactly n members and drawn: every member
    /// seated.
    function seatedJob(uint8 n, uint8 k) internal returns (uint64 jobId) {
        pool(n);
        jobId = postVerified(replicated(n, k), BOUNTY, replicatedDeadline());
        drawWith(jobId, 1);
        for (uint256 i; i < n; ++i) {
            require(seatNode(jobId, i) != 0, "every member seated");
        }
    }

    function seatNode(uint64 jobId, uint256 i) internal view returns (uint64) {
        return uint64(uint48(verified[jobId].seats >> (48 * i)));
    }

    /// The seal of `digest` for seat `i`, as the market computes it.
    function sealOf(uint64 jobId, uint256 i, uint64 nodeId, bytes32 digest, bytes32 salt)
        internal
        view
        returns (bytes32)
    {
        return keccak256(abi.encode(block.chainid, address(market), jobId, uint8(i), nodeId, digest, salt));
    }

    function saltOf(uint64 jobId, uint256 i) internal pure returns (bytes32) {
        return keccak256(abi.encode("salt", jobId, i));
    }

    /// Seat i's agent commits `digest` (with the seat's salt).
    function commit(uint64 jobId, uint256 i, bytes32 digest) internal {
        uint64 nodeId = seatNode(jobId, i);
        vm.prank(agentOf[nodeId]);
        verification.commitSeat(jobId, uint8(i), seatOf[jobId][i], sealOf(jobId, i, nodeId, digest, saltOf(jobId, i)));
        sync();
    }

    function commitAll(uint64 jobId, bytes32 digest) internal {
        for (uint256 i; i < jobs[jobId].terms.size(); ++i) {
            commit(jobId, i, digest);
        }
    }

    function reveal(uint64 jobId, uint256 i, bytes32 digest) internal {
        vm.prank(agentOf[seatNode(jobId, i)]);
        verification.revealSeat(
            jobId, terms(jobId), verified[jobId], uint8(i), seatOf[jobId][i], digest, saltOf(jobId, i)
        );
        sync();
    }

    /// Seat i's agent gives it back (it stays Declined until vacated).
    function decline(uint64 jobId, uint256 i) internal {
        vm.prank(agentOf[seatNode(jobId, i)]);
        verification.rejectSeat(jobId, uint8(i), seatOf[jobId][i]);
        sync();
    }

    /// Anyone vacates seat i (Declined, or its node marked Inactive since seated).
    function vacate(uint64 jobId, uint256 i) internal {
        vm.prank(stranger);
        verification.reclaimSeat(jobId, terms(jobId), verified[jobId], uint8(i), seatOf[jobId][i]);
        sync();
    }

    /// Every seat's word, as `openReveals` and `decide` take them.
    function seatList(uint64 jobId) internal view returns (Seat[] memory list) {
        list = new Seat[](jobs[jobId].terms.size());
        for (uint256 i; i < list.length; ++i) {
            list[i] = seatOf[jobId][i];
        }
    }

    function openReveals(uint64 jobId) internal {
        vm.prank(stranger);
        verification.openReveals(jobId, terms(jobId), verified[jobId], seatList(jobId));
        sync();
    }

    function decide(uint64 jobId) internal {
        vm.prank(stranger);
        verification.decide(jobId, terms(jobId), verified[jobId], seatList(jobId));
        sync();
    }

    /// Past the end of the job's reveal phase.
    function pastReveals(uint64 jobId) internal {
        VerifiedState memory v = verified[jobId];
        uint256 revealBy = v.status() == JobStatus.Revealing ? v.until() : v.commitEnd() + W;
        vm.warp(revealBy + 1);
    }
}
