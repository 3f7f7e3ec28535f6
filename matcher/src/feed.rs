//! The chain stream, replayed from its start into a [`Projection`] and then followed live.
//! Both services build their view this way: restart = replay. The reading is
//! `gantry_runtime::chain_stream`; this module keeps the position the view has reached
//! and reports the stream's damage: a message that does not decode is skipped, a block
//! that did not arrive whole stalls the view at the last good block (logged, counted,
//! `/readyz` 503, and the feed is not [`caught_up`](Feed::caught_up), so nothing is
//! decided on a view the chain does not have) until the block is published again whole.

use async_nats::jetstream;
use gantry_protocol::chain_stream::{ChainMessage, DecodeError};
use gantry_runtime::chain_stream::{ChainStreamReader, ReadError, StreamReport};
use tokio_util::sync::CancellationToken;

use crate::error::StreamError;
use crate::project::{Applied, ProjectError, Projection};

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
    /// Sequence of the last commit that took effect: where a snapshot is checked against
    /// the stream.
    pub last_commit: Option<u64>,
    report: StreamReport,
}

/// A message as it arrived: decoded, or not decodable (skipped).
#[derive(Debug)]
pub struct Delivered {
    sequence: u64,
    message: Result<ChainMessage, DecodeError>,
}

impl Feed {
    /// Waits for the chain's stream to exist (the indexer creates it), then opens it after
    /// sequence `after` (0: from its first message; else a snapshot's position, whose
    /// commit was at `commit`); `service` names the reader in logs and metrics.
    pub async fn open(
        js: &jetstream::Context,
        chain_id: u64,
        service: &'static str,
        (after, commit): (u64, Option<u64>),
        cancel: &CancellationToken,
    ) -> Result<Option<Self>, StreamError> {
        let Some(reader) = ChainStreamReader::open(js, chain_id, after, cancel).await? else {
            return Ok(None);
        };
        Ok(Some(Self {
            caught_up_at: reader.last_at_open,
            reader,
            applied: after,
            last_commit: commit,
            report: StreamReport::new(service),
        }))
    }

    /// Whether the view holds everything the stream held when the feed opened, and no
    /// block is missing since.
    pub fn caught_up(&self) -> bool {
        self.applied >= self.caught_up_at && self.report.stall().is_none()
    }

    /// The next message, or `None` when the consumer ended.
    pub async fn next(&mut self) -> Option<Result<Delivered, StreamError>> {
        self.reader.next().await.map(delivered)
    }

    /// The next message if one is already buffered.
    pub fn next_ready(&mut self) -> Option<Result<Delivered, StreamError>> {
        self.reader.next_ready().map(delivered)
    }

    /// Applies one message to `projection`. A message that does not decode or that the
    /// projection refuses is reported and changes nothing; only a broken invariant of the
    /// projection itself is an error.
    pub fn apply(
        &mut self,
        projection: &mut Projection,
        delivered: Delivered,
    ) -> Result<Applied, StreamError> {
        let Delivered { sequence, message } = delivered;
        let commit = matches!(message, Ok(ChainMessage::Commit(_)));
        let applied = match message {
            Err(error) => {
                self.report.skipped(sequence, &error);
                Applied::Refused
            }
            Ok(message) => match projection.on_message(message) {
                Ok(applied) => applied,
                Err(ProjectError::Assemble(refused)) => {
                    self.report.refused(sequence, &refused, projection.stall());
                    Applied::Refused
                }
                Err(error) => {
                    return Err(StreamError::BadMessage {
                        sequence,
                        reason: error.to_string(),
                    });
                }
            },
        };
        self.report.settled(sequence, projection.stall());
        // An event counts as applied only with its block's commit: a claim on a job whose
        // posting is still pending must not look decided. Nothing counts while a block is
        // missing.
        if applied != Applied::Held && projection.is_idle() {
            self.applied = sequence;
            if commit && applied == Applied::Changed {
                self.last_commit = Some(sequence);
            }
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
            message: Err(source),
        }),
        Err(ReadError::Nats(e)) => Err(StreamError::Nats(e)),
    }
}
