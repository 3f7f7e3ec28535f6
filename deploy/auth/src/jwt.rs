//! NATS JWTs, as much of them as an auth callout in config mode needs: read the server's
//! authorization request, write the response and the user it admits. No crate fits
//! (design 19, §1): `nats-jwt` requires an `issuer_account` and has no `aud`.
//!
//! A NATS JWT is `base64url(header).base64url(claims).base64url(ed25519 signature)`, the
//! header `{"typ":"JWT","alg":"ed25519-nkey"}`, the signature by an nkey over the first two
//! parts; `jti` is the base32 (no padding) SHA-512/256 of the claims without it.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use gantry_protocol::nats_auth::{ACCOUNT, Permissions};
use nkeys::KeyPair;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::Digest as _;

const HEADER: &str = r#"{"typ":"JWT","alg":"ed25519-nkey"}"#;
/// The audience of the server's authorization requests.
const REQUEST_AUDIENCE: &str = "nats-authorization-request";

/// Why a JWT could not be read.
#[derive(Debug, thiserror::Error)]
pub enum JwtError {
    #[error("not three base64url parts")]
    Shape,
    #[error("its claims are not JSON of the expected shape")]
    Claims(#[source] serde_json::Error),
    #[error("its signer {0} is not a server key")]
    Issuer(String),
    #[error("its signature does not verify")]
    Signature,
    #[error("its audience is {0:?}")]
    Audience(String),
}

/// What the service reads of the server's authorization request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The key the server made for the connecting client: the user JWT's subject.
    pub user_nkey: String,
    /// The server asking: the response's audience.
    pub server_id: String,
    /// What the client sent as its `auth_token` (the handshake token), if anything.
    pub auth_token: Option<String>,
    /// The client's address, for logs.
    pub host: Option<String>,
    /// When the server stops waiting for the answer (unix seconds), if it says.
    pub expires: Option<u64>,
}

#[derive(Deserialize)]
struct RequestClaims {
    iss: String,
    aud: String,
    exp: Option<u64>,
    nats: RequestBody,
}

#[derive(Deserialize)]
struct RequestBody {
    user_nkey: String,
    server_id: ServerId,
    #[serde(default)]
    connect_opts: ConnectOpts,
    #[serde(default)]
    client_info: ClientInfo,
}

#[derive(Deserialize)]
struct ServerId {
    id: String,
}

#[derive(Default, Deserialize)]
struct ConnectOpts {
    auth_token: Option<String>,
}

#[derive(Default, Deserialize)]
struct ClientInfo {
    host: Option<String>,
}

/// Reads an authorization request: signed by the server key it names (`N…`), for the
/// callout's audience.
pub fn read_request(token: &[u8]) -> Result<Request, JwtError> {
    let token = std::str::from_utf8(token).map_err(|_| JwtError::Shape)?;
    let mut parts = token.split('.');
    let (Some(header), Some(claims), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwtError::Shape);
    };
    let claims_json = B64.decode(claims).map_err(|_| JwtError::Shape)?;
    let signature = B64.decode(signature).map_err(|_| JwtError::Shape)?;
    let read: RequestClaims = serde_json::from_slice(&claims_json).map_err(JwtError::Claims)?;
    if !read.iss.starts_with('N') {
        return Err(JwtError::Issuer(read.iss));
    }
    let server = KeyPair::from_public_key(&read.iss).map_err(|_| JwtError::Issuer(read.iss))?;
    server
        .verify(format!("{header}.{claims}").as_bytes(), &signature)
        .map_err(|_| JwtError::Signature)?;
    if read.aud != REQUEST_AUDIENCE {
        return Err(JwtError::Audience(read.aud));
    }
    Ok(Request {
        user_nkey: read.nats.user_nkey,
        server_id: read.nats.server_id.id,
        auth_token: read.nats.connect_opts.auth_token,
        host: read.nats.client_info.host,
        expires: read.exp,
    })
}

/// The user JWT the server admits `request`'s client with: named `name`, in account
/// GANTRY, allowed `permissions`, expiring at unix second `expires`.
pub fn user(
    issuer: &KeyPair,
    request: &Request,
    name: &str,
    permissions: &Permissions,
    now: u64,
    expires: u64,
) -> String {
    encode(
        issuer,
        now,
        json!({
            "sub": request.user_nkey,
            "aud": ACCOUNT,
            "name": name,
            "exp": expires,
            "nats": {
                // Both lists always: an absent one would allow everything.
                "pub": {"allow": permissions.publish},
                "sub": {"allow": permissions.subscribe},
                "type": "user",
                "version": 2,
            },
        }),
    )
}

