//! How things print: JSON for scripts (one document, or one line per update when
//! following), text for people. The text helpers are pure.

use alloy::primitives::U256;
use alloy::primitives::ruint::UintTryFrom;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::jobs::ProgressUpdate;

use crate::revert::TokenInfo;
use crate::units::{format_amount, format_mib, format_secs, model_name};

/// Prints `value` as one JSON document on stdout.
pub fn json(value: &serde_json::Value) {
    println!("{value}");
}

/// Amounts for people: with the token's decimals and symbol when the chain told them,
/// else base units, said so.
#[derive(Debug, Clone)]
pub struct Money(pub Option<TokenInfo>);

impl Money {
    pub fn show<T>(&self, amount: T) -> String
    where
        U256: UintTryFrom<T>,
    {
        let amount = U256::from(amount);
        match &self.0 {
            Some(token) => token.show::<U256>(amount),
            None => format!("{amount} base units"),
        }
    }

    /// A base-unit decimal string as the API gives it.
    pub fn show_str(&self, base_units: &str) -> String {
        match base_units.parse::<U256>() {
            Ok(amount) => self.show(amount),
            Err(_) => base_units.to_string(),
        }
    }

    /// The number only, for tables.
    pub fn short(&self, base_units: &str) -> String {
        match (&self.0, base_units.parse::<U256>()) {
            (Some(token), Ok(amount)) => format_amount(amount, token.decimals),
            _ => base_units.to_string(),
        }
    }
}

/// A job's requirements in one line: "1× NVIDIA-A100-SXM4-80GB · ≥ 40 GiB VRAM per GPU ·
/// ≥ 8 CPU cores · ≥ 64 GiB RAM · ≤ 2.5 gUSD per GPU-hour · runs ≤ 4h · priority 5"; a
/// CPU job's "no GPU", a job posted without a price limit (`U96::MAX`) "any price", as the
/// dashboard says them (`requirements` in api/assets/views/job.js).
pub fn requirements(r: &JobMarket::JobRequirements, money: &Money) -> String {
    let mut parts = Vec::new();
    match gantry_protocol::spec::Engine::from_code(r.engine) {
        Some(engine) if engine.is_docker() => {}
        Some(engine) => parts.push(engine.to_string()),
        None => parts.push(format!("engine {}", r.engine)),
    }
    match (r.gpuModel.is_zero(), r.minGpuCount) {
        (true, 0) => parts.push("no GPU".to_string()),
        (true, n) => parts.push(format!("{n}× any GPU")),
        (false, n) => parts.push(format!("{n}× {}", model_name(r.gpuModel))),
    }
    if r.minVramMiB > 0 {
        parts.push(format!(
            "≥ {} VRAM per GPU",
            format_mib(u64::from(r.minVramMiB))
        ));
    }
    if r.minCpuCores > 0 {
        let plural = if r.minCpuCores == 1 { "" } else { "s" };
        parts.push(format!("≥ {} CPU core{plural}", r.minCpuCores));
    }
    if r.minRamMiB > 0 {
        parts.push(format!("≥ {} RAM", format_mib(u64::from(r.minRamMiB))));
    }
    if r.maxPricePerGpuHour == alloy::primitives::aliases::U96::MAX {
        parts.push("any price".to_string());
    } else {
        parts.push(format!(
            "≤ {} per GPU-hour",
            money.show(U256::from(r.maxPricePerGpuHour))
        ));
    }
    parts.push(format!("runs ≤ {}", format_secs(u64::from(r.maxRuntime))));
    parts.push(format!("priority {}", r.priority));
    parts.join(" · ")
}

/// Progress in one line: "40% · epoch 4/10 · loss 0.2100 · ETA 3m".
pub fn progress(p: &ProgressUpdate) -> String {
    let mut parts = Vec::new();
    if let Some(fraction) = p.progress {
        parts.push(format!("{:.0}%", fraction * 100.0));
    }
    match (p.epoch, p.epochs) {
        (Some(epoch), Some(epochs)) => parts.push(format!("epoch {epoch}/{epochs}")),
        (Some(epoch), None) => parts.push(format!("epoch {epoch}")),
        _ => {}
    }
    // The loss first, then up to two others by name.
    let mut metrics: Vec<(&String, &f64)> = p.metrics.iter().collect();
    metrics.sort_by_key(|(name, _)| (name.as_str() != "loss", name.as_str()));
    for (name, value) in metrics.into_iter().take(3) {
        parts.push(format!("{name} {value:.4}"));
    }
    if let Some(eta) = p.eta_secs {
        parts.push(format!("ETA {}", format_secs(eta.max(1))));
    }
    if parts.is_empty() {
        parts.push(format!("running {}", format_secs(p.elapsed_secs.max(1))));
    }
    parts.join(" · ")
}

