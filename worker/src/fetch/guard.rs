//! The fence between a job's inputs and the provider's network: http(s) and ipfs inputs
//! reach public addresses only, unless the provider allows the host.
//!
//! ```text
//!   input url ──check_url──▶ ip literal: public, or allowed as written ──▶ connect
//!                            host name ──▶ GuardedResolver: allowed as written, or only
//!                                          its public addresses (none left: refused)
//!   each redirect hop ──check_url──▶ the same rules, at most MAX_REDIRECTS hops
//! ```
//!
//! The resolver is the guard for names (what reqwest connects to is what it returned, so a
//! name that resolves differently the second time gains nothing); literals never reach a
//! resolver, so they are checked on the URL, before the request and at each redirect. An
//! allowed host is matched as written in the URL: allowing `127.0.0.1` does not allow
//! `localhost`, `127.0.0.2` or a public name that resolves to `127.0.0.1`.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use url::{Host, Url};

/// Redirects followed for one input; past it the input is refused.
pub(super) const MAX_REDIRECTS: usize = 5;

/// Why the guard stopped a request. Travels inside reqwest's errors (from the resolver
/// or the redirect policy) and is found again in [`super::error::http_error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum Refused {
    #[error("private address")]
    PrivateAddress,
    #[error("too many redirects")]
    TooManyRedirects,
}

/// The hosts a provider lets inputs reach although they are not public, matched as
/// written in the URL: names in lowercase without a trailing dot, and IP literals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct AllowList {
    names: HashSet<String>,
    ips: HashSet<IpAddr>,
}

impl AllowList {
    /// Parses the provider's entries (see [`parse_host`]).
    pub(super) fn parse<S: AsRef<str>>(entries: &[S]) -> Result<Self, String> {
        let mut list = Self::default();
        for entry in entries {
            let entry = entry.as_ref();
            let host = parse_host(entry).map_err(|why| format!("{entry:?}: {why}"))?;
            list.insert(host);
        }
        Ok(list)
    }

    /// The list with `url`'s host allowed too (the ipfs gateway, chosen by the provider).
    pub(super) fn with_host_of(mut self, url: &Url) -> Self {
        if let Some(host) = url.host() {
            self.insert(host.to_owned());
        }
        self
    }

    fn insert(&mut self, host: Host) {
        match host {
            Host::Domain(name) => {
                self.names.insert(normalize_name(&name));
            }
            Host::Ipv4(ip) => {
                self.ips.insert(IpAddr::V4(ip));
            }
            Host::Ipv6(ip) => {
                self.ips.insert(IpAddr::V6(ip));
            }
        }
    }

    fn allows_name(&self, name: &str) -> bool {
        self.names.contains(&normalize_name(name))
    }

    fn allows_ip(&self, ip: IpAddr) -> bool {
        self.ips.contains(&ip)
    }
}

/// One allowed host: a name (`data.lan`) or an IP literal (`10.0.0.5`, `::1`, `[::1]`),
/// without scheme, port or path.
pub(super) fn parse_host(entry: &str) -> Result<Host, &'static str> {
    let entry = entry.trim();
    if entry.is_empty() {
        return Err("empty host");
    }
    let bare = entry
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or(entry);
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(match ip {
            IpAddr::V4(ip) => Host::Ipv4(ip),
            IpAddr::V6(ip) => Host::Ipv6(ip),
        });
    }
    // The URL parser's own rules, so that an entry matches what a URL's host becomes
    // (lowercase, punycode, `0x7f.1` as 127.0.0.1); `:`, `/` and `@` are refused there.
    Host::parse(entry).map_err(|_| "not a host name or IP address (no scheme, port or path)")
}

fn normalize_name(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether `url` may be requested: an IP literal must be public or allowed; a name is
/// left to the [`GuardedResolver`].
pub(super) fn check_url(allow: &AllowList, url: &Url) -> Result<(), Refused> {
    let ip = match url.host() {
        Some(Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(Host::Ipv6(ip)) => IpAddr::V6(ip),
        Some(Host::Domain(_)) | None => return Ok(()),
    };
    if is_public(ip) || allow.allows_ip(ip) {
        Ok(())
    } else {
        Err(Refused::PrivateAddress)
    }
}

/// The redirect policy of a guarded client: each hop checked as the first URL was, at
/// most [`MAX_REDIRECTS`] of them.
pub(super) fn redirect_policy(allow: Arc<AllowList>) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(Refused::TooManyRedirects);
        }
        match check_url(&allow, attempt.url()) {
            Ok(()) => attempt.follow(),
            Err(refused) => attempt.error(refused),
        }
    })
}

/// Resolves names with the system resolver and keeps only their public addresses,
/// unless the name itself is allowed.
#[derive(Debug)]
pub(super) struct GuardedResolver {
    allow: Arc<AllowList>,
}

