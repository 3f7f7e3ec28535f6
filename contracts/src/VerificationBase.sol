// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {MarketStorage} from "./MarketStorage.sol";
import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {IVerificationEvents} from "./interfaces/IVerification.sol";
import {JobTerms, VerifiedState} from "./types/Types.sol";

/// @title VerificationBase
/// @notice What the verified jobs' extensions share: `Verification` (posting, the draw,
/// seats, the replicated decision) and `Referees` (the refereed tier). Both run only
/// inside the JobMarket, which forwards their calls with `delegatecall`; their own
/// addresses hold nothing and refuse calls. Two contracts because one would not fit
/// the 24,576-byte limit (design 18, §5).
abstract contract VerificationBase is IVerificationEvents, MarketStorage {
    /// @dev A verified job's shortest max runtime: ten graces, so that a seat or a
    /// refereed provider always has the whole `REJECT_GRACE` to refuse a job it cannot run.
    uint32 internal constant MIN_VERIFIED_RUNTIME = 10 * REJECT_GRACE;

    address private immutable _self = address(this);

    /// @dev Only the market's delegatecall is served (see `NodeRegistry.onlyDelegated`).
    modifier onlyDelegated() {
        if (address(this) == _self) revert Verification_OnlyThroughMarket();
        _;
    }

    constructor(IERC20 token_) MarketStorage(token_) {}

    /// @dev `state` is the job's (its hash is the job's word) and `terms` its terms.
    function _checkState(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state) internal view {
        if (_jobs[jobId] != keccak256(abi.encode(state))) revert IJobMarket.JobMarket_StaleState(jobId);
        if (keccak256(abi.encode(terms)) != state.terms) revert IJobMarket.JobMarket_WrongTerms(jobId);
    }
}
