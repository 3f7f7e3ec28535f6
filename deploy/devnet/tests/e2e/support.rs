//! What the end-to-end scenarios share: a network with short windows, and waiting on the
//! API's live feed.

use std::time::Duration;

use gantry_devnet::network::{Network, NetworkConfig};
use gantry_devnet::sse::EventStream;

/// Long enough for a demo job's whole life on a loaded two-core machine.
pub(crate) const WAIT: Duration = Duration::from_secs(180);

/// A network of `workers` workers in `dir`, with a 5 s challenge window and a 15 s
/// heartbeat timeout (workers beat every 2 s), so that payouts and failovers take seconds.
pub(crate) async fn network(dir: &std::path::Path, workers: usize) -> Network {
    let config = NetworkConfig {
        challenge_window: 5,
        heartbeat_timeout: 15,
        ..NetworkConfig::ephemeral(dir, workers).expect("a config")
    };
    Network::start(config).await.expect("the network starts")
}

/// The API's live feed.
pub(crate) struct Feed(EventStream);

impl Feed {
    pub(crate) async fn open(network: &Network) -> Self {
        Self(
            EventStream::open(&format!("{}/v1/events", network.api_url))
                .await
                .expect("the feed opens"),
        )
    }

    /// Reads the feed until `done` returns something for an event's name and data, or
    /// fails with `what` after [`WAIT`].
    pub(crate) async fn until<T>(
        &mut self,
        what: &str,
        mut done: impl FnMut(&str, &serde_json::Value) -> Option<T>,
    ) -> T {
        let wait = async {
            loop {
                let event = self
                    .0
                    .next()
                    .await
                    .expect("the feed reads")
                    .expect("the feed goes on");
                let Ok(data) = serde_json::from_str::<serde_json::Value>(&event.data) else {
                    continue;
                };
                if let Some(found) = done(&event.event, &data) {
                    return found;
                }
            }
        };
        tokio::time::timeout(WAIT, wait)
            .await
            .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
    }
}

/// Job `id` as the API has it; `Null` while it has not projected the job yet.
pub(crate) async fn job(network: &Network, id: u64) -> serde_json::Value {
    let response = reqwest::get(format!("{}/v1/jobs/{id}", network.api_url))
        .await
        .unwrap();
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        return serde_json::Value::Null;
    }
    response.error_for_status().unwrap().json().await.unwrap()
}

/// GET `path` on the API as JSON.
pub(crate) async fn get(network: &Network, path: &str) -> serde_json::Value {
    reqwest::get(format!("{}{path}", network.api_url))
        .await
        .unwrap()
        .error_for_status()
        .unwrap()
        .json()
        .await
        .unwrap()
}
