// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Script} from "forge-std/Script.sol";
import {console2} from "forge-std/console2.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {JobMarket} from "../src/JobMarket.sol";
import {NodeRegistry} from "../src/NodeRegistry.sol";
import {INodeRegistry} from "../src/interfaces/INodeRegistry.sol";
import {MarketParams, RegistryParams} from "../src/types/Types.sol";

/// @notice The production deployment: a NodeRegistry and a JobMarket on an existing payment
/// token (ERC-20 with EIP-2612 permits), wired together, with each role granted to the
/// account that holds it. The deployer keeps nothing: admin is `GANTRY_ADMIN` (a multisig or
/// timelock in production).
///
/// forge script script/Deploy.s.sol --rpc-url $RPC --broadcast --private-key $KEY
///
/// Environment (all required; amounts in the token's base units, times in seconds):
///   GANTRY_TOKEN, GANTRY_ADMIN, GANTRY_MATCHER, GANTRY_ARBITER, GANTRY_PAUSER,
///   GANTRY_FEE_RECIPIENT, GANTRY_MIN_STAKE, GANTRY_HEARTBEAT_TIMEOUT, GANTRY_UNBONDING_PERIOD,
///   GANTRY_SLASH_BPS, GANTRY_CHALLENGE_WINDOW, GANTRY_PROTOCOL_FEE_BPS, GANTRY_MAX_ATTEMPTS,
///   GANTRY_DISPUTE_BOND.
/// It prints the deployment file (`gantry_protocol::deployment::Deployment`) as JSON.
contract Deploy is Script {
    /// What one deployment is given.
    struct Config {
        IERC20 token;
        address admin;
        address matcher;
        address arbiter;
        address pauser;
        RegistryParams registry;
        MarketParams market;
    }

    function run() external returns (NodeRegistry registry, JobMarket market) {
        return run(configFromEnv());
    }

    /// Deploys with `config`, broadcasting as the script's sender.
    function run(Config memory config) public returns (NodeRegistry registry, JobMarket market) {
        uint256 startBlock = block.number;
        vm.startBroadcast();
        (, address deployer,) = vm.readCallers();
        (registry, market) = deploy(config, deployer);
        vm.stopBroadcast();
        _print(config, registry, market, startBlock);
    }

    /// Reads the deployment's settings from the environment.
    function configFromEnv() public view returns (Config memory config) {
        config.token = IERC20(vm.envAddress("GANTRY_TOKEN"));
        config.admin = vm.envAddress("GANTRY_ADMIN");
        config.matcher = vm.envAddress("GANTRY_MATCHER");
        config.arbiter = vm.envAddress("GANTRY_ARBITER");
        config.pauser = vm.envAddress("GANTRY_PAUSER");
        config.registry = RegistryParams({
            minStake: uint96(vm.envUint("GANTRY_MIN_STAKE")),
            heartbeatTimeout: uint32(vm.envUint("GANTRY_HEARTBEAT_TIMEOUT")),
            unbondingPeriod: uint32(vm.envUint("GANTRY_UNBONDING_PERIOD")),
            slashBps: uint16(vm.envUint("GANTRY_SLASH_BPS"))
        });
        config.market = MarketParams({
            feeRecipient: vm.envAddress("GANTRY_FEE_RECIPIENT"),
            challengeWindow: uint32(vm.envUint("GANTRY_CHALLENGE_WINDOW")),
            protocolFeeBps: uint16(vm.envUint("GANTRY_PROTOCOL_FEE_BPS")),
            maxAttempts: uint8(vm.envUint("GANTRY_MAX_ATTEMPTS")),
            disputeBond: uint96(vm.envUint("GANTRY_DISPUTE_BOND"))
        });
    }

    /// Deploys and wires both contracts. The deployer (the broadcaster, whose calls these
    /// are) is their admin only while it grants the roles, then hands admin to
    /// `config.admin` and renounces.
    function deploy(Config memory config, address deployer) internal returns (NodeRegistry registry, JobMarket market) {
        registry = new NodeRegistry(config.token, deployer, config.registry);
        market = new JobMarket(config.token, INodeRegistry(address(registry)), deployer, config.market);

        registry.grantRole(registry.MARKET_ROLE(), address(market));
        registry.grantRole(registry.PAUSER_ROLE(), config.pauser);
        market.grantRole(market.MATCHER_ROLE(), config.matcher);
        market.grantRole(market.ARBITER_ROLE(), config.arbiter);
        market.grantRole(market.PAUSER_ROLE(), config.pauser);
        if (config.admin != deployer) {
            registry.grantRole(registry.DEFAULT_ADMIN_ROLE(), config.admin);
            market.grantRole(market.DEFAULT_ADMIN_ROLE(), config.admin);
            registry.renounceRole(registry.DEFAULT_ADMIN_ROLE(), deployer);
            market.renounceRole(market.DEFAULT_ADMIN_ROLE(), deployer);
        }
    }

    /// The deployment file, on stdout.
    function _print(Config memory config, NodeRegistry registry, JobMarket market, uint256 startBlock) internal view {
        string memory json = string.concat(
            '{"chainId":',
            vm.toString(block.chainid),
            ',"token":"',
            vm.toString(address(config.token)),
            '","registry":"',
            vm.toString(address(registry)),
            '","market":"',
            vm.toString(address(market)),
            '","startBlock":',
            vm.toString(startBlock),
            "}"
        );
        console2.log(json);
    }
}
