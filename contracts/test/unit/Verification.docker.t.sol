// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {VerificationUnitTest} from "./Verification.base.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {IVerificationEvents} from "../../src/interfaces/IVerification.sol";
import {
    DETERMINISTIC_DOCKER,
    ENGINE_DOCKER,
    FailureKind,
    JobRequirements,
    JobStatus,
    JobTerms,
    NodeCapabilities,
    VerifiedState
} from "../../src/types/Types.sol";

/// @notice Verified Docker jobs (design 18, §1): a CPU Docker job, deterministic by its
/// submitter's word, replicated on nodes that opted into the deterministic sandbox. The
/// chain cannot tell a lying seat from a job that is not deterministic (or a CPU that
/// rounds otherwise), so a seat that reveals and is not paid is not slashed either, and
/// its share goes to the treasury: nobody is slashed for what the job did, and nobody
/// gains from a job that parts honest nodes. Silence is still slashed.
contract VerificationDockerTest is VerificationUnitTest {
    using JobView for JobTerms;
    using JobView for VerifiedState;

    bytes32 internal constant X = keccak256("the result");
    bytes32 internal constant Y = keccak256("another result");
    bytes32 internal constant Z = keccak256("a third result");

    function fee() internal pure returns (uint96) {
        return BOUNTY * FEE_BPS / 10_000;
    }

    /// A CPU Docker job.
    function dockerJob() internal pure returns (JobRequirements memory r) {
        r = wasmJob();
        r.engine = ENGINE_DOCKER;
    }

    /// The `i`th CPU node of its own operator running Docker, in the sandbox or not, in
    /// the pool when it may be.
    function dockerNode(uint256 i, bool sandboxed) internal returns (uint64 id) {
        NodeCapabilities memory caps = wasmNode();
        caps.engines = sandboxed ? SANDBOXED : DOCKER_ONLY;
        address owner = makeAddr(string.concat("docker operator ", vm.toString(i)));
        fund(owner, 10_000e6);
        id = registerNode(owner, 0xD0000 + i, caps, STAKE);
        syncPool(id);
    }

    function postDocker(uint8 n, uint8 k) internal returns (uint64 id) {
        vm.prank(submitter);
        id = verification.postVerifiedJob(dockerJob(), replicated(n, k), BOUNTY, replicatedDeadline(), spec());
        sync();
    }

    /// A Docker n/k job drawn from a pool of exactly n sandboxed nodes: every one seated.
    function seatedDockerJob(uint8 n, uint8 k) internal returns (uint64 id, uint64[] memory seated) {
        for (uint256 i; i < n; ++i) {
            dockerNode(i, true);
        }
        id = postDocker(n, k);
        drawWith(id, 1);
        seated = new uint64[](n);
        for (uint256 i; i < n; ++i) {
            seated[i] = seatNode(id, i);
            require(seated[i] != 0, "every node seated");
        }
    }

    // ---------------------------------------------------------------- posting

    function test_aCpuDockerJob_isPostedReplicated() public {
        for (uint256 i; i < 3; ++i) {
            dockerNode(i, true);
        }
        uint64 id = postDocker(3, 2);
        assertEq(uint8(verified[id].status()), uint8(JobStatus.Committing));
        assertReplay();
    }

    /// Refereed: a verdict against the provider could not tell a lie from a job that is
    /// not deterministic, so a Docker job's disputes stay the arbiter's (tier none). A GPU
    /// job: GPUs are not in the sandbox.
    function test_aDockerJob_isNeitherRefereedNorOnAGpu() public {
        for (uint256 i; i < 3; ++i) {
            dockerNode(i, true);
        }
        bytes memory refused =
            abi.encodeWithSelector(IVerificationEvents.Verification_EngineNotVerifiable.selector, ENGINE_DOCKER);
        vm.startPrank(submitter);
        vm.expectRevert(refused);
        verification.postVerifiedJob(dockerJob(), refereed(3), BOUNTY, uint40(block.timestamp + 1 days), spec());
        vm.expectRevert(refused);
        verification.postVerifiedJob(h100Job(), replicated(3, 2), BOUNTY, replicatedDeadline(), spec());
        JobRequirements memory anyGpu = dockerJob();
        anyGpu.minGpuCount = 1;
        vm.expectRevert(refused);
        verification.postVerifiedJob(anyGpu, replicated(3, 2), BOUNTY, replicatedDeadline(), spec());
        vm.stopPrank();
    }

    // ---------------------------------------------------------------- the pool and the draw

    /// A Docker node joins the pool only with the sandbox's bit.
    function test_onlyASandboxedDockerNode_joinsThePool() public {
        uint64 plain = dockerNode(0, false);
        uint64 sandboxed = dockerNode(1, true);
        assertEq(node(plain).poolIndex, 0, "Docker alone is not verifiable");
        assertGt(node(sandboxed).poolIndex, 0);
    }

    /// One pool, two kinds of member: a Docker job seats only sandboxed nodes, a WASM job
    /// only WASM nodes, whatever the seed.
    function testFuzz_eachJobSeatsOnlyNodesOfItsEngine(uint256 seed) public {
        uint64[] memory wasm = pool(3);
        uint64[3] memory docker;
        for (uint256 i; i < 3; ++i) {
            docker[i] = dockerNode(10 + i, true);
        }
        uint64 d = postDocker(3, 2);
        uint64 w = postReplicated();
        drawWith(d, seed);
        drawWith(w, seed);
        assertGt(seatNode(d, 0), 0, "the Docker job seated");
        assertGt(seatNode(w, 0), 0, "the WASM job seated");
        for (uint256 i; i < 3; ++i) {
            uint64 ds = seatNode(d, i);
            uint64 ws = seatNode(w, i);
            if (ds != 0) assertTrue(ds == docker[0] || ds == docker[1] || ds == docker[2], "a sandboxed node");
            if (ws != 0) assertTrue(ws == wasm[0] || ws == wasm[1] || ws == wasm[2], "a WASM node");
        }
        assertReplay();
    }

    // ---------------------------------------------------------------- the decision

    function test_threeAgreeingSeats_arePaid() public {
        (uint64 id, uint64[] memory seated) = seatedDockerJob(3, 2);
        commitAll(id, X);
        openReveals(id);
        for (uint256 i; i < 3; ++i) {
            reveal(id, i, X);
        }
        vm.expectEmit(address(market));
        emit IVerificationEvents.JobVerified(id, X, 3, 0);
        decide(id);
        for (uint256 i; i < 3; ++i) {
            assertEq(node(seated[i]).earnings, BOUNTY - fee());
            assertEq(node(seated[i]).stake, STAKE);
        }
        assertReplay();
    }

    /// X, Y, X: the job is verified with X; the seat that revealed Y is not slashed and
    /// not paid, its bounty goes to the treasury, and the submitter gets nothing back: a
    /// submitter who posts a job that is not deterministic saves nothing by it.
    function test_aSeatApartFromTheQuorum_isNeitherPaidNorSlashed_andItsShareGoesToTheTreasury() public {
        (uint64 id, uint64[] memory seated) = seatedDockerJob(3, 2);
        commit(id, 0, X);
        commit(id, 1, Y);
        commit(id, 2, X);
        openReveals(id);
        reveal(id, 0, X);
        reveal(id, 1, Y);
        reveal(id, 2, X);
        uint256 credits = market.creditOf(submitter);
        uint256 treasury = market.treasuryBalance();
        vm.expectEmit(address(market));
        emit IVerificationEvents.ReplicaForfeited(id, seated[1], BOUNTY);
        decide(id);
        assertEq(node(seated[1]).stake, STAKE, "not slashed");
        assertEq(node(seated[1]).earnings, 0, "not paid");
        assertEq(node(seated[1]).lockedStake, 0, "its lock released");
        assertEq(node(seated[0]).earnings, BOUNTY - fee());
        assertEq(node(seated[2]).earnings, BOUNTY - fee());
        assertEq(market.treasuryBalance(), treasury + BOUNTY, "the parted share");
        assertEq(market.creditOf(submitter), credits, "the submitter gains nothing");
        assertReplay();
    }

    /// Three digests: no quorum. Nobody is slashed or paid, and the revealers' bounties go
    /// to the treasury, not back: a submitter that parts the seats on purpose (noise in
    /// its outputs) and reads its answer from the public digests gets no free run.
    function test_threeDigests_noQuorum_slashNobody_andTheRevealersSharesGoToTheTreasury() public {
        (uint64 id, uint64[] memory seated) = seatedDockerJob(3, 2);
        bytes32[3] memory digests = [X, Y, Z];
        for (uint256 i; i < 3; ++i) {
            commit(id, i, digests[i]);
        }
        openReveals(id);
        for (uint256 i; i < 3; ++i) {
            reveal(id, i, digests[i]);
        }
        uint256 credits = market.creditOf(submitter);
        uint256 treasury = market.treasuryBalance();
        vm.expectEmit(address(market));
        emit IJobMarket.JobFailed(id, FailureKind.NoQuorum, 0);
        decide(id);
        for (uint256 i; i < 3; ++i) {
            assertEq(node(seated[i]).stake, STAKE);
            assertEq(node(seated[i]).earnings, 0);
        }
        assertEq(market.creditOf(submitter), credits, "nothing back");
        assertEq(market.treasuryBalance(), treasury + 3 * BOUNTY);
        assertReplay();
    }

    /// A seat that committed and never revealed, beside two lone digests: no quorum; the
    /// silent seat is slashed and its bounty refunded (it ran nothing anyone saw), the
    /// revealers' bounties go to the treasury.
    function test_noQuorum_theSilentSeatsBountyIsRefunded() public {
        (uint64 id, uint64[] memory seated) = seatedDockerJob(3, 2);
        commit(id, 0, X);
        commit(id, 1, Y);
        commit(id, 2, Z);
        openReveals(id);
        reveal(id, 0, X);
        reveal(id, 1, Y);
        pastReveals(id);
        uint256 credits = market.creditOf(submitter);
        decide(id);
        assertEq(node(seated[2]).stake, STAKE - verified[id].seatStake(), "silence is slashed");
        assertEq(node(seated[0]).stake, STAKE);
        assertEq(market.creditOf(submitter), credits + BOUNTY);
        assertReplay();
    }

    // ---------------------------------------------------------------- the pool's kinds

    /// A replicated job is posted only while its kind has `minPool` members: WASM nodes
    /// do not make a Docker job's pool, nor sandboxed nodes a WASM job's.
    function test_eachKindNeedsItsOwnMinimumPool() public {
        pool(3);
        dockerNode(10, true);
        dockerNode(11, true);
        uint16 min = verifyParams().minPool;
        vm.startPrank(submitter);
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_PoolTooSmall.selector, 2, min));
        verification.postVerifiedJob(dockerJob(), replicated(3, 2), BOUNTY, replicatedDeadline(), spec());
        vm.stopPrank();
        dockerNode(12, true);
        postDocker(3, 2);
    }

    /// The draw counts the job's kind too: a Docker job posted on three sandboxed members
    /// seats nobody once one of them left (its round waits for the next), so that two
    /// members never hold every seat.
    function test_aDrawNeedsMinPoolMembersOfTheJobsKind() public {
        pool(3);
        uint64[3] memory docker;
        for (uint256 i; i < 3; ++i) {
            docker[i] = dockerNode(10 + i, true);
        }
        uint64 id = postDocker(3, 2);
        // Left before the draw's block: the block counts two sandboxed members.
        vm.prank(node(docker[0]).operator);
        nodes.beginExit(docker[0]);
        sync();
        vm.roll(block.number + 1);
        drawWith(id, 1);
        assertEq(seatNode(id, 0), 0, "nobody seated");
        assertGt(verified[id].drawBlock(), 0, "the next round armed");
    }

    function test_sandboxedNodesDoNotMakeAWasmJobsPool() public {
        for (uint256 i; i < 3; ++i) {
            dockerNode(i, true);
        }
        registerWasmNode(0, STAKE);
        uint16 min = verifyParams().minPool;
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_PoolTooSmall.selector, 0, min));
        vm.prank(submitter);
        verification.postVerifiedJob(wasmJob(), replicated(3, 2), BOUNTY, replicatedDeadline(), spec());
    }

    /// A member whose engines change leaves the pool, and its kinds' counts with it: a
    /// node cannot join as WASM and then count as a Docker member.
    function test_changingEngines_leavesThePool_andTheCountsFollow() public {
        uint64[] memory wasm = pool(3);
        dockerNode(10, true);
        dockerNode(11, true);
        NodeCapabilities memory caps = wasmNode();
        caps.engines = SANDBOXED;
        vm.prank(node(wasm[0]).operator);
        nodes.updateCapabilities(wasm[0], caps, "ipfs://node");
        sync();
        assertEq(node(wasm[0]).poolIndex, 0, "out until synced");
        syncPool(wasm[0]);
        // Now three sandboxed members, and two WASM ones.
        postDocker(3, 2);
        uint16 min = verifyParams().minPool;
        vm.expectRevert(abi.encodeWithSelector(IVerificationEvents.Verification_PoolTooSmall.selector, 2, min));
        vm.prank(submitter);
        verification.postVerifiedJob(wasmJob(), replicated(3, 2), BOUNTY, replicatedDeadline(), spec());
    }

    /// Silence is the node's doing, on any engine: a seat that committed and did not
    /// reveal is slashed.
    function test_aSeatThatDoesNotReveal_isStillSlashed() public {
        (uint64 id, uint64[] memory seated) = seatedDockerJob(3, 2);
        commitAll(id, X);
        openReveals(id);
        reveal(id, 0, X);
        reveal(id, 1, X);
        pastReveals(id);
        decide(id);
        assertEq(node(seated[2]).stake, STAKE - verified[id].seatStake());
        assertReplay();
    }

    /// Every pattern of five seats on a Docker 5/3 job: a revealer is never slashed, a
    /// seat that committed and did not reveal always is, and paid + forfeited + refunded
    /// is n bounties, the forfeited to the treasury.
    function testFuzz_everyRevealPattern_slashesNoRevealer_andConserves(uint256 pattern) public {
        (uint64 id, uint64[] memory seated) = seatedDockerJob(5, 3);
        bytes32[4] memory digests = [bytes32(0), X, Y, Z];
        uint256[5] memory acts; // 0 nothing, 1 commit only, 2..4 reveal X, Y, Z
        for (uint256 i; i < 5; ++i) {
            acts[i] = (pattern >> (8 * i)) % 5;
            if (acts[i] != 0) commit(id, i, acts[i] >= 2 ? digests[acts[i] - 1] : X);
        }
        vm.warp(verified[id].commitEnd() + 1);
        for (uint256 i; i < 5; ++i) {
            if (acts[i] >= 2) reveal(id, i, digests[acts[i] - 1]);
        }
        pastReveals(id);
        uint256 credits = market.creditOf(submitter);
        uint256 treasury = market.treasuryBalance();
        uint256 slashes;
        decide(id);
        uint256 paid;
        for (uint256 i; i < 5; ++i) {
            if (node(seated[i]).earnings != 0) ++paid;
            bool slashed = node(seated[i]).stake < STAKE;
            if (acts[i] >= 2) assertFalse(slashed, "a revealer is never slashed");
            if (acts[i] == 1) assertTrue(slashed, "committed and did not reveal");
            if (slashed) slashes += STAKE - node(seated[i]).stake;
        }
        uint256 refunded = market.creditOf(submitter) - credits;
        uint256 forfeited = market.treasuryBalance() - treasury - slashes;
        assertEq(paid * BOUNTY + forfeited + refunded, 5 * uint256(BOUNTY), "n bounties");
        assertReplay();
    }
}
