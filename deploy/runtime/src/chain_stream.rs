//! Reading a chain's stream in order: one ordered consumer (recreated by the client after a
//! gap or a lost connection) from a start sequence, each message decoded by
//! `gantry_protocol::chain_stream`. The matcher, the keeper and the API read it here and
//! fold what it yields through a `BlockAssembler`.

use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use gantry_protocol::chain_stream::{ChainMessage, DecodeError};
use gantry_protocol::names;
use tokio_util::sync::CancellationToken;

use crate::nats::{NatsError, wait_for_stream};

/// Why the next message could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Nats(#[from] NatsError),
    #[error("message {sequence}")]
    Decode {
        sequence: u64,
        #[source]
        source: DecodeError,
    },
}

/// The messages of one chain's stream, in order.
pub struct ChainStreamReader {
    chain_id: u64,
    messages: consumer::pull::Ordered,
    /// The stream's last sequence when the reader opened.
    pub last_at_open: u64,
}

impl std::fmt::Debug for ChainStreamReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainStreamReader")
            .field("chain_id", &self.chain_id)
            .field("last_at_open", &self.last_at_open)
            .finish_non_exhaustive()
    }
}

impl ChainStreamReader {
    /// Waits for the stream of `chain_id` to exist (the indexer creates it), then opens it
    /// after sequence `after` (0: from the start). `None` when `cancel` fired first.
    pub async fn open(
        js: &jetstream::Context,
        chain_id: u64,
        after: u64,
        cancel: &CancellationToken,
    ) -> Result<Option<Self>, NatsError> {
        let Some(mut stream) =
            wait_for_stream(js, &names::stream_name(chain_id), cancel, |_| {}).await
        else {
            return Ok(None);
        };
        let last_at_open = stream
            .info()
            .await
            .map_err(|e| NatsError::new("stream info", e))?
            .state
            .last_sequence;
        let messages = ordered_after(&stream, after).await?;
        Ok(Some(Self {
            chain_id,
            messages,
            last_at_open,
        }))
    }

    /// The next message with its stream sequence; `None` when the consumer ended.
    pub async fn next(&mut self) -> Option<Result<(u64, ChainMessage), ReadError>> {
        let message = self.messages.next().await?;
        Some(self.decode(message))
    }

    /// The next message if one is already buffered.
    pub fn next_ready(&mut self) -> Option<Result<(u64, ChainMessage), ReadError>> {
        use futures::FutureExt;
        self.next().now_or_never().flatten()
    }

    fn decode(
        &self,
        message: Result<jetstream::Message, consumer::pull::OrderedError>,
    ) -> Result<(u64, ChainMessage), ReadError> {
        let message = message.map_err(|e| NatsError::new("ordered consumer", e))?;
        let sequence = message
            .info()
            .map_err(|e| NatsError::new("message info", e))?
            .stream_sequence;
        let decoded =
            ChainMessage::decode(self.chain_id, message.subject.as_str(), &message.payload)
                .map_err(|source| ReadError::Decode { sequence, source })?;
        Ok((sequence, decoded))
    }
}

/// The messages of `stream` after sequence `after`, in order: an ordered consumer, nothing
/// to clean up, recreated by the client after a gap or a lost connection.
pub async fn ordered_after(
    stream: &jetstream::stream::Stream,
    after: u64,
) -> Result<consumer::pull::Ordered, NatsError> {
    stream
        .create_consumer(consumer::pull::OrderedConfig {
            deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                start_sequence: after + 1,
            },
            ..Default::default()
        })
        .await
        .map_err(|e| NatsError::new("ordered consumer", e))?
        .messages()
        .await
        .map_err(|e| NatsError::new("ordered consumer messages", e))
}
