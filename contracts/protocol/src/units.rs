//! How amounts and times read in messages: token base units as decimal tokens, unix
//! seconds as RFC 3339. Pure.

use std::time::{Duration, UNIX_EPOCH};

use alloy::primitives::U256;

/// Base units as whole tokens, without trailing zeros: 12500000 at 6 decimals is "12.5".
pub fn format_amount(amount: U256, decimals: u8) -> String {
    let scale = U256::from(10u8).pow(U256::from(decimals));
    let (whole, fraction) = amount.div_rem(scale);
    if fraction.is_zero() {
        return whole.to_string();
    }
    let fraction = format!("{fraction:0>width$}", width = usize::from(decimals));
    format!("{whole}.{}", fraction.trim_end_matches('0'))
}

/// A unix time as RFC 3339 (UTC, seconds).
pub fn format_time(unix_secs: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(unix_secs)).to_string()
}
