//! `gantry job watch`: the job's state folded from the API's live feed of this job
//! (`/v1/events?job=<id>`: its `job` rows and worker `progress`), shown as a progress bar, as
//! lines, or as JSON lines, until the job settles. The feed is opened before the job is
//! fetched so nothing falls between the two; `lagged`, `reorg` and a reconnect refetch.
//!
//! An encrypted job whose job key is derived from the user's identity has its key
//! released to each node assigned it while it is watched (`gantry_runtime::keys`'s
//! `Submitter::serve`, in a task): a line says when.

use std::io::IsTerminal;
use std::time::Duration;

use gantry_protocol::api::{JobDetail, JobRow};
use gantry_protocol::jobs::ProgressUpdate;
use gantry_protocol::spec::JobSpec;
use gantry_runtime::keys::{ReleaseError, Released};
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::Context;
use crate::api::Api;
use gantry_protocol::api::LiveEventName;
use gantry_protocol::status::JobStatus;

use crate::api::{MAX_RECONNECTS, wait_to_reconnect};
use crate::commands::keys;
use crate::config::WatchArgs;
use crate::error::{CliError, Result};
use crate::output;
use crate::units;

/// What the watcher knows about the job.
#[derive(Debug, Clone, PartialEq)]
pub struct Watched {
    pub job_id: u64,
    pub status: JobStatus,
    pub attempts: u64,
    pub node_id: Option<u64>,
    pub challenge_ends_at: Option<u64>,
    pub progress: Option<ProgressUpdate>,
    /// The matcher's explanation while the job is open.
    pub pending: Option<String>,
}

impl Watched {
    pub fn from_detail(detail: &JobDetail) -> Self {
        let mut watched = Self {
            job_id: detail.job.job_id,
            status: JobStatus::None,
            attempts: 0,
            node_id: None,
            challenge_ends_at: None,
            progress: None,
            pending: detail.pending.as_ref().map(|p| p.summary.clone()),
        };
        watched.apply_row(&detail.job);
        if let Some(progress) = &detail.progress {
            watched.apply_progress(progress);
        }
        watched
    }

    /// A newer row of the job: its status, attempt and node.
    pub fn apply_row(&mut self, row: &JobRow) {
        debug_assert_eq!(row.job_id, self.job_id);
        self.status = row.status;
        self.attempts = row.attempts;
        self.node_id = row.node_id;
        self.challenge_ends_at = (row.status == JobStatus::Submitted)
            .then_some(row.until)
            .flatten();
        if self.status != JobStatus::Open {
            self.pending = None;
        }
        // Progress belongs to one attempt.
        if self
            .progress
            .as_ref()
            .is_some_and(|p| u64::from(p.attempt) < self.attempts)
        {
            self.progress = None;
        }
    }

    /// A worker's progress report; an older attempt's is ignored.
    pub fn apply_progress(&mut self, update: &ProgressUpdate) {
        if update.job_id == self.job_id && u64::from(update.attempt) >= self.attempts {
            self.progress = Some(update.clone());
        }
    }

    pub fn settled(&self) -> bool {
        self.status.is_settled()
    }

    /// `None` while there is more to watch; else how the command ends.
    pub fn outcome(&self, until_submitted: bool) -> Option<Result<()>> {
        match self.status {
            JobStatus::Completed => Some(Ok(())),
            JobStatus::Submitted if until_submitted => Some(Ok(())),
            status if status.is_settled() => Some(Err(CliError::NotCompleted(format!(
                "job {} ended {status}: it did not complete",
                self.job_id
            )))),
            _ => None,
        }
    }

    /// Fraction done, while a worker reports it.
    pub fn fraction(&self) -> Option<f64> {
        match self.status {
            JobStatus::Submitted | JobStatus::Disputed | JobStatus::Completed => Some(1.0),
            JobStatus::Assigned => self.progress.as_ref().and_then(|p| p.progress),
            _ => None,
        }
    }

