//! A small Server-Sent-Events reader, for following `gantry-api`'s live feeds
//! (`/v1/events`, `/v1/jobs/{id}/logs?follow=true`) from the demo and from tests.

use std::pin::Pin;

use futures::{Stream, StreamExt};

/// One event: its name (`message` when the server named none), data and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: String,
    pub data: String,
    pub id: Option<String>,
}

/// An open event stream.
pub struct EventStream {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: String,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("buffered", &self.buffer.len())
            .finish()
    }
}

/// Why a stream could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("GET {url}: {source}")]
    Request { url: String, source: reqwest::Error },
    #[error("GET {url}: {status}, not an event stream")]
    NotAStream { url: String, status: String },
    #[error("reading the event stream: {0}")]
    Read(#[from] reqwest::Error),
    #[error("the event stream is not UTF-8")]
    Utf8,
}

impl EventStream {
    /// Opens `url`; fails unless the answer is a 200 `text/event-stream`.
    pub async fn open(url: &str) -> Result<Self, SseError> {
        let response = reqwest::get(url)
            .await
            .map_err(|source| SseError::Request {
                url: url.to_owned(),
                source,
            })?;
        let is_stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        if !response.status().is_success() || !is_stream {
            return Err(SseError::NotAStream {
                url: url.to_owned(),
                status: response.status().to_string(),
            });
        }
        Ok(Self {
            body: Box::pin(response.bytes_stream()),
            buffer: String::new(),
        })
    }

    /// The next event (keep-alive comments skipped); `None` once the server ends the
    /// stream.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, SseError> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if let Some(event) = parse(&block) {
                    return Ok(Some(event));
                }
                continue;
            }
            match self.body.next().await {
                Some(chunk) => {
                    let chunk = chunk?;
                    self.buffer
                        .push_str(std::str::from_utf8(&chunk).map_err(|_| SseError::Utf8)?);
                }
                None => return Ok(None),
            }
        }
    }
}

/// One event block; `None` for a comment-only block (a keep-alive).
fn parse(block: &str) -> Option<SseEvent> {
    let mut event = SseEvent {
        event: "message".into(),
        data: String::new(),
        id: None,
    };
    let mut fields = 0;
    for line in block.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.strip_prefix(' ').unwrap_or(value);
        match name {
            "event" => event.event = value.into(),
            "data" => {
                if !event.data.is_empty() {
                    event.data.push('\n');
                }
                event.data.push_str(value);
            }
            "id" => event.id = Some(value.into()),
            _ => continue, // a comment (`: keep-alive`) or a field we do not use
        }
        fields += 1;
    }
    (fields > 0).then_some(event)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn events_are_parsed_and_keep_alives_skipped() {
        let event = parse("event: log\nid: 7\ndata: {\"a\":1}\n\n").unwrap();
        assert_eq!(
            (
                event.event.as_str(),
                event.id.as_deref(),
                event.data.as_str()
            ),
            ("log", Some("7"), "{\"a\":1}")
        );
        assert_eq!(parse(":\n\n"), None);
        assert_eq!(parse("data: a\ndata: b\n\n").unwrap().data, "a\nb");
    }
}
