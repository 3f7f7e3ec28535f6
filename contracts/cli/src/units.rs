//! Values as people write them, to what the contracts take, and back: token amounts
//! ("12.5" → base units, exactly), sizes ("40GiB" → MiB), durations ("4h" → seconds),
//! deadlines (a duration from now or an RFC 3339 time) and GPU model ids. Pure.

use std::time::{Duration, UNIX_EPOCH};

pub use gantry_protocol::units::{format_amount, format_time};

use alloy::primitives::{B256, U256};

/// `text` in whole token units with up to `decimals` fractional digits ("12.5", "0.000001",
/// "100"), as base units. Exact: a digit beyond the token's precision is an error, not
/// rounded away.
pub fn parse_amount(text: &str, decimals: u8) -> Result<U256, String> {
    let text = text.trim();
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return Err(format!(
            "`{text}` is not an amount (write it like 12.5, in whole tokens)"
        ));
    }
    if fraction.len() > usize::from(decimals) {
        return Err(format!(
            "`{text}` has more than the token's {decimals} decimals"
        ));
    }
    let scale = U256::from(10u8).pow(U256::from(decimals));
    let parse = |s: &str| {
        if s.is_empty() {
            Ok(U256::ZERO)
        } else {
            U256::from_str_radix(s, 10).map_err(|_| format!("`{text}` is too large"))
        }
    };
    let padded = format!("{fraction:0<width$}", width = usize::from(decimals));
    parse(whole)?
        .checked_mul(scale)
        .and_then(|w| w.checked_add(parse(&padded).ok()?))
        .ok_or_else(|| format!("`{text}` is too large"))
}

/// A size ("40GiB", "512MiB", "1.5TiB", "80GB") in MiB, rounded up. Binary units (KiB,
/// MiB, GiB, TiB) are powers of 1024; decimal ones (KB, MB, GB, TB) powers of 1000, as
/// vendors print them. A unit is required: a bare number would be ambiguous.
pub fn parse_size_mib(text: &str) -> Result<u32, String> {
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let bytes_per_unit: u128 = match unit.trim().to_ascii_lowercase().as_str() {
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(format!(
                "`{text}` is not a size: write a number and a unit, e.g. 40GiB, 512MiB, 80GB"
            ));
        }
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') || fraction.len() > 6 {
        return Err(format!("`{text}` is not a size"));
    }
    let as_int = |s: &str| -> Result<u128, String> {
        if s.is_empty() {
            Ok(0)
        } else {
            s.parse().map_err(|_| format!("`{text}` is not a size"))
        }
    };
    let denominator = 10u128.pow(fraction.len() as u32);
    let numerator = as_int(whole)?
        .checked_mul(denominator)
        .and_then(|w| w.checked_add(as_int(fraction).ok()?))
        .ok_or_else(|| format!("`{text}` is too large"))?;
    let bytes = numerator
        .checked_mul(bytes_per_unit)
        .ok_or_else(|| format!("`{text}` is too large"))?;
    let mib = bytes.div_ceil(denominator << 20);
    u32::try_from(mib).map_err(|_| format!("`{text}` is more than the contract's 4 PiB"))
}

/// MiB for people: "40 GiB", "1.5 GiB", "512 MiB".
pub fn format_mib(mib: u64) -> String {
    if mib >= 1024 {
        let gib = mib as f64 / 1024.0;
        let text = format!("{gib:.1}");
        format!("{} GiB", text.trim_end_matches(".0"))
    } else {
        format!("{mib} MiB")
    }
}

/// A verification policy as `--verify` takes it: `none`, `replicated:N/K` (K of N nodes
/// agree: 2K > N, K < N, N at most 5) or `refereed:R` (R referees, odd, at most 5). The
/// reveal window is left 0, for the caller to set.
pub fn parse_verify(text: &str) -> Result<gantry_protocol::market::Verification, String> {
    use gantry_protocol::market::Verification;
    let shape = "none, replicated:N/K (e.g. replicated:3/2) or refereed:R (e.g. refereed:3)";
    let number = |s: &str| {
        s.trim()
            .parse::<u8>()
            .map_err(|_| format!("{text:?}: {s:?} is not a number ({shape})"))
    };
    let text_lower = text.trim().to_ascii_lowercase();
    if text_lower == "none" {
        return Ok(Verification::NONE);
    }
    let (tier, rest) = text_lower
        .split_once(':')
        .ok_or_else(|| format!("{text:?}: expected {shape}"))?;
    match tier {
        "replicated" => {
            let (n, k) = rest
                .split_once('/')
                .ok_or_else(|| format!("{text:?}: expected replicated:N/K"))?;
            let (n, k) = (number(n)?, number(k)?);
            if !(2..=5).contains(&n) || k >= n || 2 * u16::from(k) <= u16::from(n) {
                return Err(format!(
                    "{text:?}: K must be a majority of N and less than N, N at most 5                      (3/2, 4/3, 5/3, 5/4)"
                ));
            }
            Ok(Verification {
                tier: Verification::REPLICATED,
                size: n,
                quorum: k,
                reveal_window: 0,
            })
        }
        "refereed" => {
            let r = number(rest)?;
            if r % 2 == 0 || r > 5 {
                return Err(format!("{text:?}: R must be odd and at most 5 (1, 3, 5)"));
            }
            Ok(Verification {
                tier: Verification::REFEREED,
                size: r,
                quorum: 0,
                reveal_window: 0,
            })
        }
        _ => Err(format!("{text:?}: expected {shape}")),
    }
}