/// Left-aligned columns.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<width$}", width = widths[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = vec![line(header.to_vec())];
    for row in rows {
        out.push(line(row.iter().map(String::as_str).collect()));
    }
    out.join("\n")
}

/// `text` safe for a terminal: control characters (escape sequences that could move the
/// cursor, rewrite the screen or set the window title, from a job's own output) are shown
/// as `\u{…}`, tabs kept.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\t') {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars()
            .map(|c| {
                if c.is_control() && c != '\t' {
                    c.escape_unicode().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use alloy::primitives::aliases::U96;

    use super::*;
    use crate::units::model_id;

    #[test]
    fn a_jobs_escape_sequences_are_shown_not_run() {
        assert_eq!(printable("loss 0.21\tok"), "loss 0.21\tok");
        let hostile = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}31mred\r";
        let shown = printable(hostile);
        assert!(!shown.chars().any(|c| c.is_control()), "{shown}");
        assert!(shown.contains("owned") && shown.contains("red"), "{shown}");
    }

    fn gusd() -> Money {
        Money(Some(TokenInfo {
            decimals: 6,
            symbol: "gUSD".into(),
        }))
    }

    #[test]
    fn requirements_read_as_a_line() {
        let r = JobMarket::JobRequirements {
            gpuModel: model_id("NVIDIA-A100-SXM4-80GB"),
            minGpuCount: 1,
            minVramMiB: 40_960,
            minCpuCores: 8,
            minRamMiB: 65_536,
            maxPricePerGpuHour: U96::from(2_500_000u64),
            maxRuntime: 14_400,
            priority: 5,
            engine: 0,
        };
        assert_eq!(
            requirements(&r, &gusd()),
            "1× NVIDIA-A100-SXM4-80GB · ≥ 40 GiB VRAM per GPU · ≥ 8 CPU cores · ≥ 64 GiB RAM · \
             ≤ 2.5 gUSD per GPU-hour · runs ≤ 4h · priority 5"
        );
        let cpu = JobMarket::JobRequirements {
            gpuModel: Default::default(),
            minGpuCount: 0,
            minVramMiB: 0,
            minCpuCores: 0,
            minRamMiB: 0,
            maxPricePerGpuHour: U96::MAX,
            maxRuntime: 60,
            priority: 1,
            engine: 0,
        };
        assert_eq!(
            requirements(&cpu, &Money(None)),
            "no GPU · any price · runs ≤ 1m · priority 1"
        );
        let wasm = JobMarket::JobRequirements { engine: 1, ..cpu };
        assert_eq!(
            requirements(&wasm, &Money(None)),
            "wasm · no GPU · any price · runs ≤ 1m · priority 1"
        );
        // GPUs of any model; a limit one below "any price" is a limit.
        let any_gpu = JobMarket::JobRequirements {
            gpuModel: Default::default(),
            minGpuCount: 2,
            maxPricePerGpuHour: U96::MAX - U96::from(1),
            ..cpu
        };
        assert_eq!(
            requirements(&any_gpu, &Money(None)),
            "2× any GPU · ≤ 79228162514264337593543950334 base units per GPU-hour · runs ≤ 1m · \
             priority 1"
        );
    }

    #[test]
    fn progress_reads_as_a_line() {
        let update = ProgressUpdate {
            v: 1,
            job_id: 1,
            node_id: 1,
            attempt: 1,
            progress: Some(0.4),
            epoch: Some(4),
            epochs: Some(10),
            metrics: [("accuracy".to_string(), 0.9), ("loss".to_string(), 0.21)].into(),
            gpu_utilization: None,
            gpu_memory_used_mib: None,
            elapsed_secs: 120,
            eta_secs: Some(180),
            at_ms: 0,
        };
        assert_eq!(
            progress(&update),
            "40% · epoch 4/10 · loss 0.2100 · accuracy 0.9000 · ETA 3m"
        );
    }

    #[test]
    fn tables_align() {
        let text = table(
            &["ID", "STATUS"],
            &[
                vec!["1".into(), "open".into()],
                vec!["10".into(), "completed".into()],
            ],
        );
        assert_eq!(text, "ID  STATUS\n1   open\n10  completed");
    }
}