    /// The state in one line.
    pub fn message(&self) -> String {
        let node = self
            .node_id
            .map_or(String::new(), |n| format!(" on node {n}"));
        match self.status {
            JobStatus::Open => match &self.pending {
                Some(summary) => format!("open: {summary}"),
                None => "open: waiting for a node".into(),
            },
            JobStatus::Assigned => match &self.progress {
                Some(p) => format!("running{node} · {}", output::progress(p)),
                None => format!("assigned{node}, starting"),
            },
            JobStatus::Submitted => match self.challenge_ends_at {
                Some(ends) => format!(
                    "result submitted{node}; challenge window until {}",
                    units::format_time(ends)
                ),
                None => format!("result submitted{node}"),
            },
            JobStatus::Disputed => "disputed: waiting for the arbiter".into(),
            other => other.to_string(),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        let p = self.progress.as_ref();
        serde_json::json!({
            "jobId": self.job_id,
            "status": self.status,
            "attempt": self.attempts,
            "nodeId": self.node_id,
            "progress": self.fraction(),
            "epoch": p.and_then(|p| p.epoch),
            "epochs": p.and_then(|p| p.epochs),
            "metrics": p.map(|p| p.metrics.clone()).unwrap_or_default(),
            "etaSecs": p.and_then(|p| p.eta_secs),
            "message": self.message(),
        })
    }
}

/// Where the state goes.
enum Display {
    Json { last: Option<serde_json::Value> },
    Bar(ProgressBar),
    Lines { last: Option<String> },
}

impl Display {
    fn new(json: bool, job_id: u64) -> Self {
        if json {
            return Self::Json { last: None };
        }
        if !std::io::stderr().is_terminal() {
            return Self::Lines { last: None };
        }
        let bar = ProgressBar::new(1000).with_prefix(job_id.to_string());
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} job {prefix} [{bar:30}] {percent:>3}% {wide_msg}",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        Self::Bar(bar)
    }

    fn show(&mut self, state: &Watched) {
        match self {
            Self::Json { last } => {
                let value = state.to_json();
                if last.as_ref() != Some(&value) {
                    output::json(&value);
                    *last = Some(value);
                }
            }
            Self::Lines { last } => {
                let message = format!("job {}: {}", state.job_id, state.message());
                if last.as_ref() != Some(&message) {
                    println!("{message}");
                    *last = Some(message);
                }
            }
            Self::Bar(bar) => {
                bar.set_position((state.fraction().unwrap_or(0.0) * 1000.0).round() as u64);
                bar.set_message(state.message());
            }
        }
    }

    /// A line of what became of a request for the job's key.
    fn key(&mut self, job_id: u64, answered: &Result<Released, ReleaseError>) {
        let Some((mut json, line)) = keys::outcome(answered) else {
            return;
        };
        let line = match answered {
            Ok(_) => line,
            Err(_) => format!("job {job_id}: {line}"),
        };
        match self {
            Self::Json { .. } => {
                json["jobId"] = job_id.into();
                output::json(&json);
            }
            Self::Lines { .. } => println!("{line}"),
            Self::Bar(bar) => bar.println(line),
        }
    }

    /// A warning, beside what is shown.
    fn warn(&mut self, message: &str) {
        match self {
            Self::Bar(bar) => bar.println(message),
            _ => eprintln!("{message}"),
        }
    }

    fn finish(&mut self, state: &Watched) {
        self.show(state);
        if let Self::Bar(bar) = self {
            if state.status == JobStatus::Completed {
                bar.finish();
            } else {
                bar.abandon();
            }
        }
    }
}

