//! The bus side: the only module that talks to NATS JetStream. The stream is also the
//! indexer's checkpoint: where to resume is read back from its tail.
//!
//! Every append is an atomic batch (ADR-50): its first message names the stream's last
//! sequence as this writer read it, its last one commits it, and the server stores all of
//! it or nothing. A block's events and its commit travel in one batch, so a commit lands
//! only right after its own events, and a batch built on a tail that moved is refused as
//! a whole, however late it arrives.

use async_nats::HeaderMap;
use async_nats::header::{
    NATS_BATCH_COMMIT, NATS_BATCH_COMMIT_FINAL, NATS_BATCH_ID, NATS_BATCH_SEQUENCE,
    NATS_EXPECTED_LAST_SEQUENCE, NATS_MESSAGE_ID,
};
use async_nats::jetstream::context::{PublishError, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{self, LastRawMessageErrorKind};
use async_nats::jetstream::{self, Context, ErrorCode};
use bytes::Bytes;
use gantry_protocol::chain_stream::ChainMessage;
use gantry_protocol::envelope::{BlockCommit, FinalityWatermark, Retraction};
use gantry_protocol::{names, storage};
use serde::de::DeserializeOwned;

use crate::error::StreamError;
use crate::metrics;
use crate::window::BlockRef;

/// Messages in one atomic batch at most: nats-server's default `max_batch_size`.
pub const MAX_BATCH: usize = 1_000;

/// One chain's stream.
#[derive(Debug, Clone)]
pub struct ChainStream {
    js: Context,
    stream: stream::Stream,
    chain_id: u64,
}

/// What the stream's tail says about where to resume, as of one message: the last one
/// when it was read. Nothing stored after it is looked at.
#[derive(Debug, Clone, Default)]
pub struct Tail {
    /// Sequence of the last message; 0 for an empty stream.
    pub last_sequence: u64,
    /// The newest block commit and its sequence.
    pub last_commit: Option<(BlockRef, u64)>,
    /// The newest retraction and its sequence.
    pub last_retraction: Option<(Retraction, u64)>,
    /// The newest finality watermark.
    pub last_finality: Option<FinalityWatermark>,
    /// Events of a block that was not committed (a block too large for one batch whose
    /// writer stopped between batches, or a stream written before batches): the block and
    /// how many of its events are in the stream.
    pub partial: Option<(BlockRef, u64)>,
}

/// One message ready to append.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub subject: String,
    pub headers: HeaderMap,
    pub payload: Bytes,
}

impl ChainStream {
    /// Opens (creating if needed, with `replicas`) the append-only stream of `chain_id`. A
    /// stream created before atomic batches is updated to allow them, keeping the rest of
    /// its configuration (deny delete and purge included).
    pub async fn open(js: Context, chain_id: u64, replicas: usize) -> Result<Self, StreamError> {
        let config = storage::chain_stream(chain_id, replicas);
        let mut stream = js.get_or_create_stream(config).await.map_err(nats)?;
        let existing = stream.cached_info().config.clone();
        if existing.num_replicas != replicas {
            tracing::warn!(
                stream = %existing.name,
                existing = existing.num_replicas,
                configured = replicas,
                "the chain stream exists with another replica count; change it with `nats stream edit --replicas`"
            );
        }
        if !existing.allow_atomic_publish {
            tracing::info!(stream = %existing.name, "allowing atomic batches on the chain stream");
            let migrated = stream::Config {
                allow_atomic_publish: true,
                ..existing
            };
            js.update_stream(&migrated).await.map_err(|e| {
                metrics::stream_error("refused");
                StreamError::Refused(format!(
                    "the chain stream {} does not allow atomic batches and could not be updated \
                     (the indexer's user needs `$JS.API.STREAM.UPDATE.{}`, or an operator sets \
                     `allow_atomic` on it): {e}",
                    migrated.name, migrated.name
                ))
            })?;
            stream = js
                .get_stream(names::stream_name(chain_id))
                .await
                .map_err(nats)?;
        }
        Ok(Self {
            js,
            stream,
            chain_id,
        })
    }

    pub fn chain_id(&self) -> u64 {
        self.chain_id
    }

