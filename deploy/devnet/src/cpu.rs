//! Each process's CPU time, for benchmarks that say where a network's cores went.

use std::collections::BTreeMap;

use crate::network::Network;

/// Each process of a network's CPU time (user + system, seconds) at one moment, by label
/// (anvil, nats-server, each service; `extra` adds the bench's own process).
#[derive(Debug)]
pub struct Cpu(BTreeMap<String, f64>);

impl Cpu {
    pub fn read(network: &Network, extra: Option<&str>) -> Self {
        let mut times = BTreeMap::new();
        let mut pids = network.pids();
        if let Some(label) = extra {
            pids.push((label.to_owned(), std::process::id()));
        }
        for (label, pid) in pids {
            if let Some(seconds) = cpu_seconds(pid) {
                times.insert(label, seconds);
            }
        }
        Self(times)
    }

    /// Each process's CPU seconds between `before` and `after` (`self`), most first; a
    /// process that was not running at both moments is left out.
    pub fn since(&self, before: &Self) -> Vec<(String, f64)> {
        let mut used: Vec<(String, f64)> = self
            .0
            .iter()
            .filter_map(|(label, end)| Some((label.clone(), end - before.0.get(label)?)))
            .collect();
        used.sort_by(|a, b| b.1.total_cmp(&a.1));
        used
    }
}

/// A process's user and system time, seconds (`/proc/<pid>/stat`, clock ticks of 1/100 s).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command's closing parenthesis: state is field 3, utime 14.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}