/// The response to `request`: its user JWT, or the reason it is refused.
pub fn response(
    issuer: &KeyPair,
    request: &Request,
    now: u64,
    answer: Result<String, String>,
) -> String {
    let mut nats = json!({"type": "authorization_response", "version": 2});
    match answer {
        Ok(user) => nats["jwt"] = json!(user),
        Err(error) => nats["error"] = json!(error),
    }
    encode(
        issuer,
        now,
        json!({"sub": request.user_nkey, "aud": request.server_id, "nats": nats}),
    )
}

/// Signs `claims` as `issuer` at `now`, adding `iss`, `iat` and `jti`.
fn encode(issuer: &KeyPair, now: u64, mut claims: Value) -> String {
    claims["iss"] = json!(issuer.public_key());
    claims["iat"] = json!(now);
    let digest = sha2::Sha512_256::digest(claims.to_string().as_bytes());
    claims["jti"] = json!(data_encoding::BASE32_NOPAD.encode(&digest));
    let signing_input = format!("{}.{}", B64.encode(HEADER), B64.encode(claims.to_string()));
    let signature = issuer
        .sign(signing_input.as_bytes())
        .expect("an account key pair has its seed");
    format!("{signing_input}.{}", B64.encode(signature))
}

/// The claims of a JWT this module wrote, unverified (tests).
pub fn claims(token: &str) -> Option<Value> {
    let claims = token.split('.').nth(1)?;
    serde_json::from_slice(&B64.decode(claims).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request_from(server: &KeyPair, aud: &str) -> String {
        let claims = json!({
            "iss": server.public_key(), "aud": aud, "sub": "A", "iat": 1,
            "nats": {
                "user_nkey": "UNEW", "server_id": {"id": server.public_key()},
                "connect_opts": {"auth_token": "{\"v\":1}"},
                "client_info": {"host": "127.0.0.1"},
                "type": "authorization_request", "version": 2,
            },
        });
        encode(server, 1, claims)
    }

    #[test]
    fn a_servers_request_is_read_and_a_forged_one_is_not() {
        let server = KeyPair::new_server();
        let request = read_request(request_from(&server, REQUEST_AUDIENCE).as_bytes()).unwrap();
        assert_eq!(request.user_nkey, "UNEW");
        assert_eq!(request.server_id, server.public_key());
        assert_eq!(request.auth_token.as_deref(), Some("{\"v\":1}"));

        let forged = request_from(&server, REQUEST_AUDIENCE);
        let mut parts: Vec<&str> = forged.split('.').collect();
        let other = request_from(&KeyPair::new_server(), REQUEST_AUDIENCE);
        parts[2] = other.split('.').nth(2).unwrap();
        assert!(matches!(
            read_request(parts.join(".").as_bytes()),
            Err(JwtError::Signature)
        ));
        let account = KeyPair::new_account();
        assert!(matches!(
            read_request(request_from(&account, REQUEST_AUDIENCE).as_bytes()),
            Err(JwtError::Issuer(_))
        ));
        assert!(matches!(
            read_request(request_from(&server, "elsewhere").as_bytes()),
            Err(JwtError::Audience(_))
        ));
        for junk in ["", "a.b", "a.b.c.d", "!!.!!.!!"] {
            assert!(read_request(junk.as_bytes()).is_err(), "{junk}");
        }
    }

    #[test]
    fn a_user_names_both_permission_lists_and_verifies_with_the_issuer() {
        let issuer = KeyPair::new_account();
        let request = Request {
            user_nkey: "UABC".into(),
            server_id: "NSRV".into(),
            auth_token: None,
            host: None,
            expires: None,
        };
        let permissions = Permissions {
            publish: vec!["a.>".into()],
            subscribe: vec!["_INBOX_worker-3.>".into()],
        };
        let user = user(&issuer, &request, "worker-3", &permissions, 10, 70);
        let claims = claims(&user).unwrap();
        assert_eq!(claims["aud"], "GANTRY");
        assert_eq!(claims["exp"], 70);
        assert_eq!(claims["nats"]["pub"]["allow"][0], "a.>");
        assert_eq!(claims["nats"]["sub"]["allow"][0], "_INBOX_worker-3.>");
        let (input, signature) = user.rsplit_once('.').unwrap();
        KeyPair::from_public_key(&issuer.public_key())
            .unwrap()
            .verify(input.as_bytes(), &B64.decode(signature).unwrap())
            .unwrap();
        let response = response(&issuer, &request, 10, Err("no".into()));
        let answer = super::claims(&response).unwrap();
        assert_eq!(
            (answer["aud"].as_str(), answer["nats"]["error"].as_str()),
            (Some("NSRV"), Some("no"))
        );
    }
}