    /// Reads what resuming needs from the end of the stream. One read fixes the tail: the
    /// last message and its sequence. The newest commit, retraction and watermark are then
    /// looked up at or below that sequence; one stored after it means another writer is
    /// appending, and the read is refused as a conflict rather than mixed with it.
    pub async fn tail(&self) -> Result<Tail, StreamError> {
        let last = match self
            .stream
            .get_last_raw_message_by_subject(&names::stream_subjects(self.chain_id))
            .await
        {
            Ok(message) => message,
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {
                return Ok(Tail::default());
            }
            Err(e) => return Err(nats(e)),
        };
        let last_sequence = last.sequence;
        let message = ChainMessage::decode(self.chain_id, &last.subject, &last.payload)
            .map_err(|e| StreamError::Corrupt(e.to_string()))?;

        let mut tail = Tail {
            last_sequence,
            ..Tail::default()
        };
        let mut partial_block = None;
        match message {
            ChainMessage::Commit(commit) => {
                tail.last_commit = Some((commit_ref(&commit), last_sequence))
            }
            ChainMessage::Retraction(retraction) => {
                tail.last_retraction = Some((retraction, last_sequence));
            }
            ChainMessage::Finality(watermark) => tail.last_finality = Some(watermark),
            ChainMessage::Event(event) => {
                partial_block = Some(BlockRef {
                    number: event.block_number,
                    hash: event.block_hash,
                });
            }
        }
        let mut finality_sequence = tail.last_finality.as_ref().map(|_| last_sequence);
        if tail.last_commit.is_none() {
            tail.last_commit = self
                .last_on::<BlockCommit>(&names::block_commits(self.chain_id), last_sequence)
                .await?
                .map(|(commit, seq)| (commit_ref(&commit), seq));
        }
        if tail.last_retraction.is_none() {
            tail.last_retraction = self
                .last_on(&names::retraction(self.chain_id), last_sequence)
                .await?;
        }
        if tail.last_finality.is_none() {
            let found = self
                .last_on::<FinalityWatermark>(&names::finality(self.chain_id), last_sequence)
                .await?;
            finality_sequence = found.as_ref().map(|(_, seq)| *seq);
            tail.last_finality = found.map(|(watermark, _)| watermark);
        }

        // Retractions and watermarks go out between blocks, never inside one: the messages
        // after the newest of them and the newest commit are the events of a block that
        // was never committed.
        if let Some(block) = partial_block {
            let settled = [
                tail.last_commit.map(|(_, seq)| seq),
                tail.last_retraction.as_ref().map(|(_, seq)| *seq),
                finality_sequence,
            ]
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(0);
            tail.partial = Some((block, last_sequence - settled));
        }
        Ok(tail)
    }

    /// Every message from the first through sequence `through`, in order, decoded; a
    /// message that does not decode is `None` (a reader skips it).
    pub async fn read_through(
        &self,
        through: u64,
    ) -> Result<Vec<(u64, Option<ChainMessage>)>, StreamError> {
        use futures::StreamExt;
        let mut out = Vec::with_capacity(through as usize);
        if through == 0 {
            return Ok(out);
        }
        let consumer = self
            .stream
            .create_consumer(jetstream::consumer::pull::OrderedConfig::default())
            .await
            .map_err(nats)?;
        let mut messages = consumer.messages().await.map_err(nats)?;
        while let Some(message) = messages.next().await {
            let message = message.map_err(nats)?;
            let sequence = message.info().map_err(nats)?.stream_sequence;
            let decoded =
                ChainMessage::decode(self.chain_id, message.subject.as_str(), &message.payload)
                    .ok();
            out.push((sequence, decoded));
            if sequence >= through {
                break;
            }
        }
        Ok(out)
    }

    /// The latest commit of block `number` stored at or below `at_most`, with its
    /// sequence; a conflict when a newer one was stored after `at_most`.
    pub async fn commit_of(
        &self,
        number: u64,
        at_most: u64,
    ) -> Result<Option<(BlockCommit, u64)>, StreamError> {
        self.last_on(&names::block_commit(self.chain_id, number), at_most)
            .await
    }

    /// A publisher that appends after sequence `last_sequence`, in batches of at most
    /// `max_batch` messages.
    pub fn publisher(&self, last_sequence: u64, max_batch: usize) -> Publisher {
        let client = self.js.client();
        // The inbox's unique token names this publisher's batches: no other writer, and no
        // batch this one abandoned, shares an id with them.
        let inbox = client.new_inbox();
        let writer = inbox.rsplit('.').next().unwrap_or(&inbox).to_owned();
        Publisher {
            js: self.js.clone(),
            client,
            chain_id: self.chain_id,
            next_sequence: last_sequence + 1,
            max_batch: max_batch.clamp(1, MAX_BATCH),
            writer,
            batches: 0,
        }
    }

    /// The last message on `subject`, which must be at or below `at_most`.
    async fn last_on<T: DeserializeOwned>(
        &self,
        subject: &str,
        at_most: u64,
    ) -> Result<Option<(T, u64)>, StreamError> {
        match self.stream.get_last_raw_message_by_subject(subject).await {
            Ok(message) if message.sequence > at_most => {
                metrics::stream_error("conflict");
                Err(StreamError::Conflict(format!(
                    "{subject} has sequence {} after the tail {at_most} just read",
                    message.sequence
                )))
            }
            Ok(message) => Ok(Some((decode(&message.payload)?, message.sequence))),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(nats(e)),
        }
    }
}

