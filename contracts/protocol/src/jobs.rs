//! What a worker publishes about the jobs it runs, outside the chain stream: progress,
//! log lines and a completion report per attempt. Subjects sit under
//! `gantry.jobs.<chain>` (not `gantry.<chain>`, which only the indexer writes):
//!
//! ```text
//!   gantry.jobs.<chain>.progress.<job>   ProgressUpdate, every progress_report_interval
//!   gantry.jobs.<chain>.logs.<job>       LogLine, each line of the container's stdout/stderr
//!   gantry.jobs.<chain>.done.<job>       CompletionReport, once per attempt
//! ```
//!
//! A job reports progress by printing lines that start with [`PROGRESS_PREFIX`] followed by
//! one JSON object ([`ProgressLine`]), e.g.
//! `##gantry {"progress":0.4,"epoch":4,"epochs":10,"metrics":{"loss":0.21}}`.

use std::collections::BTreeMap;

use alloy::primitives::B256;
use serde::{Deserialize, Serialize};

/// Version of these payloads.
pub const JOBS_VERSION: u16 = 1;

/// A container's stdout line starting with this is a progress report, not a log line.
pub const PROGRESS_PREFIX: &str = "##gantry ";

/// Metrics kept from one progress line at most; longer names are dropped.
pub const MAX_METRICS: usize = 16;
pub const MAX_METRIC_NAME: usize = 64;

/// What a job prints after [`PROGRESS_PREFIX`]. Every field is optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgressLine {
    /// Fraction done, 0 to 1 (clamped).
    pub progress: Option<f64>,
    pub epoch: Option<u32>,
    /// Total epochs.
    pub epochs: Option<u32>,
    /// Named numbers, e.g. `{"loss": 0.21, "accuracy": 0.93}`.
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
}

impl ProgressLine {
    /// The progress report in `line`, if it is one: the prefix, then a JSON object. A line
    /// with the prefix but no valid object is `None` (the worker logs it as text). Values
    /// are bounded: progress clamped to 0..=1, non-finite metrics and excess ones dropped.
    pub fn parse(line: &str) -> Option<Self> {
        let json = line.strip_prefix(PROGRESS_PREFIX)?;
        let mut parsed: Self = serde_json::from_str(json.trim()).ok()?;
        parsed.progress = parsed
            .progress
            .filter(|p| p.is_finite())
            .map(|p| p.clamp(0.0, 1.0));
        parsed.metrics.retain(|name, value| {
            value.is_finite() && !name.is_empty() && name.len() <= MAX_METRIC_NAME
        });
        while parsed.metrics.len() > MAX_METRICS {
            parsed.metrics.pop_last();
        }
        Some(parsed)
    }
}

/// The latest progress of a running job, with GPU telemetry and timing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ProgressUpdate {
    pub v: u16,
    pub job_id: u64,
    pub node_id: u64,
    pub attempt: u8,
    pub progress: Option<f64>,
    pub epoch: Option<u32>,
    pub epochs: Option<u32>,
    pub metrics: BTreeMap<String, f64>,
    /// Mean GPU utilisation over the job's GPUs since the last update, percent.
    pub gpu_utilization: Option<f64>,
    pub gpu_memory_used_mib: Option<u64>,
    pub elapsed_secs: u64,
    /// Estimated from progress and elapsed time, when progress is known and above 0.
    pub eta_secs: Option<u64>,
    /// Unix time, milliseconds.
    pub at_ms: u64,
}

/// One line of a job's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LogLine {
    pub v: u16,
    pub job_id: u64,
    pub attempt: u8,
    pub stream: LogStream,
    pub line: String,
    pub at_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum LogStream {
    Stdout,
    Stderr,
}

