//! The reads: gantry-api's JSON endpoints and its Server-Sent-Event streams. The answers
//! are the API's own types, `gantry_protocol::api` (unknown fields are ignored, so the API
//! may grow); `--json` output passes the API's own JSON through untouched.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use gantry_protocol::api::{ErrorBody, NodeRow, NodeView, Page};
use gantry_protocol::jobs::LogLine;
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
            StatusCode::OK => Ok(EventStream {
                body: Box::pin(response.bytes_stream()),
                buffer: Vec::new(),
            }),
            StatusCode::NOT_FOUND => Err(CliError::NotFound(format!("{path}: not found"))),
            status => Err(self.unavailable(format!("{path}: {status}"))),
        }
    }
}

/// One of the API's integers (SQL BIGINTs, `i64`; counts, ids and unix times, never
/// negative) as the CLI counts and shows it; a negative one would be the API's bug and
/// reads as 0.
pub fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// One Server-Sent Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub event: String,
    pub data: String,
    pub id: Option<String>,
}

/// A Server-Sent-Events reader: events in order, keep-alive comments skipped; `None`
/// when the server ends the stream.
pub struct EventStream {
    body: Pin<Box<dyn Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    buffer: Vec<u8>,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream").finish_non_exhaustive()
    }
}

impl EventStream {
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some((block, rest)) = split_block(&self.buffer) {
                let event = parse_block(&String::from_utf8_lossy(block));
                self.buffer = rest.to_vec();
                if let Some(event) = event {
                    return Some(event);
                }
                continue;
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.buffer.extend_from_slice(&chunk),
                Some(Err(_)) | None => return None,
            }
        }
    }
}

/// The first complete event block (up to a blank line) and what follows it.
fn split_block(buffer: &[u8]) -> Option<(&[u8], &[u8])> {
    for (i, window) in buffer.windows(2).enumerate() {
        if window == b"\n\n" {
            return Some((&buffer[..i], &buffer[i + 2..]));
        }
    }
    None
}

/// An event block's fields; `None` for a block of comments only (keep-alives).
fn parse_block(block: &str) -> Option<Event> {
    let mut event = Event {
        event: "message".into(),
        data: String::new(),
        id: None,
    };
    let mut fields = 0;
    let mut data_lines = Vec::new();
    for line in block.lines() {
        let line = line.trim_end_matches('\r');
        if line.starts_with(':') || line.is_empty() {
            continue;
        }
        let (name, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        fields += 1;
        match name {
            "event" => event.event = value.into(),
            "data" => data_lines.push(value),
            "id" => event.id = Some(value.into()),
            _ => fields -= 1,
        }
    }
    event.data = data_lines.join("\n");
    (fields > 0).then_some(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_blocks_parse_and_comments_are_skipped() {
        let buffer = b": keep-alive\n\nevent: log\nid: 7\ndata: {\"a\":1}\n\nevent: end";
        let (first, rest) = split_block(buffer).unwrap();
        assert_eq!(parse_block(std::str::from_utf8(first).unwrap()), None);
        let (second, rest) = split_block(rest).unwrap();
        assert_eq!(
            parse_block(std::str::from_utf8(second).unwrap()),
            Some(Event {
                event: "log".into(),
                data: r#"{"a":1}"#.into(),
                id: Some("7".into()),
            })
        );
        assert_eq!(
            split_block(rest),
            None,
            "an incomplete block waits for more"
        );
        let multi = parse_block("data: a\ndata: b").unwrap();
        assert_eq!(
            (multi.event.as_str(), multi.data.as_str()),
            ("message", "a\nb")
        );
    }

    #[test]
    fn api_integers_read_as_unsigned() {
        assert_eq!(unsigned(42), 42);
        assert_eq!(unsigned(i64::MAX), 9_223_372_036_854_775_807);
        assert_eq!(unsigned(-1), 0);
    }
}