impl GuardedResolver {
    pub(super) fn new(allow: Arc<AllowList>) -> Self {
        Self { allow }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = self.allow.clone();
        Box::pin(async move {
            let host = name.as_str();
            let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host, 0)).await?.collect();
            let allowed = allow.allows_name(host);
            let kept: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|addr| allowed || is_public(addr.ip()))
                .collect();
            if kept.is_empty() {
                return Err(Refused::PrivateAddress.into());
            }
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

/// Whether `ip` is a public unicast address: not loopback, private, link-local, shared
/// (CGNAT), unspecified, broadcast, multicast, reserved, documentation or benchmarking,
/// nor an IPv6 form of such an IPv4 address (mapped, NAT64, 6to4).
pub(super) fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => is_public_v4(ip),
        IpAddr::V6(ip) => is_public_v6(ip),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    match ip.octets() {
        // "This network" (0.0.0.0 among them), private, loopback.
        [0 | 10 | 127, ..] => false,
        // Shared address space (CGNAT), 100.64/10.
        [100, b, ..] if (64..128).contains(&b) => false,
        // Link-local: cloud metadata services live here.
        [169, 254, ..] => false,
        // Private, 172.16/12 and 192.168/16.
        [172, b, ..] if (16..32).contains(&b) => false,
        [192, 168, ..] => false,
        // IETF protocol assignments, 6to4 relay anycast, benchmarking.
        [192, 0, 0, _] | [192, 88, 99, _] | [198, 18 | 19, ..] => false,
        // Documentation.
        [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _] => false,
        // Below multicast (224/4), reserved (240/4) and broadcast.
        [a, ..] => a < 224,
    }
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    let embedded_v4 = |high: u16, low: u16| {
        let [h1, h2] = high.to_be_bytes();
        let [l1, l2] = low.to_be_bytes();
        Ipv4Addr::new(h1, h2, l1, l2)
    };
    match segments {
        // ::ffff:a.b.c.d (mapped) is the IPv4 address itself.
        [0, 0, 0, 0, 0, 0xffff, high, low] => is_public_v4(embedded_v4(high, low)),
        // ::/96: unspecified, loopback, the deprecated IPv4-compatible addresses.
        [0, 0, 0, 0, 0, 0, _, _] => false,
        // 64:ff9b::/96, NAT64: a gateway would reach the IPv4 address inside.
        [0x64, 0xff9b, 0, 0, 0, 0, high, low] => is_public_v4(embedded_v4(high, low)),
        // 64:ff9b:1::/48, NAT64 for local use.
        [0x64, 0xff9b, 1, ..] => false,
        // 100::/64, discard only.
        [0x100, 0, 0, 0, ..] => false,
        // 2002::/16, 6to4: a relay would reach the IPv4 address in the next 32 bits.
        [0x2002, high, low, ..] => is_public_v4(embedded_v4(high, low)),
        // 2001::/23: IETF assignments (Teredo, benchmarking, ORCHID).
        [0x2001, second, ..] if second < 0x200 => false,
        // 2001:db8::/32: documentation.
        [0x2001, 0x0db8, ..] => false,
        [first, ..] => {
            let unique_local = first & 0xfe00 == 0xfc00; // fc00::/7
            let link_local = first & 0xffc0 == 0xfe80; // fe80::/10
            let site_local = first & 0xffc0 == 0xfec0; // fec0::/10
            let multicast = first & 0xff00 == 0xff00; // ff00::/8
            !(unique_local || link_local || site_local || multicast)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_unicast_addresses_are_public() {
        let check = |text: &str, public: bool| {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(is_public(ip), public, "{text}");
        };
        for refused in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "10.255.255.255",
            "100.64.0.1",
            "100.127.255.255",
            "127.0.0.1",
            "127.0.0.2",
            "127.255.255.254",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.88.99.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.255",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::127.0.0.1",
            "::ffff:127.0.0.1",
            "::ffff:10.1.2.3",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "64:ff9b:1::1",
            "100::1",
            "2001::1",
            "2001:2::1",
            "2001:db8::1",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
        ] {
            check(refused, false);
        }
        for public in [
            "1.1.1.1",
            "8.8.8.8",
            "100.63.255.255",
            "100.128.0.0",
            "172.15.255.255",
            "172.32.0.0",
            "192.0.1.1",
            "192.169.0.1",
            "198.20.0.1",
            "223.255.255.255",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2001:4860:4860::8888",
            "2606:4700::1111",
            "2a00:1450::1",
        ] {
            check(public, true);
        }
    }

    #[test]
    fn allowed_hosts_match_as_written() {
        let allow = AllowList::parse(&["127.0.0.1", "Data.LAN.", "[::1]", "fd00::5"]).unwrap();
        let check = |url: &str, allowed: bool| {
            let url = Url::parse(url).unwrap();
            assert_eq!(check_url(&allow, &url).is_ok(), allowed, "{url}");
        };
        check("http://127.0.0.1:8080/x", true);
        check("http://[::1]/x", true);
        check("http://[fd00::5]/x", true);
        check("http://127.0.0.2/x", false);
        check("http://[::ffff:127.0.0.1]/x", false);
        check("http://0x7f.1/x", true); // the URL parser's 127.0.0.1
        check("http://2130706433/x", true);
        check("http://10.0.0.1/x", false);
        check("https://93.184.215.14/x", true);
        // Names are the resolver's to judge.
        check("http://localhost/x", true);
        assert!(allow.allows_name("data.lan"));
        assert!(allow.allows_name("DATA.lan."));
        assert!(!allow.allows_name("localhost"));
        assert!(!allow.allows_name("127.0.0.1"), "an ip is not a name");
    }

    #[test]
    fn allowed_hosts_are_hosts_only() {
        for bad in [
            "",
            " ",
            "http://data.lan",
            "data.lan:8080",
            "data.lan/x",
            "user@data.lan",
            "[::1]:80",
        ] {
            assert!(AllowList::parse(&[bad]).is_err(), "{bad:?}");
        }
        let gateway = Url::parse("http://127.0.0.1:8080/").unwrap();
        let with_gateway = AllowList::default().with_host_of(&gateway);
        assert!(with_gateway.allows_ip(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    }
}