pub async fn watch(ctx: &Context, args: &WatchArgs) -> Result<()> {
    let mut feed = ctx
        .api
        .events("v1/events", &[("job", args.id.to_string())], None)
        .await?;
    let fetch = || async { Api::typed::<JobDetail>(&ctx.api.job(args.id).await?) };
    let detail = match fetch().await {
        Ok(detail) => detail,
        // Just posted, the API may not have it yet: if the chain has it, wait for its row.
        Err(CliError::NotFound(message)) => {
            match ctx.chain().await {
                Ok(chain) => chain.job(args.id).await?,
                Err(_) => return Err(CliError::NotFound(message)),
            };
            loop {
                let event = feed.next().await.ok_or_else(|| {
                    CliError::Unavailable("the API closed its event stream".into())
                })?;
                if LiveEventName::parse(&event.event) == Some(LiveEventName::Job)
                    && serde_json::from_str::<JobRow>(&event.data)
                        .is_ok_and(|r| r.job_id == args.id)
                {
                    break fetch().await?;
                }
            }
        }
        Err(other) => return Err(other),
    };
    let mut state = Watched::from_detail(&detail);
    let mut display = Display::new(ctx.json(), args.id);
    let mut key_server = KeyServer::start(ctx, &detail, &mut display).await;
    let mut failures = 0;
    loop {
        if let Some(outcome) = state.outcome(args.submitted) {
            display.finish(&state);
            return outcome;
        }
        display.show(&state);
        let next = tokio::select! {
            event = feed.next() => event,
            Some(heard) = KeyServer::next(&mut key_server) => {
                match heard {
                    Heard::Answered(answered) => display.key(args.id, &answered),
                    Heard::Stopped(ended) => {
                        key_server = None;
                        if let Err(error) = ended {
                            display.warn(&format!(
                                "job {}: stopped releasing its key: {error} (`gantry keys serve` \
                                 releases it)",
                                args.id
                            ));
                        }
                    }
                }
                continue;
            }
        };
        let Some(event) = next else {
            // The API went away: reconnect, then refetch what may have been missed.
            feed = loop {
                failures += 1;
                if failures > MAX_RECONNECTS {
                    return Err(CliError::Unavailable(
                        "lost the API's event stream and could not reconnect".into(),
                    ));
                }
                wait_to_reconnect(failures).await;
                if let Ok(feed) = ctx
                    .api
                    .events("v1/events", &[("job", args.id.to_string())], None)
                    .await
                {
                    break feed;
                }
            };
            state = Watched::from_detail(&fetch().await?);
            continue;
        };
        failures = 0;
        match LiveEventName::parse(&event.event) {
            Some(LiveEventName::Job) => {
                if let Ok(row) = serde_json::from_str::<JobRow>(&event.data)
                    && row.job_id == args.id
                {
                    state.apply_row(&row);
                }
            }
            Some(LiveEventName::Progress) => {
                if let Ok(update) = serde_json::from_str::<ProgressUpdate>(&event.data) {
                    state.apply_progress(&update);
                }
            }
            // Events were missed, or what was shown may be undone: start from the API's state.
            Some(LiveEventName::Lagged | LiveEventName::Reorg) => {
                state = Watched::from_detail(&fetch().await?);
            }
            _ => {}
        }
    }
}

/// The release of the watched job's key to the nodes assigned it, in a task that stops
/// when this is dropped.
struct KeyServer {
    heard: mpsc::UnboundedReceiver<Heard>,
    _stop: DropGuard,
}

/// What the key's task says.
enum Heard {
    /// A request answered (or refused).
    Answered(Result<Released, ReleaseError>),
    /// It stopped: the keys bucket's watch ended.
    Stopped(Result<(), ReleaseError>),
}

impl KeyServer {
    /// Starts releasing the job's key if its spec names a job key derived from the user's
    /// identity; a job whose inputs need the key and cannot have it released here is
    /// warned about, any other is let be.
    async fn start(ctx: &Context, detail: &JobDetail, display: &mut Display) -> Option<Self> {
        let job_id = detail.job.job_id;
        let spec = JobSpec::from_slice(detail.job.spec_text().as_bytes()).ok()?;
        spec.encryption.as_ref()?.job_key.as_ref()?;
        match Self::try_start(ctx, detail).await {
            Ok(server) => Some(server),
            Err(why) => {
                if spec.needs_job_key() {
                    display.warn(&format!(
                        "job {job_id}: its encrypted inputs need the job key and this watch \
                         cannot release it ({why}): run `gantry keys serve` with the job's \
                         submitter key and identity, or the node assigned it gives it back"
                    ));
                }
                None
            }
        }
    }

