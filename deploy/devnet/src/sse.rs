//! Opening `gantry-api`'s live feeds (`/v1/events`, `/v1/jobs/{id}/logs?follow=true`) from
//! the demo and from tests; the events are read by the one Server-Sent-Events reader,
//! `gantry_runtime::sse`, that the `gantry` command line reads them with too.

/// One event: its name (`message` when the server named none), data and id.
pub use gantry_runtime::sse::Event as SseEvent;

/// An open event stream.
#[derive(Debug)]
pub struct EventStream(gantry_runtime::sse::EventStream);

/// Why a stream could not be opened or read.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("GET {url}: {source}")]
    Request { url: String, source: reqwest::Error },
    #[error("GET {url}: {status}, not an event stream")]
    NotAStream { url: String, status: String },
    #[error("reading the event stream: {0}")]
    Read(String),
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
        Ok(Self(gantry_runtime::sse::EventStream::new(
            response.bytes_stream(),
        )))
    }

    /// The next event (keep-alive comments skipped); `None` once the server ends the
    /// stream.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, SseError> {
        self.0.try_next().await.map_err(SseError::Read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn events_are_parsed_and_keep_alives_skipped() {
        let chunks: Vec<Result<bytes::Bytes, std::convert::Infallible>> = [
            &b"event: log\nid: 7\ndata: {\"a\":1}\n\n:\n\nda"[..],
            &b"ta: a\r\ndata: b\r\n\r\n"[..],
        ]
        .into_iter()
        .map(|c| Ok(bytes::Bytes::from_static(c)))
        .collect();
        let mut events = EventStream(gantry_runtime::sse::EventStream::new(
            futures::stream::iter(chunks),
        ));
        let event = events.next().await.unwrap().unwrap();
        assert_eq!(
            (
                event.event.as_str(),
                event.id.as_deref(),
                event.data.as_str()
            ),
            ("log", Some("7"), "{\"a\":1}")
        );
        assert_eq!(events.next().await.unwrap().unwrap().data, "a\nb");
        assert_eq!(events.next().await.unwrap(), None);
    }
}
