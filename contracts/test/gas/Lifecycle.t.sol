// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Base} from "../Base.t.sol";
import {JobView} from "../JobView.sol";
import {IVerification} from "../../src/interfaces/IVerification.sol";
import {JobState, JobTerms, VERIFY_REPLICATED, VerifiedState, VerifyPolicy} from "../../src/types/Types.sol";

/// The `test_gas_*` figures of `.gas-snapshot` (`forge snapshot --check` in `make test`):
/// execution gas of one job's calls, the contracts cooled and the fold unmetered between
/// them. The figures users
/// pay (whole transactions on anvil, intrinsic gas and calldata included) are the
/// `lifecycle_gas` benchmark's; these catch a change of the contract's cost in review.
contract GasTest is Base {
    using JobView for JobState;

    /// Folds the logs, and cools the contracts: each call is a transaction of its own on a
    /// real chain, finding their accounts and storage cold.
    function _between() internal {
        vm.pauseGasMetering();
        sync();
        vm.cool(address(market));
        vm.cool(market.nodeRegistry());
        vm.cool(address(token));
        vm.resumeGasMetering();
    }

    function test_gas_fullLifecycle() public {
        vm.pauseGasMetering();
        uint64 nodeId = registerNode();
        vm.prank(submitter);
        market.deposit(1_000e6);
        sync();
        uint64 jobId = uint64(market.jobCount() + 1);
        vm.cool(address(market));
        vm.cool(address(token));
        vm.resumeGasMetering();

        vm.prank(submitter);
        market.postJob(h100Job(), BOUNTY, uint40(block.timestamp + 1 days), spec());
        _between();
        vm.prank(matcher);
        market.assign(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
        _between();
        vm.prank(agent);
        market.submitResult(jobId, jobs[jobId].state, keccak256("result"), "gantry://results/1");
        _between();
        vm.warp(jobs[jobId].state.until());
        market.finalize(jobId, jobs[jobId].state);
    }

    // ---------------------------------------------------------------- node calls

    /// A node call in a transaction of its own: the market, its extension and the token
    /// cold.
    function _cold() internal {
        vm.cool(address(market));
        vm.cool(market.nodeRegistry());
        vm.cool(address(token));
    }

    function test_gas_register() public {
        vm.pauseGasMetering();
        address nodeAgent = vm.addr(AGENT_KEY);
        bytes memory consent = signConsent(operator, AGENT_KEY, block.timestamp + 1 hours);
        _cold();
        vm.resumeGasMetering();
        vm.prank(operator);
        nodes.register(h100Node(), "ipfs://node", STAKE, nodeAgent, block.timestamp + 1 hours, consent);
    }

    function test_gas_heartbeat() public {
        vm.pauseGasMetering();
        uint64 nodeId = registerNode();
        vm.warp(block.timestamp + 30);
        _cold();
        vm.resumeGasMetering();
        vm.prank(agent);
        nodes.heartbeat(nodeId);
    }

    function test_gas_topUpStake() public {
        vm.pauseGasMetering();
        uint64 nodeId = registerNode();
        _cold();
        vm.resumeGasMetering();
        vm.prank(operator);
        nodes.topUpStake(nodeId, 1e6);
    }

    function test_gas_markInactive() public {
        vm.pauseGasMetering();
        uint64 nodeId = registerNode();
        _cold();
        vm.resumeGasMetering();
        vm.prank(agent);
        nodes.markInactive(nodeId);
    }

    function test_gas_beginExit() public {
        vm.pauseGasMetering();
        uint64 nodeId = registerNode();
        _cold();
        vm.resumeGasMetering();
        vm.prank(operator);
        nodes.beginExit(nodeId);
    }

    // ---------------------------------------------------------------- verified jobs

    /// A 3/2 replicated job's first draw from a pool of five: three seats filled, three
    /// seat stakes locked (its cost depends on the seed: this one's samples).
    function test_gas_draw3of5() public {
        vm.pauseGasMetering();
        enableVerification();
        uint64[] memory ids = new uint64[](5);
        for (uint256 i; i < 5; ++i) {
            address owner = makeAddr(string.concat("wasm operator ", vm.toString(i)));
            fund(owner, 10_000e6);
            ids[i] = registerNode(owner, 0xC0000 + i, cpuNode(), STAKE);
        }
        nodes.syncPool(ids);
        vm.prank(submitter);
        uint64 jobId = IVerification(address(market))
            .postVerifiedJob(
                wasmJob(),
                VerifyPolicy({tier: VERIFY_REPLICATED, size: 3, quorum: 2, revealWindow: 60}),
                BOUNTY,
                uint40(block.timestamp + 10 minutes + RUNTIME + 60 + 1 hours),
                spec()
            );
        sync();
        vm.roll(block.number + 2);
        vm.prevrandao(bytes32(uint256(1)));
        JobTerms memory terms = jobs[jobId].terms;
        VerifiedState memory state = verified[jobId];
        _cold();
        vm.cool(market.verification());
        vm.resumeGasMetering();
        IVerification(address(market)).draw(jobId, terms, state);
    }
}