/// Appends messages in order, one atomic batch at a time. Each batch's first message
/// carries `Nats-Expected-Last-Sequence`: the batch lands right after what this publisher
/// last appended, or not at all. Each message also names its own stream position
/// (`Nats-Msg-Id`), so a retry of a batch that did land is refused too. The next batch is
/// sent only once the previous one is acknowledged: nothing is ever pipelined past a
/// batch that may have been refused, so at most one batch of a deposed writer can still
/// be on its way, and it is fenced as a whole.
#[derive(Debug)]
pub struct Publisher {
    js: Context,
    client: async_nats::Client,
    chain_id: u64,
    next_sequence: u64,
    max_batch: usize,
    /// Unique to this publisher; with `batches`, the batch ids.
    writer: String,
    batches: u64,
}

impl Publisher {
    /// Sequence the next message will get.
    pub fn next_sequence(&self) -> u64 {
        self.next_sequence
    }

    /// The most messages one batch holds.
    pub fn max_batch(&self) -> usize {
        self.max_batch
    }

    /// Appends `messages`, in order, in as few batches as the batch size allows; returns
    /// once they are all stored. Messages that do not fit one batch are cut into several,
    /// each fenced on the one before; a caller that keeps a block's events and commit in
    /// one call of at most [`Publisher::max_batch`] messages gets them in one batch.
    pub async fn append(&mut self, messages: Vec<Outgoing>) -> Result<(), StreamError> {
        let mut messages = messages.into_iter().peekable();
        while messages.peek().is_some() {
            let batch: Vec<Outgoing> = messages.by_ref().take(self.max_batch).collect();
            self.append_batch(batch).await?;
        }
        Ok(())
    }

    async fn append_batch(&mut self, batch: Vec<Outgoing>) -> Result<(), StreamError> {
        let first = self.next_sequence;
        let count = batch.len() as u64;
        self.batches += 1;
        let batch_id = format!("{}.{}", self.writer, self.batches);
        let mut commit = None;
        for (position, message) in (1..).zip(batch) {
            let mut headers = message.headers;
            headers.insert(
                NATS_MESSAGE_ID,
                names::message_id(self.chain_id, first + position - 1).as_str(),
            );
            headers.insert(NATS_BATCH_ID, batch_id.as_str());
            headers.insert(NATS_BATCH_SEQUENCE, position.to_string().as_str());
            if position == 1 {
                headers.insert(
                    NATS_EXPECTED_LAST_SEQUENCE,
                    (first - 1).to_string().as_str(),
                );
            }
            if position < count {
                // Staged by the server without an answer; the commit answers for the batch.
                self.client
                    .publish_with_headers(message.subject, headers, message.payload)
                    .await
                    .map_err(nats)?;
            } else {
                headers.insert(NATS_BATCH_COMMIT, NATS_BATCH_COMMIT_FINAL);
                let publish = PublishMessage::build()
                    .payload(message.payload)
                    .headers(headers);
                commit = Some(
                    self.js
                        .send_publish(message.subject, publish)
                        .await
                        .map_err(publish_error)?,
                );
            }
        }
        let Some(commit) = commit else {
            return Ok(());
        };
        let ack = commit.await.map_err(publish_error)?;
        let last = first + count - 1;
        if ack.sequence != last {
            metrics::stream_error("conflict");
            return Err(StreamError::Conflict(format!(
                "batch meant for sequences {first}..={last} was stored up to {} (duplicate: {})",
                ack.sequence, ack.duplicate
            )));
        }
        self.next_sequence = last + 1;
        Ok(())
    }
}

fn commit_ref(commit: &BlockCommit) -> BlockRef {
    BlockRef {
        number: commit.block_number,
        hash: commit.block_hash,
    }
}

fn publish_error(e: PublishError) -> StreamError {
    let code = std::error::Error::source(&e)
        .and_then(|source| source.downcast_ref::<jetstream::Error>())
        .map(jetstream::Error::error_code);
    match (e.kind(), code) {
        (PublishErrorKind::WrongLastSequence | PublishErrorKind::WrongLastMessageId, _)
        | (_, Some(ErrorCode::ATOMIC_PUBLISH_CONTAINS_DUPLICATE_MESSAGE)) => {
            metrics::stream_error("conflict");
            StreamError::Conflict(e.to_string())
        }
        (
            _,
            Some(
                ErrorCode::ATOMIC_PUBLISH_DISABLED
                | ErrorCode::ATOMIC_PUBLISH_TOO_LARGE_BATCH
                | ErrorCode::ATOMIC_PUBLISH_UNSUPPORTED_HEADER,
            ),
        ) => {
            metrics::stream_error("refused");
            StreamError::Refused(e.to_string())
        }
        _ => nats(e),
    }
}

fn nats(e: impl std::fmt::Display) -> StreamError {
    metrics::stream_error("nats");
    StreamError::Nats(e.to_string())
}

fn decode<T: DeserializeOwned>(payload: &[u8]) -> Result<T, StreamError> {
    serde_json::from_slice(payload).map_err(|e| StreamError::Corrupt(e.to_string()))
}
