//! NATS addresses as the services take them: one URL or a comma-separated list, with
//! credentials in the URL (`nats://worker-7:secret@nats-1:4222`). The NATS client ignores
//! a URL's user and password, so each service splits them off here and passes them as
//! connect options, with the user's own inbox prefix for replies.

/// A user and password for NATS; `Debug` does not show the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Servers without credentials, and the credentials found (the first URL's that has any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsAddress {
    /// What to connect to, safe to show in logs and errors.
    pub servers: String,
    pub credentials: Option<Credentials>,
}

impl NatsAddress {
    /// Splits `urls` (`nats://user:password@host:port`, comma-separated for several
    /// servers). User and password may be percent-encoded.
    pub fn parse(urls: &str) -> Self {
        let mut credentials = None;
        let servers: Vec<String> = urls
            .split(',')
            .map(str::trim)
            .filter(|url| !url.is_empty())
            .map(|url| {
                let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
                    return url.to_owned();
                };
                let rest = &url[scheme_end..];
                let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
                let Some(at) = authority.rfind('@') else {
                    return url.to_owned();
                };
                let (user, password) = authority[..at]
                    .split_once(':')
                    .unwrap_or((&authority[..at], ""));
                credentials.get_or_insert_with(|| Credentials {
                    user: percent_decode(user),
                    password: percent_decode(password),
                });
                format!("{}{}", &url[..scheme_end], &rest[at + 1..])
            })
            .collect();
        Self {
            servers: servers.join(","),
            credentials,
        }
    }
}

/// The reply subjects of `user`'s requests and pulls (`<prefix>.>`): each user has its
/// own, and may subscribe to nothing else of the kind (`gantry_protocol::nats_auth`), so no user
/// reads another's replies.
pub fn inbox_prefix(user: &str) -> String {
    format!("_INBOX_{user}")
}

#[cfg(feature = "nats")]
impl NatsAddress {
    /// Connect options carrying the credentials, if any, and then the user's own inbox
    /// prefix ([`inbox_prefix`]); connect them to [`Self::servers`].
    pub fn connect_options(&self) -> async_nats::ConnectOptions {
        match &self.credentials {
            Some(c) => async_nats::ConnectOptions::with_user_and_password(
                c.user.clone(),
                c.password.clone(),
            )
            .custom_inbox_prefix(inbox_prefix(&c.user)),
            None => async_nats::ConnectOptions::new(),
        }
    }
}

fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::{Credentials, NatsAddress};

    #[test]
    fn credentials_are_split_off_every_server() {
        let address = NatsAddress::parse("nats://worker-7:s3cret@nats-1:4222, nats://nats-2:4222");
        assert_eq!(address.servers, "nats://nats-1:4222,nats://nats-2:4222");
        assert_eq!(
            address.credentials,
            Some(Credentials {
                user: "worker-7".into(),
                password: "s3cret".into()
            })
        );
        assert!(!format!("{address:?}").contains("s3cret"));
        let encoded = NatsAddress::parse("nats://a%40b:p%3Aw@127.0.0.1:4222/");
        assert_eq!(encoded.servers, "nats://127.0.0.1:4222/");
        let credentials = encoded.credentials.unwrap();
        assert_eq!(
            (credentials.user.as_str(), credentials.password.as_str()),
            ("a@b", "p:w")
        );
        let plain = NatsAddress::parse("nats://127.0.0.1:4222");
        assert_eq!(
            (plain.servers.as_str(), plain.credentials),
            ("nats://127.0.0.1:4222", None)
        );
    }
}
