//! Pure URI parsing: an input's URI becomes a [`Source`], refused (as the job's fault)
//! when it could point outside where its scheme allows.

use std::path::PathBuf;

use url::Url;

use super::FetchError;

/// Where an input comes from, parsed from its URI without any IO.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Source {
    /// `http(s)://…`: public hosts, or those the provider allows.
    Http(Url),
    /// `ipfs://…` mapped onto the provider's gateway (reached wherever it is).
    Ipfs(Url),
    Nats {
        bucket: String,
        key: String,
    },
    S3 {
        bucket: String,
        key: object_store::path::Path,
    },
    File(PathBuf),
}

/// Parses an input URI; `gateway` must end with `/` (see [`super::Fetcher::new`]).
pub(super) fn parse_source(uri: &str, gateway: &Url) -> Result<Source, FetchError> {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return Err(FetchError::UnsupportedUri("not a uri"));
    };
    match scheme {
        "http" | "https" => {
            let url = Url::parse(uri).map_err(|_| FetchError::UnsupportedUri("malformed url"))?;
            if url.host().is_none() {
                return Err(FetchError::UnsupportedUri("url without a host"));
            }
            Ok(Source::Http(url))
        }
        "ipfs" => parse_ipfs(rest, gateway).map(Source::Ipfs),
        "nats" => {
            let (bucket, key) = bucket_and_key(rest)?;
            Ok(Source::Nats {
                bucket: bucket.to_owned(),
                key: key.to_owned(),
            })
        }
        "s3" => {
            let (bucket, key) = bucket_and_key(rest)?;
            if !is_s3_bucket_name(bucket) {
                return Err(FetchError::UnsupportedUri("invalid s3 bucket name"));
            }
            let key = object_store::path::Path::parse(key)
                .map_err(|_| FetchError::UnsupportedUri("invalid s3 key"))?;
            Ok(Source::S3 {
                bucket: bucket.to_owned(),
                key,
            })
        }
        "file" => {
            // The parser resolves `.` and `..`; canonicalisation later resolves links.
            let url = Url::parse(uri).map_err(|_| FetchError::UnsupportedUri("malformed url"))?;
            let path = url
                .to_file_path()
                .map_err(|_| FetchError::UnsupportedUri("file uri must be file:///<path>"))?;
            Ok(Source::File(path))
        }
        _ => Err(FetchError::UnsupportedUri(
            "scheme must be https, http, ipfs, nats, s3 or file",
        )),
    }
}

/// `ipfs://<cid>[/<path>]` → `<gateway>ipfs/<cid>[/<path>]`, never leaving `ipfs/<cid>/`.
fn parse_ipfs(rest: &str, gateway: &Url) -> Result<Url, FetchError> {
    let (cid, path) = rest.split_once('/').unwrap_or((rest, ""));
    if cid.is_empty() || !cid.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(FetchError::UnsupportedUri("invalid ipfs cid"));
    }
    // `\` is a separator in http urls, `%2e` a dot: refuse anything that could climb out.
    let climbs = |segment: &str| {
        let lower = segment.to_ascii_lowercase().replace("%2e", ".");
        lower == "." || lower == ".."
    };
    if path.contains(['\\', '?', '#']) || (!path.is_empty() && path.split('/').any(climbs)) {
        return Err(FetchError::UnsupportedUri("invalid ipfs path"));
    }
    let url = gateway
        .join(&format!("ipfs/{cid}/{path}"))
        .map_err(|_| FetchError::UnsupportedUri("invalid ipfs path"))?;
    let prefix = format!("{gateway}ipfs/{cid}/");
    if !url.as_str().starts_with(&prefix) {
        return Err(FetchError::UnsupportedUri("invalid ipfs path"));
    }
    Ok(url)
}

fn bucket_and_key(rest: &str) -> Result<(&str, &str), FetchError> {
    match rest.split_once('/') {
        Some((bucket, key)) if !bucket.is_empty() && !key.is_empty() => Ok((bucket, key)),
        _ => Err(FetchError::UnsupportedUri("expected <bucket>/<key>")),
    }
}

/// S3's rules: 3 to 63 lowercase letters, digits, dots and hyphens, alphanumeric at
/// both ends.
fn is_s3_bucket_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (3..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'.' || *b == b'-')
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
}

/// The URI's scheme for logs, from a fixed set.
pub(super) fn scheme_of(uri: &str) -> &'static str {
    ["https", "http", "ipfs", "nats", "s3", "file"]
        .into_iter()
        .find(|scheme| {
            uri.strip_prefix(scheme)
                .is_some_and(|rest| rest.starts_with("://"))
        })
        .unwrap_or("other")
}

/// Lowercase hex, or [`FetchError::InvalidHash`] (the hash names a cache file, so it
/// must be exactly hex).
pub(super) fn normalize_hash(hash: &str) -> Result<String, FetchError> {
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(FetchError::InvalidHash);
    }
    Ok(hash.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::fault::FaultClass;

    #[test]
    fn parses_each_scheme() {
        let gateway = Url::parse("https://gw.example/base/").unwrap();
        let check = |uri: &str, expected: Source| {
            assert_eq!(parse_source(uri, &gateway).unwrap(), expected, "{uri}");
        };
        check(
            "https://data.example.org/x.tar?sig=1",
            Source::Http(Url::parse("https://data.example.org/x.tar?sig=1").unwrap()),
        );
        check(
            "ipfs://QmYwAPJzv5CZsnA/a/b.bin",
            Source::Ipfs(
                Url::parse("https://gw.example/base/ipfs/QmYwAPJzv5CZsnA/a/b.bin").unwrap(),
            ),
        );
        check(
            "nats://inputs/a/b",
            Source::Nats {
                bucket: "inputs".into(),
                key: "a/b".into(),
            },
        );
        check(
            "s3://bkt/k/v.bin",
            Source::S3 {
                bucket: "bkt".into(),
                key: object_store::path::Path::parse("k/v.bin").unwrap(),
            },
        );
        check("file:///srv/data/x", Source::File("/srv/data/x".into()));
    }

    #[test]
    fn refuses_malformed_uris_as_the_jobs_fault() {
        let gateway = Url::parse("https://gw.example/").unwrap();
        for uri in [
            "ftp://host/x",
            "no-scheme",
            "http://",
            "ipfs://",
            "ipfs://cid/../../etc",
            "ipfs://cid/%2e%2e/x",
            "ipfs://cid/a\\..\\..\\x",
            "ipfs://c.d/x",
            "nats://bucket",
            "nats:///key",
            "s3://bucket/",
            "s3://Bad_Bucket/x",
            "s3://ab/x",
            "file://host/x",
        ] {
            let err = parse_source(uri, &gateway).unwrap_err();
            assert!(
                matches!(err, FetchError::UnsupportedUri(_)),
                "{uri}: {err:?}"
            );
            assert_eq!(err.class(), FaultClass::Job);
        }
    }

    proptest! {
        #[test]
        fn ipfs_paths_never_leave_the_cid(rest in "[a-zA-Z0-9]{1,8}(/[a-zA-Z0-9.%2eE\\\\/?#-]{0,12}){0,4}") {
            let gateway = Url::parse("https://gw.example/base/").unwrap();
            if let Ok(Source::Ipfs(url)) = parse_source(&format!("ipfs://{rest}"), &gateway) {
                let cid = rest.split('/').next().unwrap();
                let prefix = format!("https://gw.example/base/ipfs/{cid}/");
                prop_assert!(url.as_str().starts_with(&prefix), "{url}");
                prop_assert!(url.query().is_none() && url.fragment().is_none());
            }
        }
    }
}
