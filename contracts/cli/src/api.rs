//! The reads: gantry-api's JSON endpoints and its Server-Sent-Event streams. The answers
//! are the API's own types, `gantry_protocol::api` (unknown fields are ignored, so the API
//! may grow); `--json` output passes the API's own JSON through untouched.

use gantry_protocol::api::{ErrorBody, NodeRow, NodeView, Page};
use gantry_protocol::jobs::LogLine;
pub use gantry_runtime::sse::{Event, EventStream};
use reqwest::StatusCode;
use serde::de::DeserializeOwned;
use url::Url;

use crate::error::{CliError, Result};

/// The API client.
#[derive(Debug, Clone)]
pub struct Api {
    base: Url,
    http: reqwest::Client,
}

impl Api {
    pub fn new(base: Url) -> Self {
        Self {
            base,
            http: reqwest::Client::new(),
        }
    }

    fn url(&self, path: &str) -> Result<Url> {
        self.base
            .join(path)
            .map_err(|e| CliError::usage(format!("--api-url {}: {e}", self.base)))
    }

    fn unavailable(&self, error: impl std::fmt::Display) -> CliError {
        CliError::Unavailable(format!(
            "the API at {} did not answer (is gantry-api running? --api-url, GANTRY_API_URL): {error}",
            self.base
        ))
    }

    /// GETs `path` with `query` as JSON; a 404 is "not found", a 400 a usage error,
    /// both with the API's own message.
    pub async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<serde_json::Value> {
        let response = self
            .http
            .get(self.url(path)?)
            .query(query)
            .send()
            .await
            .map_err(|e| self.unavailable(e))?;
        let status = response.status();
        if status.is_success() {
            return response.json().await.map_err(|e| self.unavailable(e));
        }
        let message = response
            .json::<ErrorBody>()
            .await
            .map_or_else(|_| status.to_string(), |b| b.error);
        Err(match status {
            StatusCode::NOT_FOUND => CliError::NotFound(message),
            StatusCode::BAD_REQUEST => CliError::Usage(message),
            _ => self.unavailable(format!("{path}: {message}")),
        })
    }

    pub fn typed<T: DeserializeOwned>(value: &serde_json::Value) -> Result<T> {
        serde_json::from_value(value.clone())
            .map_err(|e| CliError::Unavailable(format!("the API answered unexpected JSON: {e}")))
    }

    pub async fn job(&self, job_id: u64) -> Result<serde_json::Value> {
        self.get(&format!("v1/jobs/{job_id}"), &[]).await
    }

    pub async fn node(&self, node_id: u64) -> Result<serde_json::Value> {
        self.get(&format!("v1/nodes/{node_id}"), &[]).await
    }

    /// Every node's row, through all pages.
    pub async fn all_nodes(&self) -> Result<Vec<NodeRow>> {
        let mut nodes = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut query = vec![("limit", "200".to_string())];
            if let Some(cursor) = &cursor {
                query.push(("cursor", cursor.clone()));
            }
            let page: Page<NodeView> = Self::typed(&self.get("v1/nodes", &query).await?)?;
            nodes.extend(page.items.into_iter().map(|view| view.node));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(nodes),
            }
        }
    }

    pub async fn logs(&self, job_id: u64, tail: u32) -> Result<Vec<LogLine>> {
        let value = self
            .get(
                &format!("v1/jobs/{job_id}/logs"),
                &[("tail", tail.to_string())],
            )
            .await?;
        Self::typed(&value)
    }

    /// Opens an event stream; `last_event_id` resumes one (the logs stream).
    pub async fn events(
        &self,
        path: &str,
        query: &[(&str, String)],
        last_event_id: Option<&str>,
    ) -> Result<EventStream> {
        let mut request = self
            .http
            .get(self.url(path)?)
            .query(query)
            .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = request.send().await.map_err(|e| self.unavailable(e))?;
        match response.status() {
            StatusCode::OK => Ok(EventStream::new(response.bytes_stream())),
            StatusCode::NOT_FOUND => Err(CliError::NotFound(format!("{path}: not found"))),
            status => Err(self.unavailable(format!("{path}: {status}"))),
        }
    }
}

/// Reconnections to an event stream before giving up.
pub const MAX_RECONNECTS: u32 = 5;

/// Waits before reconnection `attempt` (1, 2, …): 0.25 s doubling.
pub async fn wait_to_reconnect(attempt: u32) {
    tokio::time::sleep(std::time::Duration::from_millis(250 << attempt.min(5))).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events_of(chunks: &[&'static [u8]]) -> EventStream {
        let chunks: Vec<Result<bytes::Bytes, std::convert::Infallible>> = chunks
            .iter()
            .map(|c| Ok(bytes::Bytes::from_static(c)))
            .collect();
        EventStream::new(futures::stream::iter(chunks))
    }

    #[tokio::test]
    async fn event_blocks_parse_and_comments_are_skipped() {
        // Split anywhere, CRLF or LF, keep-alive comments between events.
        let mut events = events_of(&[
            b": keep-alive\n\nevent: lo",
            b"g\r\nid: 7\r\ndata: {\"a\":1}\r\n\r\n",
            b"data: a\ndata: b\n\nevent: end",
        ]);
        assert_eq!(
            events.next().await,
            Some(Event {
                event: "log".into(),
                data: r#"{"a":1}"#.into(),
                id: Some("7".into()),
            })
        );
        let multi = events.next().await.unwrap();
        assert_eq!(
            (multi.event.as_str(), multi.data.as_str()),
            ("message", "a\nb")
        );
        assert_eq!(
            events.next().await,
            None,
            "an incomplete block at the end is no event"
        );
    }

    #[tokio::test]
    async fn a_character_split_across_chunks_arrives_whole() {
        let mut events = events_of(&[b"data: \xc3", b"\xa9t\xc3\xa9\n\n"]);
        assert_eq!(events.next().await.unwrap().data, "été");
    }
}
