//! The service's own HTTP listener on its metrics address: `/metrics` (Prometheus text,
//! also served on any other path, as the exporter's listener did), `/healthz` (alive) and
//! `/readyz` (200 `ready`, or 503 naming what is not: a chain-stream reader stalled on a
//! missing block). Readiness is process-wide: any [`NotReady`] guard alive makes the
//! process not ready, and dropping it (or [`NotReady::clear`]) makes it ready again.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;

/// Why the process is not ready, by guard.
static NOT_READY: Mutex<BTreeMap<u64, String>> = Mutex::new(BTreeMap::new());
static NEXT_GUARD: AtomicU64 = AtomicU64::new(0);

/// A reason this process is not ready, for as long as it is set.
#[derive(Debug)]
pub struct NotReady {
    id: u64,
}

impl Default for NotReady {
    fn default() -> Self {
        Self::new()
    }
}

impl NotReady {
    /// A guard with no reason set (the process stays ready).
    pub fn new() -> Self {
        Self {
            id: NEXT_GUARD.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Makes the process not ready, saying `reason`.
    pub fn set(&self, reason: String) {
        reasons().insert(self.id, reason);
    }

    /// Withdraws this guard's reason.
    pub fn clear(&self) {
        reasons().remove(&self.id);
    }
}

impl Drop for NotReady {
    fn drop(&mut self) {
        self.clear();
    }
}

fn reasons() -> std::sync::MutexGuard<'static, BTreeMap<u64, String>> {
    NOT_READY.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Why the process is not ready, one reason a line; `None` when it is.
pub fn not_ready() -> Option<String> {
    let reasons = reasons();
    (!reasons.is_empty()).then(|| reasons.values().cloned().collect::<Vec<_>>().join("\n"))
}

/// Serves `/metrics`, `/healthz` and `/readyz` on `listener` until `shutdown`.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: PrometheusHandle,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let (stream, _) = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors and the like: the next accept may work.
                    tracing::warn!(%error, "accepting a metrics connection");
                    continue;
                }
            },
        };
        let metrics = metrics.clone();
        let shutdown = shutdown.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let metrics = metrics.clone();
                async move { Ok::<_, Infallible>(respond(&request, &metrics)) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::select! {
                () = shutdown.cancelled() => {}
                served = connection => if let Err(error) = served {
                    tracing::debug!(%error, "metrics connection");
                },
            }
        });
    }
    connections.close();
    connections.wait().await;
    Ok(())
}

/// Binds `addr` now (so a taken port fails at start-up).
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

fn respond<B>(request: &Request<B>, metrics: &PrometheusHandle) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match request.uri().path() {
        "/healthz" => (StatusCode::OK, "text/plain", "ok\n".to_owned()),
        "/readyz" => match not_ready() {
            None => (StatusCode::OK, "text/plain", "ready\n".to_owned()),
            Some(reasons) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain",
                format!("{reasons}\n"),
            ),
        },
        _ => (
            StatusCode::OK,
            "text/plain; version=0.0.4",
            metrics.render(),
        ),
    };
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("a response of a fixed shape builds")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_guard_with_a_reason_makes_the_process_not_ready_until_dropped_or_cleared() {
        let first = NotReady::new();
        let second = NotReady::new();
        first.set("chain stream stalled at block 47".into());
        second.set("other".into());
        let reasons = not_ready().expect("not ready");
        assert!(reasons.contains("block 47") && reasons.contains("other"));
        drop(second);
        assert_eq!(
            not_ready().as_deref(),
            Some("chain stream stalled at block 47")
        );
        first.clear();
        assert_eq!(not_ready(), None);
    }
}
