//! The web dashboard, served at `/`: static assets embedded in the binary (no build step).

use axum::Router;

/// The dashboard's routes.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
}
