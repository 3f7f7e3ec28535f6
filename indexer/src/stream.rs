//! The bus side: the only module that talks to NATS JetStream. The stream is also the
//! indexer's checkpoint: where to resume is read back from its tail.

use std::collections::VecDeque;

use async_nats::HeaderMap;
use async_nats::jetstream::context::{PublishAckFuture, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{self, LastRawMessageErrorKind};
use async_nats::jetstream::{self, Context};
use bytes::Bytes;
use gantry_protocol::envelope::{BlockCommit, EventEnvelope, FinalityWatermark, Retraction};
use gantry_protocol::{names, storage};
use serde::de::DeserializeOwned;

use crate::error::StreamError;
use crate::metrics;
use crate::window::BlockRef;

/// One chain's stream.
#[derive(Debug, Clone)]
pub struct ChainStream {
    js: Context,
    stream: stream::Stream,
    chain_id: u64,
}

/// What the stream's tail says about where to resume.
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
    /// Events of a block that was not committed (the writer stopped mid-block): the block
    /// and how many of its events are in the stream.
    pub partial: Option<(BlockRef, u64)>,
}

impl ChainStream {
    /// Opens (creating if needed, with `replicas`) the append-only stream of `chain_id`.
    pub async fn open(js: Context, chain_id: u64, replicas: usize) -> Result<Self, StreamError> {
        let config = storage::chain_stream(chain_id, replicas);
        let stream = js.get_or_create_stream(config).await.map_err(nats)?;
        let existing = stream.cached_info().config.num_replicas;
        if existing != replicas {
            tracing::warn!(
                stream = %names::stream_name(chain_id),
                existing,
                configured = replicas,
                "the chain stream exists with another replica count; change it with `nats stream edit --replicas`"
            );
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

    /// Reads what resuming needs from the end of the stream.
    pub async fn tail(&self) -> Result<Tail, StreamError> {
        let last_sequence = self
            .stream
            .get_info()
            .await
            .map_err(nats)?
            .state
            .last_sequence;
        if last_sequence == 0 {
            return Ok(Tail::default());
        }
        let last_commit = self
            .last_on::<BlockCommit>(&names::block_commits(self.chain_id))
            .await?
            .map(|(c, seq)| {
                (
                    BlockRef {
                        number: c.block_number,
                        hash: c.block_hash,
                    },
                    seq,
                )
            });
        let last_retraction = self
            .last_on::<Retraction>(&names::retraction(self.chain_id))
            .await?;
        let last_finality = self
            .last_on::<FinalityWatermark>(&names::finality(self.chain_id))
            .await?;

        // Retractions and watermarks go out between blocks, never inside one: the messages
        // after the newest of them and the newest commit are the events of a block that
        // was never committed.
        let settled = [
            last_commit.map(|(_, seq)| seq),
            last_retraction.as_ref().map(|(_, seq)| *seq),
            last_finality.as_ref().map(|(_, seq)| *seq),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0);
        let partial = if settled < last_sequence {
            let last = self
                .stream
                .get_raw_message(last_sequence)
                .await
                .map_err(nats)?;
            let event: EventEnvelope = decode(&last.payload)?;
            Some((
                BlockRef {
                    number: event.block_number,
                    hash: event.block_hash,
                },
                last_sequence - settled,
            ))
        } else {
            None
        };
        let last_finality = last_finality.map(|(f, _)| f);
        Ok(Tail {
            last_sequence,
            last_commit,
            last_retraction,
            last_finality,
            partial,
        })
    }

    /// The latest commit of block `number`, with its sequence.
    pub async fn commit_of(&self, number: u64) -> Result<Option<(BlockCommit, u64)>, StreamError> {
        self.last_on(&names::block_commit(self.chain_id, number))
            .await
    }

    /// A publisher that appends after sequence `last_sequence`.
    pub fn publisher(&self, last_sequence: u64, max_in_flight: usize) -> Publisher {
        Publisher {
            js: self.js.clone(),
            chain_id: self.chain_id,
            next_sequence: last_sequence + 1,
            in_flight: VecDeque::new(),
            max_in_flight: max_in_flight.max(1),
        }
    }

    async fn last_on<T: DeserializeOwned>(
        &self,
        subject: &str,
    ) -> Result<Option<(T, u64)>, StreamError> {
        match self.stream.get_last_raw_message_by_subject(subject).await {
            Ok(message) => Ok(Some((decode(&message.payload)?, message.sequence))),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(nats(e)),
        }
    }
}

/// Appends messages in order with bounded pipelining. Each message names its own stream
/// position (`Nats-Msg-Id`) and the one before it (`Nats-Expected-Last-Sequence`): a retry
/// is de-duplicated, and any other writer or a lost message makes the publish fail.
#[derive(Debug)]
pub struct Publisher {
    js: Context,
    chain_id: u64,
    next_sequence: u64,
    in_flight: VecDeque<(u64, PublishAckFuture)>,
    max_in_flight: usize,
}

impl Publisher {
    /// Sequence the next message will get.
    pub fn next_sequence(&self) -> u64 {
        self.next_sequence
    }

    /// Sends one message; waits for the oldest ack when too many are in flight.
    pub async fn publish(
        &mut self,
        subject: String,
        headers: HeaderMap,
        payload: Bytes,
    ) -> Result<(), StreamError> {
        let sequence = self.next_sequence;
        let message = PublishMessage::build()
            .payload(payload)
            .headers(headers)
            .message_id(names::message_id(self.chain_id, sequence))
            .expected_last_sequence(sequence - 1);
        let ack = self
            .js
            .send_publish(subject, message)
            .await
            .map_err(publish_error)?;
        self.in_flight.push_back((sequence, ack));
        self.next_sequence += 1;
        while self.in_flight.len() >= self.max_in_flight {
            self.await_oldest().await?;
        }
        Ok(())
    }

    /// Waits until every sent message is acknowledged.
    pub async fn flush(&mut self) -> Result<(), StreamError> {
        while !self.in_flight.is_empty() {
            self.await_oldest().await?;
        }
        Ok(())
    }

    async fn await_oldest(&mut self) -> Result<(), StreamError> {
        let Some((sequence, ack)) = self.in_flight.pop_front() else {
            return Ok(());
        };
        let ack = ack.await.map_err(publish_error)?;
        if ack.sequence != sequence {
            metrics::stream_error("conflict");
            return Err(StreamError::Conflict(format!(
                "message meant for sequence {sequence} was stored at {} (duplicate: {})",
                ack.sequence, ack.duplicate
            )));
        }
        Ok(())
    }
}

fn publish_error(e: async_nats::jetstream::context::PublishError) -> StreamError {
    match e.kind() {
        PublishErrorKind::WrongLastSequence | PublishErrorKind::WrongLastMessageId => {
            metrics::stream_error("conflict");
            StreamError::Conflict(e.to_string())
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

/// Opens a JetStream context on `client` for the indexer's publishing pattern.
pub fn context(client: async_nats::Client, max_in_flight: usize) -> Context {
    jetstream::ContextBuilder::new()
        .max_ack_inflight(max_in_flight.max(1) * 2)
        .build(client)
}
