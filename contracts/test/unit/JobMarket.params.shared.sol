// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {MarketParams} from "../../src/types/Types.sol";

/// @notice What the constructor and `setParams` share: the same rules of valid market
/// parameters. Each entry point's test contract says how it applies parameters.
abstract contract JobMarket_Params_Shared is JobMarketBase {
    /// The rows of the parameter table the market refuses, each breaking one rule.
    enum Broken {
        NoFeeRecipient,
        FeeAboveMax,
        NoAttempts,
        NoChallengeWindow
    }

    /// Valid parameters that each row breaks in one field.
    function validParams() internal virtual returns (MarketParams memory);

    /// Applies `p` through the entry point under test.
    function applyParams(MarketParams memory p) internal virtual;

    /// Expects the row's parameters to be refused, leaving the fixture's market as deployed.
    function expectRefused(Broken row) internal {
        MarketParams memory p = validParams();
        if (row == Broken.NoFeeRecipient) p.feeRecipient = address(0);
        if (row == Broken.FeeAboveMax) p.protocolFeeBps = 1_001;
        if (row == Broken.NoAttempts) p.maxAttempts = 0;
        if (row == Broken.NoChallengeWindow) p.challengeWindow = 0;
        vm.expectRevert(IJobMarket.JobMarket_InvalidParams.selector);
        applyParams(p);
        assertMarketParams(market.params(), marketParams());
    }

    function test_RevertWhen_FeeRecipientIsZeroAddress() external {
        expectRefused(Broken.NoFeeRecipient);
    }

    function test_RevertWhen_FeeAboveMax() external {
        expectRefused(Broken.FeeAboveMax);
    }

    function test_RevertWhen_MaxAttemptsIsZero() external {
        expectRefused(Broken.NoAttempts);
    }

    function test_RevertWhen_ChallengeWindowIsZero() external {
        expectRefused(Broken.NoChallengeWindow);
    }
}
