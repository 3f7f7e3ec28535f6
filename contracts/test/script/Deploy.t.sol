// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Test} from "forge-std/Test.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {Deploy} from "../../script/Deploy.s.sol";
import {JobMarket} from "../../src/JobMarket.sol";
import {NodeRegistry} from "../../src/NodeRegistry.sol";
import {GantryTestToken} from "../../src/dev/GantryTestToken.sol";
import {MarketParams, RegistryParams} from "../../src/types/Types.sol";

/// The production deployment script, run in the EVM as `forge script` runs it.
contract DeployScriptTest is Test {
    Deploy internal script;
    GantryTestToken internal token;

    /// The holder of a role (`makeAddr` is deterministic: the same name, the same account).
    function role(string memory name) internal returns (address) {
        return makeAddr(name);
    }

    function setUp() public {
        script = new Deploy();
        token = new GantryTestToken();
    }

    function config() internal returns (Deploy.Config memory) {
        return Deploy.Config({
            token: IERC20(address(token)),
            admin: role("admin"),
            matcher: role("matcher"),
            arbiter: role("arbiter"),
            pauser: role("pauser"),
            registry: RegistryParams({
                minStake: 100_000_000, heartbeatTimeout: 60, unbondingPeriod: 300, slashBps: 1000
            }),
            market: MarketParams({
                feeRecipient: role("feeRecipient"),
                challengeWindow: 3600,
                protocolFeeBps: 250,
                maxAttempts: 3,
                disputeBond: 10_000_000
            })
        });
    }

    function test_Run_WiresBothContractsAndHandsEveryRoleToItsHolder() public {
        (NodeRegistry registry, JobMarket market) = script.run(config());

        assertEq(address(market.token()), address(token), "market token");
        assertEq(address(market.registry()), address(registry), "market registry");
        assertTrue(registry.hasRole(registry.MARKET_ROLE(), address(market)), "market may drive the registry");
        assertTrue(registry.hasRole(registry.PAUSER_ROLE(), role("pauser")), "registry pauser");
        assertTrue(registry.hasRole(registry.DEFAULT_ADMIN_ROLE(), role("admin")), "registry admin");
        assertTrue(market.hasRole(market.MATCHER_ROLE(), role("matcher")), "matcher");
        assertTrue(market.hasRole(market.ARBITER_ROLE(), role("arbiter")), "arbiter");
        assertTrue(market.hasRole(market.PAUSER_ROLE(), role("pauser")), "market pauser");
        assertTrue(market.hasRole(market.DEFAULT_ADMIN_ROLE(), role("admin")), "market admin");

        MarketParams memory params = market.params();
        assertEq(params.feeRecipient, role("feeRecipient"));
        assertEq(params.challengeWindow, 3600);
        assertEq(params.protocolFeeBps, 250);
        assertEq(params.maxAttempts, 3);
        assertEq(params.disputeBond, 10_000_000);
        RegistryParams memory registryParams = registry.params();
        assertEq(registryParams.minStake, 100_000_000);
        assertEq(registryParams.slashBps, 1000);
    }

    function test_Run_LeavesTheDeployerNoRole() public {
        (NodeRegistry registry, JobMarket market) = script.run(config());
        // Without --private-key, `forge script` broadcasts as Foundry's default sender.
        address[2] memory deployers = [address(script), DEFAULT_SENDER];
        for (uint256 i; i < deployers.length; i++) {
            assertFalse(registry.hasRole(registry.DEFAULT_ADMIN_ROLE(), deployers[i]), "registry admin kept");
            assertFalse(market.hasRole(market.DEFAULT_ADMIN_ROLE(), deployers[i]), "market admin kept");
            assertFalse(market.hasRole(market.MATCHER_ROLE(), deployers[i]), "matcher kept");
        }
    }

    /// The only test that touches the environment (tests run in parallel, the environment
    /// is the process's).
    function test_ConfigFromEnv_ReadsEverySetting_AndRevertWhen_OneIsMissing() public {
        vm.setEnv("GANTRY_TOKEN", vm.toString(address(token)));
        vm.setEnv("GANTRY_ADMIN", vm.toString(role("admin")));
        vm.setEnv("GANTRY_MATCHER", vm.toString(role("matcher")));
        vm.setEnv("GANTRY_ARBITER", vm.toString(role("arbiter")));
        vm.setEnv("GANTRY_PAUSER", vm.toString(role("pauser")));
        vm.setEnv("GANTRY_FEE_RECIPIENT", vm.toString(role("feeRecipient")));
        vm.setEnv("GANTRY_MIN_STAKE", "100000000");
        vm.setEnv("GANTRY_HEARTBEAT_TIMEOUT", "60");
        vm.setEnv("GANTRY_UNBONDING_PERIOD", "300");
        vm.setEnv("GANTRY_SLASH_BPS", "1000");
        vm.setEnv("GANTRY_CHALLENGE_WINDOW", "3600");
        vm.setEnv("GANTRY_PROTOCOL_FEE_BPS", "250");
        vm.setEnv("GANTRY_MAX_ATTEMPTS", "3");
        vm.setEnv("GANTRY_DISPUTE_BOND", "10000000");
        assertEq(abi.encode(script.configFromEnv()), abi.encode(config()));

        vm.setEnv("GANTRY_TOKEN", "");
        vm.expectRevert();
        script.configFromEnv();
    }
}