/// How an attempt ended, from the worker's side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CompletionReport {
    pub v: u16,
    pub job_id: u64,
    pub node_id: u64,
    pub attempt: u8,
    pub status: CompletionStatus,
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub result_hash: Option<B256>,
    pub result_uri: Option<String>,
    pub output_bytes: Option<u64>,
    pub compute_secs: u64,
    pub gpu_secs: u64,
    pub avg_gpu_utilization: Option<f64>,
    pub error: Option<String>,
    pub at_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum CompletionStatus {
    /// The result was uploaded and submitted on-chain.
    Submitted,
    /// The job's fault (bad image, input mismatch, non-zero exit, timeout, output too
    /// large): rejected on-chain with the reason.
    JobFault,
    /// The node's fault (engine down, disk full): the job was given back for another node.
    NodeFault,
}

/// One message of a jobs stream, decoded.
#[derive(Debug, Clone)]
pub enum JobReport {
    Progress(ProgressUpdate),
    Log(LogLine),
    Done(CompletionReport),
}

impl JobReport {
    /// Decodes a message by its subject (`gantry.jobs.<chain>.{progress,logs,done}.<node>.<job>`,
    /// see [`crate::names::progress_subject`] and its siblings) into the node whose subject
    /// it came on and the report; `None` for anything else, a payload that does not parse,
    /// one whose job or node differs from its subject's, or one with an integer beyond
    /// `i64` (what SQL's BIGINT and other languages' JSON readers hold): a worker's bad
    /// report is skipped, never fatal to the reader.
    pub fn decode(subject: &str, payload: &[u8]) -> Option<(u64, Self)> {
        let mut tokens = subject.strip_prefix("gantry.jobs.")?.split('.');
        let (Some(_chain), Some(kind), Some(node), Some(job), None) = (
            tokens.next(),
            tokens.next(),
            tokens.next(),
            tokens.next(),
            tokens.next(),
        ) else {
            return None;
        };
        // Canonical numbers only: `+7` or `07` would name job 7 on another subject.
        let canonical = |token: &str| token.parse::<u64>().ok().filter(|n| n.to_string() == token);
        let (node, job) = (canonical(node)?, canonical(job)?);
        let report = match kind {
            "progress" => serde_json::from_slice(payload)
                .ok()
                .map(JobReport::Progress),
            "logs" => serde_json::from_slice(payload).ok().map(JobReport::Log),
            "done" => serde_json::from_slice(payload).ok().map(JobReport::Done),
            _ => None,
        }?;
        let node_matches = match &report {
            JobReport::Progress(p) => p.node_id == node,
            JobReport::Done(d) => d.node_id == node,
            JobReport::Log(_) => true,
        };
        (node_matches && report.job_id() == job && report.integers_fit()).then_some((node, report))
    }

    pub fn job_id(&self) -> u64 {
        match self {
            JobReport::Progress(p) => p.job_id,
            JobReport::Log(l) => l.job_id,
            JobReport::Done(d) => d.job_id,
        }
    }

    /// The attempt of the job the report is about (1 for the first assignment).
    pub fn attempt(&self) -> u8 {
        match self {
            JobReport::Progress(p) => p.attempt,
            JobReport::Log(l) => l.attempt,
            JobReport::Done(d) => d.attempt,
        }
    }