    async fn try_start(ctx: &Context, detail: &JobDetail) -> Result<Self> {
        let job_id = detail.job.job_id;
        let chain = ctx.chain().await?;
        let account = chain.account()?;
        if !detail
            .job
            .submitter
            .eq_ignore_ascii_case(&account.to_string())
        {
            return Err(CliError::Refused(format!(
                "it was posted by {}, not by {account}",
                detail.job.submitter
            )));
        }
        let identity = ctx.identity().await?;
        let submitter = keys::submitter(chain, &identity.identity)?;
        submitter
            .job_key(job_id, detail.job.spec_text().as_bytes())
            .map_err(|e| {
                CliError::Refused(format!("{e}; your identity is {}", identity.describe()))
            })?;
        let store = keys::keys_store(ctx, chain).await?;
        let stop = CancellationToken::new();
        let (tell, heard) = mpsc::unbounded_channel();
        let stopped = stop.clone();
        tokio::spawn(async move {
            let answered = tell.clone();
            let ended = submitter
                .serve(&store, Some(job_id), stopped, |outcome| {
                    let _ = answered.send(Heard::Answered(outcome));
                })
                .await;
            let _ = tell.send(Heard::Stopped(ended));
        });
        Ok(Self {
            heard,
            _stop: stop.drop_guard(),
        })
    }

    /// What the task says next; never, without one.
    async fn next(server: &mut Option<Self>) -> Option<Heard> {
        match server {
            Some(server) => server.heard.recv().await,
            None => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(status: &str, attempts: u64) -> JobRow {
        JobRow {
            job_id: 7,
            status: status.parse().unwrap(),
            attempts,
            node_id: (attempts > 0).then_some(3),
            ..JobRow::default()
        }
    }

    fn update(attempt: u8, fraction: f64) -> ProgressUpdate {
        ProgressUpdate {
            v: 1,
            job_id: 7,
            node_id: 3,
            attempt,
            progress: Some(fraction),
            epoch: Some(4),
            epochs: Some(10),
            metrics: [("loss".to_string(), 0.21)].into(),
            gpu_utilization: None,
            gpu_memory_used_mib: None,
            elapsed_secs: 60,
            eta_secs: Some(90),
            at_ms: 0,
        }
    }

    #[test]
    fn a_job_is_followed_to_its_end() {
        let mut state = Watched::from_detail(&JobDetail {
            job: row("open", 0),
            ..JobDetail::default()
        });
        assert_eq!(state.message(), "open: waiting for a node");
        assert!(state.outcome(false).is_none());

        state.apply_row(&row("assigned", 1));
        assert_eq!(state.message(), "assigned on node 3, starting");
        state.apply_progress(&update(1, 0.4));
        assert_eq!(state.fraction(), Some(0.4));
        assert_eq!(
            state.message(),
            "running on node 3 · 40% · epoch 4/10 · loss 0.2100 · ETA 1m 30s"
        );
        assert_eq!(state.to_json()["epoch"], 4);

        state.apply_row(&row("submitted", 1));
        assert!(state.outcome(false).is_none());
        assert!(matches!(state.outcome(true), Some(Ok(()))));
        state.apply_row(&row("completed", 1));
        assert!(matches!(state.outcome(false), Some(Ok(()))));
    }

    #[test]
    fn a_requeued_job_drops_the_old_attempt_s_progress() {
        let mut state = Watched::from_detail(&JobDetail {
            job: row("assigned", 1),
            ..JobDetail::default()
        });
        state.apply_progress(&update(1, 0.9));
        state.apply_row(&row("assigned", 2));
        assert_eq!(state.progress, None);
        state.apply_progress(&update(1, 0.95));
        assert_eq!(state.progress, None, "a late report of attempt 1");
        let mut other = update(2, 0.1);
        other.job_id = 8;
        state.apply_progress(&other);
        assert_eq!(state.progress, None, "another job's report");
    }

    #[test]
    fn settling_without_completion_exits_five() {
        for status in ["failed", "cancelled", "expired"] {
            let state = Watched::from_detail(&JobDetail {
                job: row(status, 1),
                ..JobDetail::default()
            });
            let error = state.outcome(true).unwrap().unwrap_err();
            assert_eq!(error.exit_code(), crate::error::exit::NOT_COMPLETED);
            assert_eq!(
                error.to_string(),
                format!("job 7 ended {status}: it did not complete")
            );
        }
    }
}
