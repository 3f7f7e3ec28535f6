// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {VerificationBase} from "./VerificationBase.sol";
import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {IReferees} from "./interfaces/IVerification.sol";
import {JobCodec} from "./types/JobCodec.sol";
import {JobStatus, JobTerms, VERIFY_REFEREED, VerifiedState} from "./types/Types.sol";

/// @title Referees
/// @notice The refereed tier of verified jobs (`IReferees`, design 18, §2.6): runs only
/// inside the JobMarket, which forwards its calls with `delegatecall`.
contract Referees is IReferees, VerificationBase {
    using JobCodec for JobTerms;
    using JobCodec for VerifiedState;

    constructor(IERC20 token_) VerificationBase(token_) {}

    /// @inheritdoc IReferees
    function cancelVerified(uint64 jobId, JobTerms calldata terms, VerifiedState calldata state)
        external
        onlyDelegated
    {
        _checkState(jobId, terms, state);
        if (msg.sender != terms.submitter()) revert IJobMarket.JobMarket_NotSubmitter(jobId, msg.sender);
        if (terms.tier() != VERIFY_REFEREED || state.status() != JobStatus.Open) {
            revert Verification_NotCancellable(jobId);
        }
        uint96 refund = terms.bounty();
        delete _jobs[jobId];
        _credits[msg.sender] += refund;
        emit IJobMarket.JobCancelled(jobId, refund);
    }

}
