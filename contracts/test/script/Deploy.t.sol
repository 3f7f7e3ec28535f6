// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Test} from "forge-std/Test.sol";
import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";
import {TimelockController} from "@openzeppelin/contracts/governance/TimelockController.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {Deploy} from "../../script/Deploy.s.sol";
import {JobMarket} from "../../src/JobMarket.sol";
import {GantryTestToken} from "../../src/dev/GantryTestToken.sol";
import {JobPolicy, JobRequirements, MarketParams} from "../../src/types/Types.sol";

/// The production deployment script, run in the EVM as `forge script` runs it, and the
/// timelock it puts over the admin.
contract DeployScriptTest is Test {
    uint256 internal constant DELAY = 2 days;

    Deploy internal script;
    GantryTestToken internal token;
    Deploy.Deployed internal d;
    address internal admin = makeAddr("admin");

    function params(uint16 feeBps) internal returns (MarketParams memory) {
        return MarketParams({
            treasury: makeAddr("treasury"),
            challengeWindow: 3600,
            protocolFeeBps: feeBps,
            maxAttempts: 3,
            disputeBond: 10e6,
            disputePeriod: 3 days,
            slashBps: 1000,
            minStake: 100e6,
            heartbeatTimeout: 60,
            unbondingPeriod: 10 days
        });
    }

    function setUp() public {
        script = new Deploy();
        token = new GantryTestToken();
        d = script.run(
            Deploy.Config({
                token: IERC20(address(token)),
                admin: admin,
                timelockDelay: DELAY,
                matcher: makeAddr("matcher"),
                arbiter: makeAddr("arbiter"),
                pauser: makeAddr("pauser"),
                market: params(250)
            })
        );
    }

    function test_Run_HandsEveryRoleToItsHolder_AndAdminToTheTimelockAlone() public {
        JobMarket market = d.market;
        assertEq(address(market.token()), address(token));
        assertEq(market.nodeRegistry(), address(d.registry));
        assertTrue(market.hasRole(market.MATCHER_ROLE(), makeAddr("matcher")));
        assertTrue(market.hasRole(market.ARBITER_ROLE(), makeAddr("arbiter")));
        assertTrue(market.hasRole(market.PAUSER_ROLE(), makeAddr("pauser")));
        assertTrue(market.hasRole(market.DEFAULT_ADMIN_ROLE(), address(d.timelock)));
        assertFalse(market.hasRole(market.DEFAULT_ADMIN_ROLE(), admin), "the admin acts only through the timelock");
        assertFalse(market.hasRole(market.DEFAULT_ADMIN_ROLE(), address(script)), "the deployer keeps nothing");
        assertEq(d.timelock.getMinDelay(), DELAY);
    }

    /// The admin's key alone changes nothing at once: a parameter change or a role grant
    /// goes through the timelock and waits out its delay; a job posted before keeps its
    /// policy.
    function test_AParameterChange_WaitsOutTheDelay_AndPostedJobsKeepTheirPolicy() public {
        JobMarket market = d.market;
        bytes32 adminRole = market.DEFAULT_ADMIN_ROLE();
        MarketParams memory changed = params(900);
        vm.prank(admin);
        vm.expectRevert(
            abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, admin, adminRole)
        );
        market.setParams(changed);

        token.mint(address(this), 1_000e6);
        token.approve(address(market), type(uint256).max);
        market.postJob(_requirements(), 100e6, uint40(block.timestamp + 1 days), "{}");

        bytes memory call = abi.encodeCall(JobMarket.setParams, (params(900)));
        vm.prank(admin);
        d.timelock.schedule(address(market), 0, call, bytes32(0), bytes32(0), DELAY);
        vm.warp(block.timestamp + DELAY - 1);
        vm.prank(admin);
        vm.expectRevert();
        d.timelock.execute(address(market), 0, call, bytes32(0), bytes32(0));
        vm.warp(block.timestamp + 1);
        vm.prank(admin);
        d.timelock.execute(address(market), 0, call, bytes32(0), bytes32(0));

        assertEq(market.policyVersion(), 2);
        JobPolicy memory old = market.policy(1);
        assertEq(old.feeBps, 250, "the job posted before keeps version 1's fee");
        assertEq(market.policy(2).feeBps, 900);
    }

    function test_ARoleGrant_GoesThroughTheTimelockToo() public {
        JobMarket market = d.market;
        address rogue = makeAddr("rogue");
        bytes32 matcherRole = market.MATCHER_ROLE();
        vm.prank(admin);
        vm.expectRevert();
        market.grantRole(matcherRole, rogue);
        bytes memory call = abi.encodeCall(IAccessControl.grantRole, (matcherRole, rogue));
        vm.prank(admin);
        d.timelock.schedule(address(market), 0, call, bytes32(0), bytes32(0), DELAY);
        vm.warp(block.timestamp + DELAY);
        vm.prank(admin);
        d.timelock.execute(address(market), 0, call, bytes32(0), bytes32(0));
        assertTrue(market.hasRole(matcherRole, rogue));
    }

    function _requirements() internal pure returns (JobRequirements memory) {
        return JobRequirements({
            gpuModel: bytes32(0),
            minGpuCount: 0,
            minVramMiB: 0,
            minCpuCores: 1,
            minRamMiB: 0,
            maxPricePerGpuHour: 1e6,
            maxRuntime: 3600,
            priority: 5
        });
    }
}
