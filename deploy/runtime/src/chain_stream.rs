//! Reading a chain's stream in order: one ordered consumer (recreated by the client after a
//! gap or a lost connection) from a start sequence, each message decoded by
//! `gantry_protocol::chain_stream`. The matcher, the keeper and the API read it here and
//! fold what it yields through a `BlockAssembler`, and tell a [`StreamReport`] what the
//! stream did: a message that does not decode is skipped, a damaged block stalls the
//! reader (it keeps its last good state, says so and waits for the block), and neither
//! ends the process.
//!
//! ```text
//!  ChainStreamReader::next ──(seq, ChainMessage)──▶ BlockAssembler::push ──Ok──▶ apply
//!         │ ReadError::Decode                              │ Err
//!         ▼                                                ▼
//!  StreamReport::skipped (warn, counted)     StreamReport::refused (error/warn, counted;
//!                                            stalled: gauge 1, readiness false)
//!                             StreamReport::settled after each message (whole again: gauge 0)
//! ```

use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use gantry_protocol::chain_stream::{AssembleError, ChainMessage, DecodeError, Stall};
use gantry_protocol::names;
use tokio_util::sync::CancellationToken;

use crate::health::NotReady;
use crate::metrics;
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

/// What the chain stream holds at one sequence, for a stored state (a snapshot, a
/// projection) that says it stands at a block's commit there.
#[derive(Debug)]
pub enum AtSequence {
    /// A commit (the caller compares its block and hash).
    Commit(gantry_protocol::envelope::BlockCommit),
    /// Another kind of message.
    Other,
    /// No message there (never written, or deleted).
    Missing,
}

/// The chain stream's message at `sequence` in `stream` (of chain `chain_id`), read by
/// sequence. An error is NATS failing to answer (`NatsError`) or a message that does not
/// decode (`DecodeError`): neither says the stored state is not of this stream.
pub async fn at_sequence<I>(
    stream: &jetstream::stream::Stream<I>,
    chain_id: u64,
    sequence: u64,
) -> Result<AtSequence, AtSequenceError> {
    use jetstream::stream::RawMessageErrorKind;
    let message = match stream.get_raw_message(sequence).await {
        Ok(message) => message,
        Err(e) if e.kind() == RawMessageErrorKind::NoMessageFound => {
            return Ok(AtSequence::Missing);
        }
        Err(e) => return Err(NatsError::new("the chain stream's message", e).into()),
    };
    match ChainMessage::decode(chain_id, &message.subject, &message.payload) {
        Ok(ChainMessage::Commit(commit)) => Ok(AtSequence::Commit(commit)),
        Ok(_) => Ok(AtSequence::Other),
        Err(source) => Err(AtSequenceError::Decode { sequence, source }),
    }
}

/// Why [`at_sequence`] could not say.
#[derive(Debug, thiserror::Error)]
pub enum AtSequenceError {
    #[error(transparent)]
    Nats(#[from] NatsError),
    #[error("the chain stream's message {sequence} does not read")]
    Decode {
        sequence: u64,
        #[source]
        source: DecodeError,
    },
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

/// What one consumer of the chain stream reports as it folds it: skipped messages,
/// refused blocks and stalls, as logs, the `gantry_chain_stream_*` metrics (labelled with
/// `service`) and the process's readiness (not ready while stalled). It keeps no state
/// the assembler does not: it mirrors `BlockAssembler::stall` after each message.
#[derive(Debug)]
pub struct StreamReport {
    service: &'static str,
    stall: Option<Stall>,
    not_ready: NotReady,
}

impl StreamReport {
    /// A report for the consumer `service` (a metrics label: matcher, liveness, api).
    pub fn new(service: &'static str) -> Self {
        metrics::chain_stream_stalled(service, false);
        metrics::chain_stream_missing_block(service, 0);
        Self {
            service,
            stall: None,
            not_ready: NotReady::new(),
        }
    }

    /// The stall the consumer is in, if any.
    pub fn stall(&self) -> Option<&Stall> {
        self.stall.as_ref()
    }

    /// A message that does not decode: not block data a reader could use, so it is
    /// logged, counted and skipped (if it was a block's event, its commit finds it
    /// missing).
    pub fn skipped(&self, sequence: u64, error: &DecodeError) {
        let reason = match error {
            DecodeError::ForeignSubject { .. } => "foreign_subject",
            DecodeError::Payload { .. } => "undecodable",
        };
        metrics::chain_stream_skipped(self.service, reason);
        tracing::warn!(
            service = self.service,
            sequence,
            error = %error_chain(error),
            "skipping a chain stream message that does not decode"
        );
    }

    /// A message the assembler refused (nothing of it was applied); `stall` is the
    /// assembler's state after it.
    pub fn refused(&mut self, sequence: u64, error: &AssembleError, stall: Option<Stall>) {
        let block = error.block();
        if error.is_damage() {
            metrics::chain_stream_damaged_block(self.service, error.kind());
            tracing::error!(
                service = self.service,
                sequence,
                block,
                kind = error.kind(),
                %error,
                missing = stall.as_ref().map(|s| s.missing),
                "chain stream block damaged: not applied; the reader keeps its last good \
                 state and waits until the block is published again whole"
            );
        } else {
            metrics::chain_stream_skipped(self.service, error.kind());
            tracing::warn!(
                service = self.service,
                sequence,
                block,
                kind = error.kind(),
                %error,
                "chain stream message not applied"
            );
        }
        self.settled(sequence, stall);
    }

    /// The assembler's state after message `sequence`: a stall starts, changes or ends
    /// here (logged, the gauges and readiness follow).
    pub fn settled(&mut self, sequence: u64, stall: Option<Stall>) {
        if stall == self.stall {
            return;
        }
        match &stall {
            Some(now) => {
                metrics::chain_stream_stalled(self.service, true);
                metrics::chain_stream_missing_block(self.service, now.missing);
                self.not_ready.set(format!(
                    "{}: chain stream stalled at sequence {sequence}: block {} has not \
                     arrived whole ({})",
                    self.service, now.missing, now.damage
                ));
            }
            None => {
                metrics::chain_stream_stalled(self.service, false);
                metrics::chain_stream_missing_block(self.service, 0);
                self.not_ready.clear();
                tracing::info!(
                    service = self.service,
                    sequence,
                    "chain stream whole again: the missing blocks arrived; reading on"
                );
            }
        }
        self.stall = stall;
    }
}

/// An error with its sources, for a log line that names them all.
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
