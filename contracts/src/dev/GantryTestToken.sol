// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Permit.sol";

/// @title GantryTestToken
/// @notice The dev network's payment and stake token: a USDC-like ERC-20 (6 decimals) with
/// EIP-2612 permit. Anyone may mint: it is for local networks and tests only.
contract GantryTestToken is ERC20, ERC20Permit {
    constructor() ERC20("Gantry Test USD", "gUSD") ERC20Permit("Gantry Test USD") {}

    function decimals() public pure override returns (uint8) {
        return 6;
    }

    /// @notice Mints `amount` to `to`. Test networks only.
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }
}
