// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Script} from "forge-std/Script.sol";
import {console2} from "forge-std/console2.sol";
import {TimelockController} from "@openzeppelin/contracts/governance/TimelockController.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {JobMarket} from "../src/JobMarket.sol";
import {NodeRegistry} from "../src/NodeRegistry.sol";
import {Referees} from "../src/Referees.sol";
import {Verification} from "../src/Verification.sol";
import {MarketParams} from "../src/types/Types.sol";

/// @notice The production deployment: a TimelockController that is the market's only admin
/// (every parameter change and role grant waits out its delay), the NodeRegistry extension
/// and the JobMarket on an existing payment token (ERC-20 with EIP-2612 permits), each role
/// granted to the account that holds it. The deployer keeps nothing.
///
/// forge script script/Deploy.s.sol --rpc-url $RPC --broadcast --private-key $KEY
///
/// Environment (all required; amounts in the token's base units, times in seconds):
///   GANTRY_TOKEN, GANTRY_ADMIN (proposes, cancels and executes through the timelock),
///   GANTRY_TIMELOCK_DELAY (> 0), GANTRY_MATCHER, GANTRY_ARBITER, GANTRY_PAUSER,
///   GANTRY_TREASURY, GANTRY_CHALLENGE_WINDOW, GANTRY_PROTOCOL_FEE_BPS, GANTRY_MAX_ATTEMPTS,
///   GANTRY_DISPUTE_BOND, GANTRY_DISPUTE_PERIOD, GANTRY_SLASH_BPS, GANTRY_MIN_STAKE,
///   GANTRY_HEARTBEAT_TIMEOUT, GANTRY_UNBONDING_PERIOD (at least MAX_RUNTIME +
///   MAX_CHALLENGE_WINDOW, 10 days).
/// It prints the deployment file (`gantry_protocol::deployment::Deployment`) as JSON; its
/// `registry` is the market's address, where the node calls are served, and `timelock` is
/// the admin's.
contract Deploy is Script {
    /// What one deployment is given.
    struct Config {
        IERC20 token;
        address admin;
        uint256 timelockDelay;
        address matcher;
        address arbiter;
        address pauser;
        MarketParams market;
    }

    struct Deployed {
        TimelockController timelock;
        NodeRegistry registry;
        Verification verification;
        Referees referees;
        JobMarket market;
    }

    /// The entry point of `forge script` (the only `run`: forge refuses an overloaded one).
    function run() external returns (Deployed memory) {
        return deploy(configFromEnv());
    }

    /// Deploys with `config`, broadcasting as the script's sender.
    function deploy(Config memory config) public returns (Deployed memory deployed) {
        check(config);
        uint256 startBlock = block.number;
        vm.startBroadcast();
        (, address deployer,) = vm.readCallers();
        deployed = _deploy(config, deployer);
        vm.stopBroadcast();
        console2.log(deploymentJson(config, deployed, startBlock));
    }

    /// Reads the deployment's settings from the environment.
    function configFromEnv() public view returns (Config memory config) {
        config.token = IERC20(vm.envAddress("GANTRY_TOKEN"));
        config.admin = vm.envAddress("GANTRY_ADMIN");
        config.timelockDelay = vm.envUint("GANTRY_TIMELOCK_DELAY");
        config.matcher = vm.envAddress("GANTRY_MATCHER");
        config.arbiter = vm.envAddress("GANTRY_ARBITER");
        config.pauser = vm.envAddress("GANTRY_PAUSER");
        config.market = MarketParams({
            treasury: vm.envAddress("GANTRY_TREASURY"),
            challengeWindow: uint32(vm.envUint("GANTRY_CHALLENGE_WINDOW")),
            protocolFeeBps: uint16(vm.envUint("GANTRY_PROTOCOL_FEE_BPS")),
            maxAttempts: uint8(vm.envUint("GANTRY_MAX_ATTEMPTS")),
            disputeBond: uint96(vm.envUint("GANTRY_DISPUTE_BOND")),
            disputePeriod: uint32(vm.envUint("GANTRY_DISPUTE_PERIOD")),
            slashBps: uint16(vm.envUint("GANTRY_SLASH_BPS")),
            minStake: uint96(vm.envUint("GANTRY_MIN_STAKE")),
            heartbeatTimeout: uint32(vm.envUint("GANTRY_HEARTBEAT_TIMEOUT")),
            unbondingPeriod: uint32(vm.envUint("GANTRY_UNBONDING_PERIOD"))
        });
    }

    /// Refuses, before anything is sent, what would deploy a market nobody governs: a zero
    /// admin would leave the timelock without a proposer (and open its execution to
    /// anyone), a zero delay would make it no timelock. The market's own constructor checks
    /// the parameters (`JobMarket_InvalidParams`); the unbonding period is named here as
    /// the one rule an operator most easily misses.
    function check(Config memory config) public pure {
        require(address(config.token) != address(0), "Deploy: GANTRY_TOKEN is zero");
        require(config.admin != address(0), "Deploy: GANTRY_ADMIN is zero");
        require(config.timelockDelay != 0, "Deploy: GANTRY_TIMELOCK_DELAY is zero");
        require(config.matcher != address(0), "Deploy: GANTRY_MATCHER is zero");
        require(config.arbiter != address(0), "Deploy: GANTRY_ARBITER is zero");
        require(config.pauser != address(0), "Deploy: GANTRY_PAUSER is zero");
        require(config.market.unbondingPeriod >= 10 days, "Deploy: GANTRY_UNBONDING_PERIOD is below 10 days (864000)");
    }

    /// Deploys and wires everything. The deployer (the broadcaster) is the market's admin
    /// only while it grants the roles; then the timelock is, alone.
    function _deploy(Config memory config, address deployer) internal returns (Deployed memory d) {
        address[] memory admins = new address[](1);
        admins[0] = config.admin;
        // The admin proposes (and so cancels) and executes; the timelock administers itself.
        d.timelock = new TimelockController(config.timelockDelay, admins, admins, address(0));
        d.registry = new NodeRegistry(config.token);
        d.verification = new Verification(config.token);
        d.referees = new Referees(config.token);
        d.market = new JobMarket(config.token, deployer, config.market, d.registry, d.verification, d.referees);
        d.market.grantRole(d.market.MATCHER_ROLE(), config.matcher);
        d.market.grantRole(d.market.ARBITER_ROLE(), config.arbiter);
        d.market.grantRole(d.market.PAUSER_ROLE(), config.pauser);
        d.market.grantRole(d.market.DEFAULT_ADMIN_ROLE(), address(d.timelock));
        d.market.renounceRole(d.market.DEFAULT_ADMIN_ROLE(), deployer);
    }

    /// The deployment file: the keys of `gantry_protocol::deployment::Deployment`, plus the
    /// timelock's address.
    function deploymentJson(Config memory config, Deployed memory d, uint256 startBlock)
        public
        view
        returns (string memory)
    {
        return string.concat(
            '{"chainId":',
            vm.toString(block.chainid),
            ',"token":"',
            vm.toString(address(config.token)),
            '","registry":"',
            vm.toString(address(d.market)),
            '","market":"',
            vm.toString(address(d.market)),
            '","timelock":"',
            vm.toString(address(d.timelock)),
            '","startBlock":',
            vm.toString(startBlock),
            "}"
        );
    }
}
