//! The web dashboard, served at `/`: a single page (plain HTML, CSS and JavaScript
//! modules, no build step) embedded in the binary, which reads the JSON API and follows
//! its live feed (`/v1/events`). Routes are hash fragments: `#/jobs`, `#/jobs/7`,
//! `#/nodes`, `#/nodes/1`, `#/accounts/0x…` (a submitter's credits and jobs), `#/network`.
//!
//! Assets are answered with `Cache-Control: no-cache` and an `ETag` (a hash of their
//! content), so that a browser revalidates them and an upgraded binary is never hidden
//! behind a stale cache, at the price of a 304 per asset and page load.
//!
//! Besides `assets/`, `build.rs` provides what the web app needs to talk to the chain
//! through the wallet: `vendor/ethers.min.js` (ethers' one-file ES module, from
//! `deploy/setup.sh`'s npm install; a stub that throws when that is missing) and
//! `abi/{JobMarket,NodeRegistry,GantryTestToken}.json` (`{"abi": …}` only, no bytecode).

use std::sync::LazyLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

/// An embedded file.
struct Asset {
    /// Path under `/assets/`.
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $content_type:expr) => {
        Asset {
            path: $path,
            content_type: $content_type,
            body: include_bytes!(concat!("../assets/", $path)),
        }
    };
    // Made by build.rs.
    ($path:literal, $content_type:expr, out_dir: $file:literal) => {
        Asset {
            path: $path,
            content_type: $content_type,
            body: include_bytes!(concat!(env!("OUT_DIR"), "/", $file)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";
const JSON: &str = "application/json";

static ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("charts.js", JS),
    asset!("format.js", JS),
    asset!("validate.js", JS),
    asset!("views/jobs.js", JS),
    asset!("views/job.js", JS),
    asset!("views/nodes.js", JS),
    asset!("views/network.js", JS),
    asset!("views/account.js", JS),
    asset!("views/submit.js", JS),
    asset!("views/operate.js", JS),
    asset!("views/actions.js", JS),
    asset!("wallet.js", JS),
    asset!("walletbar.js", JS),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("vendor/ethers.min.js", JS, out_dir: "ethers.min.js"),
    asset!("abi/JobMarket.json", JSON, out_dir: "abi/JobMarket.json"),
    asset!("abi/NodeRegistry.json", JSON, out_dir: "abi/NodeRegistry.json"),
    asset!("abi/GantryTestToken.json", JSON, out_dir: "abi/GantryTestToken.json"),
];

/// Entity tags of [`ASSETS`], by index. Weak: the compression layer may send the same
/// content gzipped.
static ETAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|asset| {
            HeaderValue::from_str(&format!("W/\"{:016x}\"", fnv1a(asset.body)))
                .expect("hex is a valid header value")
        })
        .collect()
});

/// The page may load nothing from elsewhere; inline `style` attributes are allowed (bar
/// widths).
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; style-src 'self' 'unsafe-inline'; \
     img-src 'self' data:; frame-ancestors 'none'";

/// The dashboard's routes.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/", get(|headers: HeaderMap| async move { serve("index.html", &headers) }))
        .route(
            "/assets/{*path}",
            get(|Path(path): Path<String>, headers: HeaderMap| async move {
                serve(&path, &headers)
            }),
        )
        .route(
            "/favicon.ico",
            get(|headers: HeaderMap| async move { serve("favicon.svg", &headers) }),
        )
}

fn serve(path: &str, request: &HeaderMap) -> Response {
    let Some(index) = ASSETS.iter().position(|asset| asset.path == path) else {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    };
    let asset = &ASSETS[index];
    let etag = ETAGS[index].clone();
    let fresh = request.get(header::IF_NONE_MATCH).is_some_and(|tags| {
        tags.as_bytes().split(|b| *b == b',').any(|tag| {
            let tag = tag.trim_ascii();
            tag == b"*" || tag == etag.as_bytes()
        })
    });
    let mut headers = HeaderMap::new();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::ETAG, etag);
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if fresh {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    if asset.path == "index.html" {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        );
    }
    (headers, asset.body).into_response()
}

/// 64-bit FNV-1a: a stable content hash for the entity tags (not for security).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str, if_none_match: Option<&HeaderValue>) -> Response {
        let mut headers = HeaderMap::new();
        if let Some(tag) = if_none_match {
            headers.insert(header::IF_NONE_MATCH, tag.clone());
        }
        serve(path, &headers)
    }

    #[test]
    fn serves_assets_with_their_type_and_a_tag_to_revalidate() {
        for (path, content_type) in [
            ("index.html", "text/html; charset=utf-8"),
            ("app.js", JS),
            ("views/job.js", JS),
            ("style.css", "text/css; charset=utf-8"),
            ("favicon.svg", "image/svg+xml"),
        ] {
            let response = get(path, None);
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            let headers = response.headers();
            assert_eq!(headers[header::CONTENT_TYPE], content_type, "{path}");
            assert_eq!(headers[header::CACHE_CONTROL], "no-cache", "{path}");
            let etag = headers[header::ETAG].clone();
            assert_eq!(
                get(path, Some(&etag)).status(),
                StatusCode::NOT_MODIFIED,
                "{path}"
            );
            let other = HeaderValue::from_static("\"0\"");
            assert_eq!(get(path, Some(&other)).status(), StatusCode::OK, "{path}");
        }
        assert!(
            get("index.html", None)
                .headers()
                .contains_key(header::CONTENT_SECURITY_POLICY)
        );
    }

    #[test]
    fn an_unknown_asset_is_a_404() {
        for path in ["nope.js", "../src/lib.rs", "views", ""] {
            assert_eq!(get(path, None).status(), StatusCode::NOT_FOUND, "{path}");
        }
    }
}
