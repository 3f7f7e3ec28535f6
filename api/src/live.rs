//! The live feed: what the projection and the reports consumer have just committed, fanned
//! out to Server-Sent-Event clients (`/v1/events`, `/v1/jobs/{id}/logs?follow=true`).
//! Sent only after the transaction commits, so a client that refetches on an event sees
//! at least what the event says. A client too slow to keep up gets `lagged` and refetches.

use std::sync::Arc;

use gantry_protocol::api::{JobRow, LiveEventName, NodeView};
use gantry_protocol::jobs::{LogLine, ProgressUpdate};
use serde::Serialize;
use tokio::sync::broadcast;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// Events buffered per client before it lags.
const CAPACITY: usize = 4096;

/// One committed change.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum LiveEvent {
    /// Boxed, as a node: a row is many times the size of the other events.
    Job(Box<JobRow>),
    /// The node as listed (with its reputation and heartbeat age).
    Node(Box<NodeView>),
    Progress(ProgressUpdate),
    /// A log line with its stream sequence (to join a stored tail without gaps).
    Log {
        seq: u64,
        line: LogLine,
    },
    Block(BlockInfo),
    /// Blocks after `common_ancestor` were orphaned: what a client holds may be undone;
    /// refetch.
    Reorg {
        #[serde(rename = "commonAncestor")]
        common_ancestor: u64,
    },
}

/// A block as the feed names it.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct BlockInfo {
    pub number: u64,
    pub timestamp: u64,
}

impl LiveEvent {
    /// The SSE event name.
    pub fn name(&self) -> &'static str {
        match self {
            LiveEvent::Job(_) => LiveEventName::Job,
            LiveEvent::Node(_) => LiveEventName::Node,
            LiveEvent::Progress(_) => LiveEventName::Progress,
            LiveEvent::Log { .. } => LiveEventName::Log,
            LiveEvent::Block(_) => LiveEventName::Block,
            LiveEvent::Reorg { .. } => LiveEventName::Reorg,
        }
        .as_str()
    }
}

/// The sending side, shared by the projection, the reports consumer and the handlers.
#[derive(Debug, Clone)]
pub struct Live {
    sender: broadcast::Sender<Arc<LiveEvent>>,
    /// Fired at shutdown: every open event stream ends (else the server's graceful
    /// shutdown would wait on them for ever).
    closed: CancellationToken,
}

impl Default for Live {
    fn default() -> Self {
        Self::closing_on(CancellationToken::new())
    }
}

impl Live {
    /// A feed whose streams end when `shutdown` fires.
    pub fn closing_on(shutdown: CancellationToken) -> Self {
        Self {
            sender: broadcast::channel(CAPACITY).0,
            closed: shutdown,
        }
    }

    /// Resolves when the feed's streams are to end.
    pub fn closed(&self) -> WaitForCancellationFutureOwned {
        self.closed.clone().cancelled_owned()
    }

    /// Publishes to whoever listens (nobody listening is fine).
    pub fn send(&self, event: LiveEvent) {
        let _ = self.sender.send(Arc::new(event));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<LiveEvent>> {
        self.sender.subscribe()
    }
}
