//! A Server-Sent-Events reader (`eventsource-stream` over a response body), for following
//! `gantry-api`'s live feeds (`/v1/events`, `/v1/jobs/{id}/logs?follow=true`): the `gantry`
//! command line and the devnet's demo and tests open the connection, this reads it.

use std::pin::Pin;

use futures::{Stream, StreamExt};

/// One event: its name (`message` when the server named none), data and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub event: String,
    pub data: String,
    pub id: Option<String>,
}

/// The events of an event-stream body, in order, keep-alive comments skipped.
pub struct EventStream {
    events: Pin<Box<dyn Stream<Item = Result<Event, String>> + Send>>,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").finish_non_exhaustive()
    }
}

impl EventStream {
    /// Reads the events of a body.
    pub fn new<S, E>(body: S) -> Self
    where
        S: Stream<Item = Result<bytes::Bytes, E>> + Send + 'static,
        E: std::fmt::Display + Send + 'static,
    {
        use eventsource_stream::Eventsource;
        let events = body.eventsource().map(|read| {
            read.map(|e| Event {
                event: e.event,
                data: e.data,
                id: (!e.id.is_empty()).then_some(e.id),
            })
            .map_err(|e| e.to_string())
        });
        Self {
            events: Box::pin(events),
        }
    }

    /// The next event; `Ok(None)` once the server ends the stream, an error (why, in
    /// words) when reading it broke.
    pub async fn try_next(&mut self) -> Result<Option<Event>, String> {
        self.events.next().await.transpose()
    }

    /// The next event; `None` when the server ends the stream or the connection breaks
    /// (for callers that reconnect and refetch either way).
    pub async fn next(&mut self) -> Option<Event> {
        self.try_next().await.ok().flatten()
    }
}
