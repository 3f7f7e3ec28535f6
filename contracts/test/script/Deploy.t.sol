// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "forge-std/Vm.sol";
import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";
import {TimelockController} from "@openzeppelin/contracts/governance/TimelockController.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

import {Base} from "../Base.t.sol";
import {JobView} from "../JobView.sol";
import {Deploy} from "../../script/Deploy.s.sol";
import {JobMarket} from "../../src/JobMarket.sol";
import {GantryTestToken} from "../../src/dev/GantryTestToken.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {CompletionKind, JobState, JobTerms, MarketParams} from "../../src/types/Types.sol";

/// The production deployment script, run in the EVM as `forge script` runs it, and the
/// timelock it puts over the admin. The market it deploys is the fixture's (`Base`'s roles
/// and parameters), so a job's whole life runs on it, folded from its events.
contract DeployScriptTest is Base {
    using JobView for JobTerms;
    using JobView for JobState;

    uint256 internal constant DELAY = 2 days;
    /// `TimelockController`'s state bitmap of a Ready operation (`1 << OperationState.Ready`).
    bytes32 internal constant READY = bytes32(uint256(1) << 2);

    Deploy internal script;
    Deploy.Deployed internal d;
    TimelockController internal timelock;
    /// The account that broadcast the deployment (the market's first admin).
    address internal deployer;

    /// One role grant seen in the deployment's events, and whether it still stands.
    struct Grant {
        address target;
        bytes32 role;
        address account;
        bool held;
    }

    Grant[] internal grants;

    function config() internal view returns (Deploy.Config memory) {
        return Deploy.Config({
            token: IERC20(address(token)),
            admin: admin,
            timelockDelay: DELAY,
            matcher: matcher,
            arbiter: arbiter,
            pauser: pauser,
            market: marketParams()
        });
    }

    function setUp() public override {
        vm.warp(1_750_000_000);
        vm.recordLogs();
        token = new GantryTestToken();
        script = new Deploy();
        d = script.deploy(config());
        market = d.market;
        nodes = INodeRegistry(address(market));
        timelock = d.timelock;

        Vm.Log[] memory logs = vm.getRecordedLogs();
        for (uint256 i; i < logs.length; ++i) {
            if (logs[i].emitter == address(market)) apply_(logs[i]);
            foldRole(logs[i]);
        }
        deployer = firstAdmin();

        fund(operator, 10_000e6);
        fund(submitter, 10_000e6);
        accounts.push(submitter);
        accounts.push(operator);
        sync();
    }

    // ---------------------------------------------------------------- roles, from the events

    function foldRole(Vm.Log memory log) internal {
        bytes32 t = log.topics[0];
        if (t != IAccessControl.RoleGranted.selector && t != IAccessControl.RoleRevoked.selector) return;
        bytes32 role = log.topics[1];
        address account = address(uint160(uint256(log.topics[2])));
        bool granted = t == IAccessControl.RoleGranted.selector;
        for (uint256 i; i < grants.length; ++i) {
            Grant storage g = grants[i];
            if (g.target == log.emitter && g.role == role && g.account == account) {
                g.held = granted;
                return;
            }
        }
        grants.push(Grant(log.emitter, role, account, granted));
    }

    /// Who holds `role` on `target`, as the events tell it.
    function holders(address target, bytes32 role) internal view returns (address[] memory list) {
        list = new address[](grants.length);
        uint256 n;
        for (uint256 i; i < grants.length; ++i) {
            if (grants[i].target == target && grants[i].role == role && grants[i].held) list[n++] = grants[i].account;
        }
        assembly ("memory-safe") {
            mstore(list, n)
        }
    }

    function firstAdmin() internal view returns (address) {
        for (uint256 i; i < grants.length; ++i) {
            if (grants[i].target == address(market) && grants[i].role == bytes32(0)) return grants[i].account;
        }
        revert("no admin granted");
    }

    function assertOnlyHolder(address target, bytes32 role, address holder) internal view {
        address[] memory list = holders(target, role);
        assertEq(list.length, 1, "one holder");
        assertEq(list[0], holder);
        assertTrue(IAccessControl(target).hasRole(role, holder));
    }

    function unauthorized(address account, bytes32 role) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, account, role);
    }

    // ---------------------------------------------------------------- timelock steps

    function schedule(bytes memory data) internal returns (bytes32 id) {
        vm.prank(admin);
        timelock.schedule(address(market), 0, data, bytes32(0), bytes32(0), DELAY);
        id = timelock.hashOperation(address(market), 0, data, bytes32(0), bytes32(0));
    }

    function execute(bytes memory data) internal {
        vm.prank(admin);
        timelock.execute(address(market), 0, data, bytes32(0), bytes32(0));
        sync();
    }

    function newFee() internal view returns (MarketParams memory p) {
        p = marketParams();
        p.protocolFeeBps = 900;
    }

    // ---------------------------------------------------------------- the deployment

    function test_Deploy_WiresTheMarket() external view {
        assertEq(address(market.token()), address(token));
        assertEq(market.nodeRegistry(), address(d.registry));
        assertEq(address(d.registry.token()), address(token));
        assertEq(abi.encode(market.params()), abi.encode(marketParams()));
        assertEq(market.policyVersion(), 1);
        assertEq(nodes.nodeCount(), 0, "the node calls are served at the market");
        assertEq(timelock.getMinDelay(), DELAY);
    }

    function test_Deploy_HandsEachRoleToItsHolderAlone() external view {
        assertOnlyHolder(address(market), market.MATCHER_ROLE(), matcher);
        assertOnlyHolder(address(market), market.ARBITER_ROLE(), arbiter);
        assertOnlyHolder(address(market), market.PAUSER_ROLE(), pauser);
        assertOnlyHolder(address(market), market.DEFAULT_ADMIN_ROLE(), address(timelock));
        // The timelock administers itself; the admin proposes, cancels and executes.
        assertOnlyHolder(address(timelock), timelock.DEFAULT_ADMIN_ROLE(), address(timelock));
        assertOnlyHolder(address(timelock), timelock.PROPOSER_ROLE(), admin);
        assertOnlyHolder(address(timelock), timelock.CANCELLER_ROLE(), admin);
        assertOnlyHolder(address(timelock), timelock.EXECUTOR_ROLE(), admin);
        assertEq(grants.length, 9, "no other grant: 5 on the market (the deployer's included), 4 on the timelock");
    }

    function test_Deploy_LeavesTheDeployerNothing() external view {
        assertTrue(deployer != address(0) && deployer != admin);
        // Without --private-key, `forge script` broadcasts as Foundry's default sender.
        assertEq(deployer, DEFAULT_SENDER);
        address[3] memory candidates = [deployer, address(script), address(this)];
        bytes32[4] memory marketRoles =
            [market.DEFAULT_ADMIN_ROLE(), market.MATCHER_ROLE(), market.ARBITER_ROLE(), market.PAUSER_ROLE()];
        bytes32[4] memory timelockRoles = [
            timelock.DEFAULT_ADMIN_ROLE(), timelock.PROPOSER_ROLE(), timelock.CANCELLER_ROLE(), timelock.EXECUTOR_ROLE()
        ];
        for (uint256 i; i < candidates.length; ++i) {
            for (uint256 r; r < 4; ++r) {
                assertFalse(market.hasRole(marketRoles[r], candidates[i]), "a market role kept");
                assertFalse(timelock.hasRole(timelockRoles[r], candidates[i]), "a timelock role kept");
            }
        }
    }

    function test_Deploy_RevertWhen_TheConfigWouldLeaveTheMarketUngoverned() external {
        Deploy.Config memory c = config();
        c.admin = address(0);
        vm.expectRevert(bytes("Deploy: GANTRY_ADMIN is zero"));
        script.deploy(c);

        c = config();
        c.timelockDelay = 0;
        vm.expectRevert(bytes("Deploy: GANTRY_TIMELOCK_DELAY is zero"));
        script.deploy(c);

        c = config();
        c.matcher = address(0);
        vm.expectRevert(bytes("Deploy: GANTRY_MATCHER is zero"));
        script.deploy(c);
    }

    function test_Deploy_RevertWhen_TheUnbondingPeriodIsTooShort() external {
        Deploy.Config memory c = config();
        c.market.unbondingPeriod = 10 days - 1;
        vm.expectRevert(bytes("Deploy: GANTRY_UNBONDING_PERIOD is below 10 days (864000)"));
        script.deploy(c);
        c.market.unbondingPeriod = 10 days;
        Deploy.Deployed memory other = script.deploy(c);
        assertEq(other.market.params().unbondingPeriod, 10 days);
    }

    function test_Deploy_RevertWhen_TheMarketRefusesTheParameters() external {
        Deploy.Config memory c = config();
        c.market.protocolFeeBps = 1_001;
        vm.expectRevert(IJobMarket.JobMarket_InvalidParams.selector);
        script.deploy(c);
    }

    function test_DeploymentJson_HasTheDeploymentFilesKeys() external view {
        string memory json = script.deploymentJson(config(), d, 7);
        assertEq(vm.parseJsonUint(json, ".chainId"), block.chainid);
        assertEq(vm.parseJsonAddress(json, ".token"), address(token));
        assertEq(vm.parseJsonAddress(json, ".registry"), address(market), "node calls are served at the market");
        assertEq(vm.parseJsonAddress(json, ".market"), address(market));
        assertEq(vm.parseJsonAddress(json, ".timelock"), address(timelock));
        assertEq(vm.parseJsonUint(json, ".startBlock"), 7);
        assertEq(vm.parseJsonKeys(json, "$").length, 6);
    }

    // ---------------------------------------------------------------- the timelock

    /// The admin's key alone changes nothing at once, nor does the deployer's.
    function test_Timelock_TheAdminAloneChangesNothingAtOnce() external {
        MarketParams memory p = newFee();
        bytes32 adminRole = market.DEFAULT_ADMIN_ROLE();
        bytes32 matcherRole = market.MATCHER_ROLE();
        vm.prank(admin);
        vm.expectRevert(unauthorized(admin, adminRole));
        market.setParams(p);
        vm.prank(admin);
        vm.expectRevert(unauthorized(admin, adminRole));
        market.grantRole(matcherRole, stranger);
        vm.prank(deployer);
        vm.expectRevert(unauthorized(deployer, adminRole));
        market.setParams(p);
        // Nor may the admin shorten the delay but through the timelock itself.
        vm.prank(admin);
        vm.expectRevert(abi.encodeWithSelector(TimelockController.TimelockUnauthorizedCaller.selector, admin));
        timelock.updateDelay(0);
        assertEq(market.policyVersion(), 1);
    }

    function test_Timelock_AParameterChange_WaitsOutTheDelay() external {
        bytes memory data = abi.encodeCall(JobMarket.setParams, (newFee()));
        vm.prank(admin);
        vm.expectRevert(abi.encodeWithSelector(TimelockController.TimelockInsufficientDelay.selector, DELAY - 1, DELAY));
        timelock.schedule(address(market), 0, data, bytes32(0), bytes32(0), DELAY - 1);
        bytes32 proposerRole = timelock.PROPOSER_ROLE();
        bytes32 executorRole = timelock.EXECUTOR_ROLE();
        vm.prank(stranger);
        vm.expectRevert(unauthorized(stranger, proposerRole));
        timelock.schedule(address(market), 0, data, bytes32(0), bytes32(0), DELAY);

        bytes32 id = schedule(data);
        vm.warp(block.timestamp + DELAY - 1);
        vm.prank(admin);
        vm.expectRevert(abi.encodeWithSelector(TimelockController.TimelockUnexpectedOperationState.selector, id, READY));
        timelock.execute(address(market), 0, data, bytes32(0), bytes32(0));
        assertEq(market.policyVersion(), 1);

        vm.warp(block.timestamp + 1);
        vm.prank(stranger);
        vm.expectRevert(unauthorized(stranger, executorRole));
        timelock.execute(address(market), 0, data, bytes32(0), bytes32(0));
        vm.expectEmit(address(market));
        emit IJobMarket.MarketParamsUpdated(newFee(), 2);
        execute(data);
        assertEq(market.policyVersion(), 2);
        assertEq(market.params().protocolFeeBps, 900);
        assertTrue(timelock.isOperationDone(id));
    }

    function test_Timelock_ARoleGrant_WaitsOutTheDelay() external {
        address newMatcher = makeAddr("newMatcher");
        bytes32 matcherRole = market.MATCHER_ROLE();
        bytes memory data = abi.encodeCall(IAccessControl.grantRole, (matcherRole, newMatcher));
        bytes32 id = schedule(data);
        vm.warp(block.timestamp + DELAY - 1);
        vm.prank(admin);
        vm.expectRevert(abi.encodeWithSelector(TimelockController.TimelockUnexpectedOperationState.selector, id, READY));
        timelock.execute(address(market), 0, data, bytes32(0), bytes32(0));
        assertFalse(market.hasRole(matcherRole, newMatcher));

        vm.warp(block.timestamp + 1);
        execute(data);
        assertTrue(market.hasRole(matcherRole, newMatcher));
        // The new matcher assigns.
        uint64 nodeId = registerNode();
        uint64 jobId = postJob();
        vm.prank(newMatcher);
        market.assign(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
        sync();
        assertEq(jobs[jobId].state.nodeId(), nodeId);
    }

    function test_Timelock_TheAdminCancelsAScheduledChange() external {
        bytes memory data = abi.encodeCall(JobMarket.setParams, (newFee()));
        bytes32 id = schedule(data);
        vm.prank(admin);
        timelock.cancel(id);
        vm.warp(block.timestamp + DELAY);
        vm.prank(admin);
        vm.expectRevert(abi.encodeWithSelector(TimelockController.TimelockUnexpectedOperationState.selector, id, READY));
        timelock.execute(address(market), 0, data, bytes32(0), bytes32(0));
        assertEq(market.policyVersion(), 1);
    }

    /// A job posted before a fee change is paid under its own policy; one posted after, under
    /// the new one.
    function test_Timelock_PostedJobsKeepTheirPolicy_NewOnesGetTheNewOne() external {
        uint64 nodeId = registerNode();
        // Its deadline leaves room for the delay: it is assigned after the change.
        uint64 before = postJob(h100Job(), BOUNTY, uint40(block.timestamp + 7 days));
        bytes memory data = abi.encodeCall(JobMarket.setParams, (newFee()));
        schedule(data);
        vm.warp(block.timestamp + DELAY);
        execute(data);
        uint64 after_ = postJob();
        assertEq(jobs[before].terms.policy(), 1);
        assertEq(jobs[after_].terms.policy(), 2);

        uint96 oldFee = (BOUNTY * FEE_BPS) / 10_000;
        uint96 newFee_ = (BOUNTY * 900) / 10_000;
        assign(before, nodeId);
        submit(before);
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.JobCompleted(before, nodeId, BOUNTY - oldFee, oldFee, CompletionKind.Finalized);
        finalize(before);
        assign(after_, nodeId);
        submit(after_);
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.JobCompleted(after_, nodeId, BOUNTY - newFee_, newFee_, CompletionKind.Finalized);
        finalize(after_);

        assertEq(nodes.getNode(nodeId).feesOwed, oldFee + newFee_);
        assertEq(nodes.getNode(nodeId).earnings, 2 * BOUNTY - oldFee - newFee_);
        assertReplay();
    }

    // ---------------------------------------------------------------- the environment

    /// The only test that touches the environment (tests run in parallel, the environment
    /// is the process's).
    function test_ConfigFromEnv_ReadsEverySetting_AndRevertWhen_OneIsMissing() external {
        vm.setEnv("GANTRY_TOKEN", vm.toString(address(token)));
        vm.setEnv("GANTRY_ADMIN", vm.toString(admin));
        vm.setEnv("GANTRY_TIMELOCK_DELAY", vm.toString(DELAY));
        vm.setEnv("GANTRY_MATCHER", vm.toString(matcher));
        vm.setEnv("GANTRY_ARBITER", vm.toString(arbiter));
        vm.setEnv("GANTRY_PAUSER", vm.toString(pauser));
        vm.setEnv("GANTRY_TREASURY", vm.toString(treasury));
        vm.setEnv("GANTRY_CHALLENGE_WINDOW", vm.toString(CHALLENGE_WINDOW));
        vm.setEnv("GANTRY_PROTOCOL_FEE_BPS", vm.toString(FEE_BPS));
        vm.setEnv("GANTRY_MAX_ATTEMPTS", vm.toString(MAX_ATTEMPTS));
        vm.setEnv("GANTRY_DISPUTE_BOND", vm.toString(DISPUTE_BOND));
        vm.setEnv("GANTRY_DISPUTE_PERIOD", vm.toString(DISPUTE_PERIOD));
        vm.setEnv("GANTRY_SLASH_BPS", vm.toString(SLASH_BPS));
        vm.setEnv("GANTRY_MIN_STAKE", vm.toString(MIN_STAKE));
        vm.setEnv("GANTRY_HEARTBEAT_TIMEOUT", vm.toString(HEARTBEAT_TIMEOUT));
        vm.setEnv("GANTRY_UNBONDING_PERIOD", vm.toString(UNBONDING));
        assertEq(abi.encode(script.configFromEnv()), abi.encode(config()));

        // `run()` deploys from the environment.
        Deploy.Deployed memory fromEnv = script.run();
        assertEq(abi.encode(fromEnv.market.params()), abi.encode(marketParams()));
        assertEq(fromEnv.timelock.getMinDelay(), DELAY);
        assertTrue(fromEnv.market.hasRole(bytes32(0), address(fromEnv.timelock)));

        vm.setEnv("GANTRY_DISPUTE_PERIOD", "");
        vm.expectRevert();
        script.configFromEnv();
        vm.setEnv("GANTRY_TOKEN", "");
        vm.expectRevert();
        script.configFromEnv();
    }
}
