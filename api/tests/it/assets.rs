//! The web app's chain assets, from the dashboard's routes alone (no chain, no store):
//! ethers as one ES module from `deploy/setup.sh`'s npm install, and the ABIs of the
//! contracts it calls, cut from the committed artifacts to `{"abi": …}`.

use reqwest::StatusCode;
use reqwest::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use serde_json::Value;

/// The dashboard's routes on a free port; their base URL.
async fn serve() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = gantry_api::dashboard::routes::<()>();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

async fn get(base: &str, path: &str) -> reqwest::Response {
    reqwest::get(format!("{base}{path}")).await.unwrap()
}

#[tokio::test]
async fn ethers_is_served_as_one_es_module() {
    let base = serve().await;
    let response = get(&base, "/assets/vendor/ethers.min.js").await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[CONTENT_TYPE],
        "text/javascript; charset=utf-8"
    );
    assert_eq!(response.headers()[CACHE_CONTROL], "no-cache");
    let body = response.text().await.unwrap();
    assert!(
        !body.contains("ethers is not installed"),
        "gantry-api was built without ethers (build.rs embedded its stub): run deploy/setup.sh"
    );
    // The module's exports are one `export{…}` at its end (no imports to resolve).
    assert!(body.len() > 400_000, "{} bytes", body.len());
    let exports = &body[body.rfind("export{").expect("an export statement")..];
    for name in ["BrowserProvider", "Contract", "Signature", "Interface"] {
        assert!(exports.contains(name), "ethers exports {name}");
    }
}

#[tokio::test]
async fn the_contracts_abis_are_served_without_their_bytecode() {
    let base = serve().await;
    let artifacts = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../contracts/protocol/artifacts"
    );
    for (contract, functions) in [
        (
            "JobMarket",
            &["postJobWithPermit", "cancel", "dispute", "creditOf"][..],
        ),
        (
            "NodeRegistry",
            &["register", "topUpStake", "agentNonce"][..],
        ),
        (
            "GantryTestToken",
            &["permit", "approve", "balanceOf", "nonces", "eip712Domain"][..],
        ),
    ] {
        let path = format!("/assets/abi/{contract}.json");
        let response = get(&base, &path).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(response.headers()[CONTENT_TYPE], "application/json");
        assert_eq!(response.headers()[CACHE_CONTROL], "no-cache");
        let etag = response.headers()[ETAG].clone();
        let text = response.text().await.unwrap();
        assert!(!text.contains("bytecode"), "{path} has no bytecode");
        let served: Value = serde_json::from_str(&text).unwrap();
        let keys: Vec<_> = served.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["abi"], "{path}");
        let names: Vec<_> = served["abi"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|entry| entry["type"] == "function")
            .map(|entry| entry["name"].as_str().unwrap())
            .collect();
        for function in functions {
            assert!(names.contains(function), "{path} has {function}");
        }
        // The committed artifact's ABI, whole.
        let artifact: Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{artifacts}/{contract}.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(served["abi"], artifact["abi"], "{path}");

        let again = reqwest::Client::new()
            .get(format!("{base}{path}"))
            .header(IF_NONE_MATCH, etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{path}");
    }
    let unknown = get(&base, "/assets/abi/Verification.json").await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
}