    /// Whether every integer of the report is at most `i64::MAX`.
    fn integers_fit(&self) -> bool {
        let fits = |n: u64| i64::try_from(n).is_ok();
        match self {
            JobReport::Progress(p) => [p.job_id, p.node_id, p.elapsed_secs, p.at_ms]
                .into_iter()
                .chain(p.gpu_memory_used_mib)
                .chain(p.eta_secs)
                .all(fits),
            JobReport::Log(l) => fits(l.job_id) && fits(l.at_ms),
            JobReport::Done(d) => [d.job_id, d.node_id, d.compute_secs, d.gpu_secs, d.at_ms]
                .into_iter()
                .chain(d.output_bytes)
                .all(fits),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names;

    #[test]
    fn progress_lines_parse_and_are_bounded() {
        let line = r#"##gantry {"progress":0.4,"epoch":4,"epochs":10,"metrics":{"loss":0.21}}"#;
        let parsed = ProgressLine::parse(line).unwrap();
        assert_eq!(parsed.progress, Some(0.4));
        assert_eq!((parsed.epoch, parsed.epochs), (Some(4), Some(10)));
        assert_eq!(parsed.metrics["loss"], 0.21);

        assert_eq!(
            ProgressLine::parse(r#"##gantry {"progress":7}"#)
                .unwrap()
                .progress,
            Some(1.0)
        );
        let many: BTreeMap<String, f64> = (0..40)
            .map(|i| (format!("m{i:02}"), f64::from(i)))
            .collect();
        let line = format!(
            "##gantry {}",
            serde_json::json!({ "metrics": many, "progress": 0.5 })
        );
        assert_eq!(
            ProgressLine::parse(&line).unwrap().metrics.len(),
            MAX_METRICS
        );
    }

    #[test]
    fn other_lines_are_not_progress() {
        for line in [
            "epoch 4 loss 0.21",
            "##gantry not json",
            r#"##gantry {"progres":0.4}"#,
            r#" ##gantry {"progress":0.4}"#,
        ] {
            assert_eq!(ProgressLine::parse(line), None, "{line:?}");
        }
    }

    #[test]
    fn worker_subjects_stay_outside_the_chain_stream() {
        let chain_stream = crate::names::stream_subjects(31337);
        let prefix = chain_stream.trim_end_matches('>');
        for subject in [
            names::progress_subject(31337, 3, 7),
            names::logs_subject(31337, 3, 7),
            names::completion_subject(31337, 3, 7),
        ] {
            assert!(subject.starts_with("gantry.jobs.31337."), "{subject}");
            assert!(
                !subject.starts_with(prefix),
                "{subject} is under {chain_stream}"
            );
        }
    }

    #[test]
    fn reports_decode_by_the_subjects_workers_publish_on() {
        let line = LogLine {
            v: JOBS_VERSION,
            job_id: 7,
            attempt: 1,
            stream: LogStream::Stdout,
            line: "hello".into(),
            at_ms: 1,
        };
        let payload = serde_json::to_vec(&line).unwrap();
        assert!(matches!(
            JobReport::decode(&names::logs_subject(31337, 3, 7), &payload),
            Some((3, JobReport::Log(l))) if l == line
        ));
        assert!(JobReport::decode(&names::progress_subject(31337, 3, 7), &payload).is_none());
        // Another job's subject, or none of a node.
        assert!(JobReport::decode(&names::logs_subject(31337, 3, 8), &payload).is_none());
        assert!(JobReport::decode("gantry.jobs.31337.logs.7", &payload).is_none());
        for odd in ["gantry.jobs.31337.logs.3.07", "gantry.jobs.31337.logs.+3.7"] {
            assert!(JobReport::decode(odd, &payload).is_none(), "{odd}");
        }
        // An integer beyond i64 (no clock reads that far) is a bad report, skipped.
        let far = serde_json::to_vec(&LogLine {
            at_ms: u64::MAX,
            ..serde_json::from_slice(&payload).unwrap()
        })
        .unwrap();
        assert!(JobReport::decode(&names::logs_subject(31337, 3, 7), &far).is_none());
        assert!(JobReport::decode("gantry.31337.ev.JobPosted.7", &payload).is_none());
    }

    /// Design 19, §2: a report whose payload names another node than its subject is not
    /// one (the subject is what the permissions hold a worker to).
    #[test]
    fn a_report_naming_another_node_than_its_subject_is_dropped() {
        let update = ProgressUpdate {
            v: JOBS_VERSION,
            job_id: 7,
            node_id: 4,
            attempt: 1,
            progress: Some(0.5),
            epoch: None,
            epochs: None,
            metrics: BTreeMap::new(),
            gpu_utilization: None,
            gpu_memory_used_mib: None,
            elapsed_secs: 1,
            eta_secs: None,
            at_ms: 1,
        };
        let payload = serde_json::to_vec(&update).unwrap();
        assert!(JobReport::decode(&names::progress_subject(31337, 3, 7), &payload).is_none());
        assert!(matches!(
            JobReport::decode(&names::progress_subject(31337, 4, 7), &payload),
            Some((4, JobReport::Progress(_)))
        ));
    }
}
