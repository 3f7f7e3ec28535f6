//! The chain stream, replayed from its start into a [`Projection`] and then followed live.
//! Both services build their view this way: restart = replay.

use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use gantry_protocol::chain_stream::ChainMessage;
use gantry_protocol::names;
use tokio_util::sync::CancellationToken;

use crate::error::StreamError;
use crate::project::{Applied, Projection};

/// The stream's messages in order, through an ordered consumer (which re-creates itself
/// after a gap or a lost connection).
pub struct Feed {
    messages: consumer::pull::Ordered,
    /// The stream's last sequence when the feed opened: the view is complete (caught up)
    /// once it has applied this far.
    pub caught_up_at: u64,
    /// Sequence of the last message that took effect (a commit, retraction or watermark;
    /// events take effect with their commit).
    pub applied: u64,
    chain_id: u64,
}

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("caught_up_at", &self.caught_up_at)
            .field("applied", &self.applied)
            .finish_non_exhaustive()
    }
}

impl Feed {
    /// Waits for the chain's stream to exist (the indexer creates it), then opens it from
    /// its first message.
    pub async fn open(
        js: &jetstream::Context,
        chain_id: u64,
        cancel: &CancellationToken,
    ) -> Result<Option<Self>, StreamError> {
        let name = names::stream_name(chain_id);
        let mut stream = loop {
            match js.get_stream(&name).await {
                Ok(stream) => break stream,
                Err(e) => {
                    tracing::info!(stream = %name, error = %e, "waiting for the chain stream");
                    tokio::select! {
                        () = cancel.cancelled() => return Ok(None),
                        () = tokio::time::sleep(Duration::from_millis(500)) => {}
                    }
                }
            }
        };
        let caught_up_at = stream
            .info()
            .await
            .map_err(|e| StreamError::nats("stream info", e))?
            .state
            .last_sequence;
        let messages = stream
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: names::stream_subjects(chain_id),
                deliver_policy: consumer::DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .map_err(|e| StreamError::nats("ordered consumer", e))?
            .messages()
            .await
            .map_err(|e| StreamError::nats("ordered consumer messages", e))?;
        Ok(Some(Self {
            messages,
            caught_up_at,
            applied: 0,
            chain_id,
        }))
    }

    /// Whether the view holds everything the stream held when the feed opened.
    pub fn caught_up(&self) -> bool {
        self.applied >= self.caught_up_at
    }

    /// The next message, or `None` when the consumer ended.
    pub async fn next(&mut self) -> Option<Result<jetstream::Message, StreamError>> {
        self.messages
            .next()
            .await
            .map(|m| m.map_err(|e| StreamError::nats("ordered consumer", e)))
    }

    /// The next message if one is already buffered.
    pub fn next_ready(&mut self) -> Option<Result<jetstream::Message, StreamError>> {
        use futures::FutureExt;
        self.next().now_or_never().flatten()
    }

    /// Applies one message to `projection`.
    pub fn apply(
        &mut self,
        projection: &mut Projection,
        message: &jetstream::Message,
    ) -> Result<Applied, StreamError> {
        let subject = message.subject.as_str();
        let sequence = message
            .info()
            .map(|info| info.stream_sequence)
            .map_err(|e| StreamError::nats("message info", e))?;
        let bad = |reason: String| StreamError::BadMessage {
            sequence,
            subject: subject.to_owned(),
            reason,
        };
        let decoded = ChainMessage::decode(self.chain_id, subject, &message.payload)
            .map_err(|e| bad(error_chain(&e)))?;
        let applied = projection
            .on_message(decoded)
            .map_err(|e| bad(e.to_string()))?;
        // An event counts as applied only with its block's commit: a claim on a job whose
        // posting is still pending must not look decided.
        if applied != Applied::Held {
            self.applied = sequence;
        }
        Ok(applied)
    }
}

/// An error with its sources, for a message that names them all.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
