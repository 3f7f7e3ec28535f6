//! The chain stream, replayed from its start into a [`Projection`] and then followed live.
//! Both services build their view this way: restart = replay. The reading is
//! `gantry_runtime::chain_stream`; this module keeps the position the view has reached.

use async_nats::jetstream;
use gantry_protocol::chain_stream::ChainMessage;
use gantry_runtime::chain_stream::{ChainStreamReader, ReadError};
use tokio_util::sync::CancellationToken;

use crate::error::StreamError;
use crate::project::{Applied, Projection};

/// The stream's messages in order.
#[derive(Debug)]
pub struct Feed {
    reader: ChainStreamReader,
    /// The stream's last sequence when the feed opened: the view is complete (caught up)
    /// once it has applied this far.
    pub caught_up_at: u64,
    /// Sequence of the last message that took effect (a commit, retraction or watermark;
    /// events take effect with their commit).
    pub applied: u64,
}

/// A message as it arrived: decoded, or not decodable (which stops the projection).
#[derive(Debug)]
pub struct Delivered {
    sequence: u64,
    message: Result<ChainMessage, String>,
}

impl Feed {
    /// Waits for the chain's stream to exist (the indexer creates it), then opens it from
    /// its first message.
    pub async fn open(
        js: &jetstream::Context,
        chain_id: u64,
        cancel: &CancellationToken,
    ) -> Result<Option<Self>, StreamError> {
        let Some(reader) = ChainStreamReader::open(js, chain_id, 0, cancel).await? else {
            return Ok(None);
        };
        Ok(Some(Self {
            caught_up_at: reader.last_at_open,
            reader,
            applied: 0,
        }))
    }

    /// Whether the view holds everything the stream held when the feed opened.
    pub fn caught_up(&self) -> bool {
        self.applied >= self.caught_up_at
    }

    /// The next message, or `None` when the consumer ended.
    pub async fn next(&mut self) -> Option<Result<Delivered, StreamError>> {
        self.reader.next().await.map(delivered)
    }

    /// The next message if one is already buffered.
    pub fn next_ready(&mut self) -> Option<Result<Delivered, StreamError>> {
        self.reader.next_ready().map(delivered)
    }

    /// Applies one message to `projection`.
    pub fn apply(
        &mut self,
        projection: &mut Projection,
        delivered: Delivered,
    ) -> Result<Applied, StreamError> {
        let Delivered { sequence, message } = delivered;
        let bad = |reason: String| StreamError::BadMessage { sequence, reason };
        let applied = projection
            .on_message(message.map_err(bad)?)
            .map_err(|e| bad(e.to_string()))?;
        // An event counts as applied only with its block's commit: a claim on a job whose
        // posting is still pending must not look decided.
        if applied != Applied::Held {
            self.applied = sequence;
        }
        Ok(applied)
    }
}

fn delivered(read: Result<(u64, ChainMessage), ReadError>) -> Result<Delivered, StreamError> {
    match read {
        Ok((sequence, message)) => Ok(Delivered {
            sequence,
            message: Ok(message),
        }),
        Err(ReadError::Decode { sequence, source }) => Ok(Delivered {
            sequence,
            message: Err(error_chain(&source)),
        }),
        Err(ReadError::Nats(e)) => Err(StreamError::Nats(e)),
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