/// A duration ("4h", "90m", "1h 30m", "2days") in whole seconds, at least one.
pub fn parse_duration_secs(text: &str) -> Result<u64, String> {
    let duration = humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}` is not a duration ({e}); write e.g. 4h, 90m, 1h 30m"))?;
    match duration.as_secs() {
        0 => Err(format!("`{text}` is shorter than a second")),
        secs => Ok(secs),
    }
}

/// Seconds for people: "4h", "1h 30m", "45s".
pub fn format_secs(secs: u64) -> String {
    humantime::format_duration(Duration::from_secs(secs)).to_string()
}

/// When a job's result is due: a duration from now (chain time) or a point in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deadline {
    In(u64),
    At(u64),
}

impl Deadline {
    /// "24h" (from now) or "2026-11-03T12:00:00Z".
    pub fn parse(text: &str) -> Result<Self, String> {
        if let Ok(secs) = parse_duration_secs(text) {
            return Ok(Self::In(secs));
        }
        let at = humantime::parse_rfc3339_weak(text.trim()).map_err(|_| {
            format!(
                "`{text}` is neither a duration (24h) nor an RFC 3339 time (2026-11-03T12:00:00Z)"
            )
        })?;
        let secs = at
            .duration_since(UNIX_EPOCH)
            .map_err(|_| format!("`{text}` is before 1970"))?
            .as_secs();
        Ok(Self::At(secs))
    }

    /// The unix time, given the chain's `now`.
    pub fn resolve(self, now: u64) -> u64 {
        match self {
            Self::In(secs) => now.saturating_add(secs),
            Self::At(at) => at,
        }
    }
}

/// The on-chain GPU model id of a name, as the worker derives it from NVML's name: runs
/// of whitespace become one dash ("NVIDIA A100-SXM4-80GB" → "NVIDIA-A100-SXM4-80GB"),
/// right-padded with zeros to 32 bytes and cut there.
pub fn model_id(name: &str) -> B256 {
    let normalized = name.split_whitespace().collect::<Vec<_>>().join("-");
    let bytes = normalized.as_bytes();
    B256::right_padding_from(&bytes[..bytes.len().min(32)])
}

/// The name in a model id ("" for zero, "any model" is the caller's to say).
pub fn model_name(model: B256) -> String {
    let bytes: Vec<u8> = model.iter().copied().take_while(|b| *b != 0).collect();
    String::from_utf8(bytes).unwrap_or_else(|_| model.to_string())
}

/// A GPU model some registered node offers, with what its nodes have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// The model id's name, as the API shows it.
    pub model: String,
    pub gpu_count: u64,
    pub vram_mib: u64,
}

/// `--gpu <query>` against the models nodes offer. The chain compares models by exact id,
/// so a short name has to become one id:
/// 1. a query equal to an offered id (after the worker's normalisation) is that id;
/// 2. else the offered ids that contain every dash- or space-separated word of the query
///    (case-insensitive; "A100" is in "NVIDIA-A100-SXM4-80GB") on at least one node
///    with `min_gpus` GPUs and `min_vram_mib` per GPU: exactly one is the answer, several
///    or none are an error naming them.
pub fn resolve_gpu(
    query: &str,
    offers: &[Offer],
    min_gpus: u64,
    min_vram_mib: u64,
) -> Result<B256, String> {
    let exact = model_name(model_id(query));
    if offers.iter().any(|o| o.model == exact) {
        return Ok(model_id(&exact));
    }
    let words: Vec<String> = query
        .split(|c: char| c.is_whitespace() || c == '-')
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    if words.is_empty() {
        return Err("--gpu needs a model name, e.g. A100 or H100".into());
    }
    let named = |offer: &Offer| {
        let parts: Vec<String> = offer
            .model
            .split('-')
            .map(str::to_ascii_lowercase)
            .collect();
        words.iter().all(|w| parts.contains(w))
    };
    let mut fitting: Vec<(&str, usize)> = Vec::new();
    let mut named_only: Vec<&str> = Vec::new();
    for offer in offers.iter().filter(|o| named(o)) {
        if !named_only.contains(&offer.model.as_str()) {
            named_only.push(&offer.model);
        }
        if offer.gpu_count >= min_gpus.max(1) && offer.vram_mib >= min_vram_mib {
            match fitting.iter_mut().find(|(m, _)| *m == offer.model) {
                Some((_, nodes)) => *nodes += 1,
                None => fitting.push((&offer.model, 1)),
            }
        }
    }
    fitting.sort();
    named_only.sort();
    match fitting.as_slice() {
        [(model, _)] => Ok(model_id(model)),
        [] if named_only.is_empty() => {
            let mut known: Vec<&str> = offers.iter().map(|o| o.model.as_str()).collect();
            known.sort();
            known.dedup();
            let known = if known.is_empty() {
                "no node offers a GPU".to_string()
            } else {
                format!("offered: {}", known.join(", "))
            };
            Err(format!(
                "no registered node offers a GPU model matching `{query}` ({known}); to post \
                 for a model no node offers yet, give its full id with --gpu-model"
            ))
        }
        [] => Err(format!(
            "`{query}` matches {}, but no node with it has {} GPU(s) with {} each",
            named_only.join(", "),
            min_gpus.max(1),
            format_mib(min_vram_mib),
        )),
        several => Err(format!(
            "`{query}` matches several GPU models ({}): name one with --gpu, or ask for more \
             VRAM with --vram",
            several
                .iter()
                .map(|(m, n)| format!("{m} on {n} node{}", if *n == 1 { "" } else { "s" }))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verify_policies_parse_and_bad_ones_say_why() {
        use gantry_protocol::market::Verification;
        assert_eq!(parse_verify("none").unwrap(), Verification::NONE);
        let v = parse_verify("replicated:3/2").unwrap();
        assert_eq!((v.tier, v.size, v.quorum), (Verification::REPLICATED, 3, 2));
        let v = parse_verify("Refereed:5").unwrap();
        assert_eq!((v.tier, v.size, v.quorum), (Verification::REFEREED, 5, 0));
        for (bad, why) in [
            ("replicated:3/3", "majority"),
            ("replicated:4/2", "majority"),
            ("replicated:6/4", "at most 5"),
            ("replicated:3", "replicated:N/K"),
            ("refereed:2", "odd"),
            ("refereed:x", "not a number"),
            ("quorum:3", "expected"),
        ] {
            let error = parse_verify(bad).unwrap_err();
            assert!(error.contains(why), "{bad}: {error}");
        }
    }

    #[test]
    fn amounts_parse_exactly_and_print_back() {
        let cases: [(&str, u64); 7] = [
            ("12.5", 12_500_000),
            ("12", 12_000_000),
            ("0.000001", 1),
            ("1000000", 1_000_000_000_000),
            (".5", 500_000),
            ("3.", 3_000_000),
            (" 7.25 ", 7_250_000),
        ];
        for (text, base) in cases {
            assert_eq!(parse_amount(text, 6), Ok(U256::from(base)), "{text}");
        }
        for bad in [
            "",
            ".",
            "1.0000001",
            "-1",
            "1e6",
            "1,5",
            "12.5 gUSD",
            "0x10",
        ] {
            assert!(parse_amount(bad, 6).is_err(), "{bad}");
        }
        assert!(
            parse_amount(&"9".repeat(80), 6)
                .unwrap_err()
                .contains("too large")
        );
        for (base, text) in [
            (12_500_000u64, "12.5"),
            (12_000_000, "12"),
            (1, "0.000001"),
            (0, "0"),
            (10_000_010, "10.00001"),
        ] {
            assert_eq!(format_amount(U256::from(base), 6), text);
            assert_eq!(parse_amount(text, 6), Ok(U256::from(base)));
        }
        assert_eq!(format_amount(U256::from(5u8), 0), "5");
    }

    #[test]
    fn sizes_are_mib_rounded_up() {
        for (text, mib) in [
            ("40GiB", 40_960),
            ("64 GiB", 65_536),
            ("512MiB", 512),
            ("1.5TiB", 1_572_864),
            ("80GB", 76_294), // 80e9 bytes = 76293.95 MiB
            ("1KiB", 1),
            ("0.5gib", 512),
        ] {
            assert_eq!(parse_size_mib(text), Ok(mib), "{text}");
        }
        for bad in ["40", "40G", "GiB", "4..0GiB", "-1GiB", "1PiB"] {
            assert!(parse_size_mib(bad).is_err(), "{bad}");
        }
        assert!(parse_size_mib("5000TiB").unwrap_err().contains("4 PiB"));
        assert_eq!(format_mib(40_960), "40 GiB");
        assert_eq!(format_mib(1536), "1.5 GiB");
        assert_eq!(format_mib(512), "512 MiB");
    }

    #[test]
    fn durations_and_deadlines() {
        assert_eq!(parse_duration_secs("4h"), Ok(14_400));
        assert_eq!(parse_duration_secs("90m"), Ok(5_400));
        assert_eq!(parse_duration_secs("1h 30m"), Ok(5_400));
        assert!(parse_duration_secs("0s").is_err());
        assert!(parse_duration_secs("soon").is_err());
        assert_eq!(format_secs(5_400), "1h 30m");

        assert_eq!(Deadline::parse("24h"), Ok(Deadline::In(86_400)));
        assert_eq!(Deadline::In(60).resolve(1_000), 1_060);
        let at = Deadline::parse("2026-11-03T12:00:00Z").unwrap();
        assert_eq!(at, Deadline::At(1_793_707_200));
        assert_eq!(at.resolve(5), 1_793_707_200);
        assert_eq!(format_time(1_793_707_200), "2026-11-03T12:00:00Z");
        assert!(Deadline::parse("tomorrow-ish").is_err());
    }

    #[test]
    fn model_ids_follow_the_worker() {
        assert_eq!(
            model_name(model_id("NVIDIA  A100-SXM4-80GB")),
            "NVIDIA-A100-SXM4-80GB"
        );
        assert_eq!(model_id("NVIDIA H100 80GB HBM3"), {
            B256::right_padding_from(b"NVIDIA-H100-80GB-HBM3")
        });
        // Cut at 32 bytes like the worker's ids.
        let long = "NVIDIA GeForce RTX 4090 Laptop GPU";
        assert_eq!(model_name(model_id(long)).len(), 32);
        assert_eq!(model_name(B256::ZERO), "");
    }

    fn offer(model: &str, gpu_count: u64, vram_gib: u64) -> Offer {
        Offer {
            model: model.into(),
            gpu_count,
            vram_mib: vram_gib * 1024,
        }
    }

    #[test]
    fn short_gpu_names_resolve_to_one_offered_model() {
        let offers = [
            offer("NVIDIA-A100-SXM4-80GB", 8, 80),
            offer("NVIDIA-A100-SXM4-80GB", 4, 80),
            offer("NVIDIA-A100-SXM4-40GB", 8, 40),
            offer("NVIDIA-H100-80GB-HBM3", 8, 80),
            offer("NVIDIA-GeForce-RTX-4090", 1, 24),
        ];
        let check = |query: &str, gpus: u64, vram_gib: u64, expected: Result<&str, &str>| {
            let got = resolve_gpu(query, &offers, gpus, vram_gib * 1024);
            match expected {
                Ok(model) => assert_eq!(got, Ok(model_id(model)), "{query}"),
                Err(part) => {
                    let error = got.expect_err(query);
                    assert!(error.contains(part), "{query}: {error}");
                }
            }
        };
        check("H100", 1, 0, Ok("NVIDIA-H100-80GB-HBM3"));
        check("h100", 1, 0, Ok("NVIDIA-H100-80GB-HBM3"));
        check("rtx 4090", 1, 0, Ok("NVIDIA-GeForce-RTX-4090"));
        check("NVIDIA A100-SXM4-40GB", 1, 0, Ok("NVIDIA-A100-SXM4-40GB"));
        check("A100", 1, 48, Ok("NVIDIA-A100-SXM4-80GB"));
        check("A100 40GB", 1, 0, Ok("NVIDIA-A100-SXM4-40GB"));
        check(
            "A100",
            1,
            40,
            Err("NVIDIA-A100-SXM4-40GB on 1 node, NVIDIA-A100-SXM4-80GB on 2 nodes"),
        );
        check("A100", 16, 0, Err("no node with it has 16 GPU(s)"));
        check("MI300X", 1, 0, Err("no registered node offers"));
        check("MI300X", 1, 0, Err("offered: NVIDIA-A100-SXM4-40GB,"));
        check("--", 1, 0, Err("needs a model name"));
        assert!(
            resolve_gpu("A100", &[], 1, 0)
                .unwrap_err()
                .contains("no node offers a GPU")
        );
    }
}
