//! Who a request is counted against (the client IP, IPv6 by /64 or a wider prefix; an API-key header; a cookie; the
//! path), and the allow/deny list entries those keys are compared with.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};
use std::str::FromStr;

use crate::error::{Error, Result};

/// The header Cloudflare puts the client's address in; unlike `X-Forwarded-For`, a client cannot set it.
pub const CLIENT_IP_HEADER: &str = "cf-connecting-ip";

/// Where a rule reads its key from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The client IP (`CF-Connecting-IP`), IPv6 by its network of `ipv6_prefix` bits: a subscriber picks any
    /// address in its /64 (or a tunnel broker's /48) and must not multiply its limit by picking.
    Ip {
        /// Leading bits of an IPv6 address that name its client: 1 to 64 (others are read as the nearest).
        ipv6_prefix: u8,
    },
    /// A request header, e.g. an API key (`header:x-api-key`).
    Header(String),
    /// A cookie, e.g. a session (`cookie:session`).
    Cookie(String),
    /// The URL path: one shared limit per path, whoever asks.
    Path,
}

impl KeySource {
    /// The default key: the client IP, an IPv6 client by its /64.
    pub const IP: KeySource = KeySource::Ip { ipv6_prefix: 64 };
}

impl FromStr for KeySource {
    type Err = Error;

    /// `ip`, `ip/<IPv6 prefix bits>`, `path`, `header:<name>` or `cookie:<name>`.
    fn from_str(text: &str) -> Result<KeySource> {
        // Header and cookie names are HTTP tokens (RFC 9110, 6265): anything else makes `Headers.get` throw.
        let token_byte = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        let named = |kind: &str, name: &str| {
            if name.is_empty() || !name.bytes().all(token_byte) {
                return Err(Error::InvalidConfig(format!(
                    "key {text:?} needs a {kind} name after the colon, like \"{kind}:x-api-key\" (letters, digits \
                     and !#$%&'*+-.^_`|~ only)"
                )));
            }
            Ok(name.to_owned())
        };
        if let Some(bits) = text.strip_prefix("ip/") {
            return match bits.parse::<u8>() {
                Ok(ipv6_prefix @ 1..=64) if !bits.starts_with(['+', '0']) => Ok(KeySource::Ip { ipv6_prefix }),
                _ => Err(Error::InvalidConfig(format!(
                    "key {text:?}: \"ip/<bits>\" counts an IPv6 client by its network of that many bits, from 1 to \
                     64 (one subscriber picks any address in its /64), like \"ip/48\"; \"ip\" is \"ip/64\""
                ))),
            };
        }
        match text.split_once(':') {
            None if text == "ip" => Ok(KeySource::IP),
            None if text == "path" => Ok(KeySource::Path),
            Some(("header", name)) => Ok(KeySource::Header(named("header", name)?.to_ascii_lowercase())),
            Some(("cookie", name)) => Ok(KeySource::Cookie(named("cookie", name)?)),
            _ => Err(Error::InvalidConfig(format!(
                "key must be \"ip\", \"ip/<IPv6 prefix bits>\", \"path\", \"header:<name>\" or \"cookie:<name>\", got \
                 {text:?}"
            ))),
        }
    }
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::Ip { ipv6_prefix: 64 } => f.write_str("ip"),
            KeySource::Ip { ipv6_prefix } => write!(f, "ip/{ipv6_prefix}"),
            KeySource::Path => f.write_str("path"),
            KeySource::Header(name) => write!(f, "header:{name}"),
            KeySource::Cookie(name) => write!(f, "cookie:{name}"),
        }
    }
}

/// The key a request was counted under, before and after it is made fit for a Redis key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientKey {
    /// What the request carried (the IP, the header's or cookie's value, the path), which lists are compared with.
    pub raw: String,
    /// The identifier in Redis: `ip:<ip or IPv6 network>`, `path:<path>`, `header:<name>:<sha1>` or
    /// `cookie:<name>:<sha1>` (API keys and sessions never sit in key names).
    pub id: String,
}

/// A request's key from the values [`claimed_values`] read. A request without the header or cookie counts by its IP,
/// so leaving out the API key never escapes the limit; so does one with several different values (origins differ in
/// which one they read).
pub(crate) fn key_of(
    source: &KeySource,
    path: &str,
    claimed: &[String],
    header: &impl Fn(&str) -> Option<String>,
) -> ClientKey {
    match source {
        KeySource::Header(_) | KeySource::Cookie(_) => match claimed {
            [value, others @ ..] if others.iter().all(|other| other == value) => {
                ClientKey { id: format!("{source}:{}", sha1_smol::Sha1::from(value).digest()), raw: value.clone() }
            }
            _ => ip_key(header, 64),
        },
        KeySource::Path => {
            let path = path_key(path);
            ClientKey { id: format!("path:{path}"), raw: path }
        }
        KeySource::Ip { ipv6_prefix } => ip_key(header, *ipv6_prefix),
    }
}

/// A normalised path as a path key counts it: without a trailing `/` and in lower case, as rules match it.
fn path_key(path: &str) -> String {
    let trimmed = path.strip_suffix('/').filter(|trimmed| !trimmed.is_empty());
    trimmed.unwrap_or(path).to_ascii_lowercase()
}

/// The values a request carries for a header or cookie key, each spelt as origins read it: a header split at commas
/// (`Headers.get` joins lines with `, `), trimmed, an `Authorization` scheme lower-cased; a cookie's pairs split at
/// `;` and `,`, trimmed, unquoted and percent-decoded.
pub(crate) fn claimed_values(source: &KeySource, header: &impl Fn(&str) -> Option<String>) -> Vec<String> {
    let mut values: Vec<String> = match source {
        KeySource::Header(name) => header(name)
            .map(|joined| joined.split(',').map(|value| header_value(name, value)).collect())
            .unwrap_or_default(),
        KeySource::Cookie(name) => header("cookie")
            .map(|cookies| {
                (cookies.split([';', ',']))
                    .filter_map(|pair| pair.split_once('='))
                    .filter(|(key, _)| key.trim_matches(HTTP_SPACE) == name)
                    .map(|(_, value)| cookie_value(value))
                    .collect()
            })
            .unwrap_or_default(),
        KeySource::Ip { .. } | KeySource::Path => Vec::new(),
    };
    values.retain(|value| !value.is_empty());
    values
}

/// Spaces and tabs, which HTTP drops around field values (RFC 9110's OWS).
const HTTP_SPACE: [char; 2] = [' ', '\t'];

fn header_value(name: &str, value: &str) -> String {
    let value = value.trim_matches(HTTP_SPACE);
    match value.split_once(HTTP_SPACE) {
        Some((scheme, credentials)) if name == "authorization" || name == "proxy-authorization" => {
            format!("{} {}", scheme.to_ascii_lowercase(), credentials.trim_start_matches(HTTP_SPACE))
        }
        _ => value.to_owned(),
    }
}

fn cookie_value(value: &str) -> String {
    let value = value.trim_matches(HTTP_SPACE);
    let mut bytes = Vec::with_capacity(value.len());
    match value.strip_prefix('"').and_then(|inner| inner.strip_suffix('"')) {
        Some(quoted) => {
            // Python's SimpleCookie reads `\ooo` as an octal byte and `\c` as `c` in a quoted value.
            let mut rest = quoted.as_bytes();
            while let Some((&byte, tail)) = rest.split_first() {
                rest = tail;
                if byte != b'\\' {
                    bytes.push(byte);
                } else if let Some(octal) =
                    tail.get(..3).filter(|digits| digits.iter().all(|d| (b'0'..=b'7').contains(d)))
                {
                    bytes.push(octal.iter().fold(0u8, |n, d| n.wrapping_mul(8).wrapping_add(d - b'0')));
                    rest = &tail[3..];
                } else if let Some((&escaped, tail)) = tail.split_first() {
                    bytes.push(escaped);
                    rest = tail;
                }
            }
        }
        None => bytes.extend_from_slice(value.as_bytes()),
    }
    String::from_utf8_lossy(&percent_decoded(&bytes)).into_owned()
}

/// `%xx` decoded (either case of hex digit); a `%` not followed by two hex digits stays as it is.
pub(crate) fn percent_decoded(bytes: &[u8]) -> Vec<u8> {
    let hex = |at: usize| bytes.get(at).and_then(|&byte| (byte as char).to_digit(16));
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(high), Some(low)) => {
                decoded.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, ..) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    decoded
}

/// The client IP as a key, an IPv6 address by its network of `ipv6_prefix` bits (1 to 64); `ip:unknown` without a
/// readable `CF-Connecting-IP` (only outside Cloudflare).
pub(crate) fn ip_key(header: &impl Fn(&str) -> Option<String>, ipv6_prefix: u8) -> ClientKey {
    let raw = header(CLIENT_IP_HEADER).unwrap_or_default();
    let id = match raw.trim().parse::<IpAddr>().map(unmapped) {
        Ok(IpAddr::V4(v4)) => format!("ip:{v4}"),
        Ok(IpAddr::V6(v6)) => {
            // Held to 1..=64 here too (the field is public).
            let ipv6_prefix = ipv6_prefix.clamp(1, 64);
            let network = u128::from(v6) & (u128::MAX << (128 - u32::from(ipv6_prefix)));
            format!("ip:{}/{ipv6_prefix}", Ipv6Addr::from(network))
        }
        Err(_) => "ip:unknown".to_owned(),
    };
    ClientKey { raw, id }
}

/// An IPv4 client reported IPv4-mapped (`::ffff:203.0.113.7`) as its IPv4 address, so both count and list as one.
fn unmapped(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        v4 => v4,
    }
}

/// An allow or deny list entry: an IP range, or an exact header, cookie or path value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListEntry {
    /// An address range in CIDR form; a single address is a /32 or /128. It matches keys that are IPs only.
    Range {
        /// The range's first address.
        network: IpAddr,
        /// How many leading bits must match.
        prefix_len: u8,
    },
    /// A header, cookie or path value, compared exactly; never with an IP key.
    Exact(String),
}

impl ListEntry {
    /// Reads an entry for a rule keyed by `source`: an IP or range (`203.0.113.7`, `2001:db8::/32`), or for a
    /// header, cookie or path rule the exact value.
    pub fn parse(text: &str, source: &KeySource) -> Result<ListEntry> {
        let invalid = || {
            Error::InvalidConfig(format!(
                "{text:?} is not an IP address or range: write e.g. \"203.0.113.7\", \"198.51.100.0/24\" or \
                 \"2001:db8::/32\""
            ))
        };
        let range = || -> Result<ListEntry> {
            let (address, prefix_len) = match text.split_once('/') {
                Some((address, bits)) => (address, Some(bits.parse::<u8>().map_err(|_| invalid())?)),
                None => (text, None),
            };
            let network: IpAddr = address.trim().parse().map_err(|_| invalid())?;
            let max = if network.is_ipv4() { 32 } else { 128 };
            let prefix_len = prefix_len.unwrap_or(max);
            if prefix_len > max {
                return Err(invalid());
            }
            // An IPv4-mapped range (`::ffff:203.0.113.0/120`) is the IPv4 range, as the keys are.
            Ok(match network {
                IpAddr::V6(v6) if prefix_len >= 96 => match v6.to_ipv4_mapped() {
                    Some(v4) => ListEntry::Range { network: IpAddr::V4(v4), prefix_len: prefix_len - 96 },
                    None => ListEntry::Range { network, prefix_len },
                },
                _ => ListEntry::Range { network, prefix_len },
            })
        };
        // An exact value is spelt as requests' values are read (`claimed_values`).
        let value = match source {
            KeySource::Header(name) => header_value(name, text),
            KeySource::Cookie(_) => cookie_value(text),
            KeySource::Path => path_key(&super::request_match::normalize_path(text)),
            KeySource::Ip { .. } => text.to_owned(),
        };
        match source {
            KeySource::Ip { .. } => range(),
            _ => Ok(range().unwrap_or(ListEntry::Exact(value))),
        }
    }

    /// Whether this entry is the exact header, cookie or path value `value`.
    pub fn names(&self, value: &str) -> bool {
        matches!(self, ListEntry::Exact(exact) if exact == value)
    }

    /// Whether `key` is on this entry.
    pub fn contains(&self, key: &ClientKey) -> bool {
        let is_ip = key.id.starts_with("ip:");
        match self {
            ListEntry::Exact(value) => !is_ip && *value == key.raw,
            ListEntry::Range { .. } if !is_ip => false,
            ListEntry::Range { network, prefix_len } => match (key.raw.trim().parse::<IpAddr>().map(unmapped), network)
            {
                (Ok(IpAddr::V4(ip)), IpAddr::V4(net)) => {
                    same_prefix(ip.to_bits().into(), net.to_bits().into(), 32, *prefix_len)
                }
                (Ok(IpAddr::V6(ip)), IpAddr::V6(net)) => same_prefix(ip.to_bits(), net.to_bits(), 128, *prefix_len),
                _ => false,
            },
        }
    }
}

fn same_prefix(a: u128, b: u128, width: u8, prefix_len: u8) -> bool {
    let shift = u32::from(width - prefix_len);
    a.checked_shr(shift).unwrap_or(0) == b.checked_shr(shift).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client_key(source: &KeySource, path: &str, header: impl Fn(&str) -> Option<String>) -> ClientKey {
        key_of(source, path, &claimed_values(source, &header), &header)
    }

    fn headers<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_string())
    }

    #[test]
    fn ipv6_clients_are_counted_by_their_64() {
        let key = |ip| client_key(&KeySource::IP, "/", headers(&[("cf-connecting-ip", ip)])).id;
        assert_eq!(key("2001:db8:1:2:aaaa::1"), "ip:2001:db8:1:2::/64");
        assert_eq!(key("2001:db8:1:2:ffff:ffff:ffff:ffff"), key("2001:db8:1:2::9"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("203.0.113.7"), "ip:203.0.113.7");
        assert_eq!(key("::ffff:203.0.113.7"), "ip:203.0.113.7");
        assert_eq!(key("not an ip"), "ip:unknown");
    }

    #[test]
    fn a_wider_ipv6_prefix_counts_a_site_as_one() {
        let source: KeySource = "ip/48".parse().unwrap();
        assert_eq!(source.to_string(), "ip/48");
        assert_eq!("ip".parse::<KeySource>().unwrap(), KeySource::IP);
        assert_eq!("ip/64".parse::<KeySource>().unwrap().to_string(), "ip");
        let key = |ip| client_key(&source, "/", headers(&[("cf-connecting-ip", ip)])).id;
        assert_eq!(key("2001:db8:1:2:aaaa::1"), "ip:2001:db8:1::/48");
        assert_eq!(key("2001:db8:1:ffff::1"), key("2001:db8:1:2::1"));
        assert_ne!(key("2001:db8:2::1"), key("2001:db8:1::1"));
        assert_eq!(key("203.0.113.7"), "ip:203.0.113.7");
        let one = "ip/1".parse::<KeySource>().unwrap();
        assert_eq!(client_key(&one, "/", headers(&[("cf-connecting-ip", "ffff::1")])).id, "ip:8000::/1");
        for wrong in ["ip/65", "ip/128", "ip/0", "ip/", "ip/x", "ip/048", "ip/+48", "ip/ 48", "ip/4294967344"] {
            let error = wrong.parse::<KeySource>().unwrap_err().to_string();
            assert!(error.contains("from 1 to 64"), "{wrong}: {error}");
        }
    }

    #[test]
    fn secrets_are_hashed_and_missing_ones_fall_back_to_the_ip() {
        let source: KeySource = "header:X-API-Key".parse().unwrap();
        let with_key = client_key(&source, "/", headers(&[("x-api-key", "k1"), ("cf-connecting-ip", "192.0.2.1")]));
        assert_eq!(with_key.raw, "k1");
        assert_eq!(with_key.id, format!("header:x-api-key:{}", sha1_smol::Sha1::from("k1").digest()));
        let without = client_key(&source, "/", headers(&[("cf-connecting-ip", "192.0.2.1")]));
        assert_eq!(without.id, "ip:192.0.2.1");
        let cookie_source: KeySource = "cookie:session".parse().unwrap();
        let session = client_key(&cookie_source, "/", headers(&[("cookie", "theme=dark; session=\"abc\"")]));
        assert_eq!(session.raw, "abc");
        assert!(session.id.starts_with("cookie:session:"));
    }

    #[test]
    fn spellings_an_origin_reads_as_one_value_count_as_one_and_several_values_by_the_ip() {
        let ip = ("cf-connecting-ip", "192.0.2.1");
        let api: KeySource = "header:x-api-key".parse().unwrap();
        let key = |source: &KeySource, pairs: &[(&str, &str)]| client_key(source, "/", headers(pairs)).id;
        let real = key(&api, &[("x-api-key", "real"), ip]);
        for spelling in ["real\t", " real ", "real, real"] {
            assert_eq!(key(&api, &[("x-api-key", spelling), ip]), real, "{spelling:?}");
        }
        // Two header lines (joined with ", "): origins read either, so the request counts by its IP.
        assert_eq!(key(&api, &[("x-api-key", "real, fresh1"), ip]), "ip:192.0.2.1");
        let auth: KeySource = "header:authorization".parse().unwrap();
        let bearer = key(&auth, &[("authorization", "Bearer t0k")]);
        for spelling in ["bearer t0k", "BEARER  t0k", "Bearer\tt0k "] {
            assert_eq!(key(&auth, &[("authorization", spelling)]), bearer, "{spelling:?}");
        }
        assert_ne!(key(&auth, &[("authorization", "Bearer T0K")]), bearer, "credentials keep their case");
        let session: KeySource = "cookie:session".parse().unwrap();
        let real = key(&session, &[("cookie", "session=real"), ip]);
        for spelling in [
            "session= real",
            "session =real",
            "a=1; session=%72eal",
            "session=r%65al",
            "session=\"\\162eal\"",
            "session=\"r\\eal\"",
            "session=real; session=real",
        ] {
            assert_eq!(key(&session, &[("cookie", spelling), ip]), real, "{spelling:?}");
        }
        for several in ["session=fresh1; session=real", "session=fresh1, session=real"] {
            assert_eq!(key(&session, &[("cookie", several), ip]), "ip:192.0.2.1", "{several:?}");
            let values = claimed_values(&session, &headers(&[("cookie", several)]));
            assert_eq!(values, ["fresh1", "real"]);
            let many: String = (0..100).map(|i| format!("session={i}; ")).collect();
            assert_eq!(claimed_values(&session, &headers(&[("cookie", &many)])).len(), 100);
        }
        assert_eq!(key(&session, &[("cookie", "Session=real"), ip]), "ip:192.0.2.1", "names keep their case");
        // List entries are read as the values are: as written in the rule, they list every spelling of the value.
        let listed = |entry: &str, source: &KeySource, pairs: &[(&str, &str)]| {
            let entry = ListEntry::parse(entry, source).unwrap();
            let key = client_key(source, "/", headers(pairs));
            entry.contains(&key) && claimed_values(source, &headers(pairs)).iter().all(|value| entry.names(value))
        };
        assert!(listed("Bearer bad", &auth, &[("authorization", "Bearer bad")]));
        assert!(listed("Bearer bad", &auth, &[("authorization", "bearer  bad")]));
        assert!(listed("s%3Abad.sig", &session, &[("cookie", "session=s%3Abad.sig")]));
        assert!(listed("s%3Abad.sig", &session, &[("cookie", "session=s:bad.sig")]));
        assert!(listed(" real ", &api, &[("x-api-key", "real")]));
        for written in ["/admin/", "/%61dmin", "//Admin", "/admin"] {
            let entry = ListEntry::parse(written, &KeySource::Path).unwrap();
            assert!(entry.contains(&client_key(&KeySource::Path, "/admin", headers(&[]))), "{written}");
        }
    }

    #[test]
    fn key_sources_are_checked() {
        assert_eq!("path".parse::<KeySource>().unwrap(), KeySource::Path);
        let wrong = "user".parse::<KeySource>().unwrap_err().to_string();
        assert!(
            wrong.contains(
                "\"ip\", \"ip/<IPv6 prefix bits>\", \"path\", \"header:<name>\" or \"cookie:<name>\", got \"user\""
            ),
            "{wrong}"
        );
        assert!("header:".parse::<KeySource>().is_err());
        // Names that are no HTTP token would make reading the header throw on every request.
        for name in ["header:x-api-key,", "header:x/y", "header:(x)", "cookie:a=b", "header:x y", "cookie:é"] {
            let error = name.parse::<KeySource>().unwrap_err().to_string();
            assert!(error.contains("letters, digits"), "{name}: {error}");
        }
        assert!("header:X-Api_Key.v2~".parse::<KeySource>().is_ok());
    }

    #[test]
    fn list_entries_match_ranges_and_exact_values() {
        let ip = |text: &str| ClientKey { raw: text.into(), id: format!("ip:{text}") };
        let value = |text: &str| ClientKey { raw: text.into(), id: format!("header:x-api-key:{text}") };
        let range = ListEntry::parse("198.51.100.0/24", &KeySource::IP).unwrap();
        assert!(range.contains(&ip("198.51.100.200")));
        assert!(!range.contains(&ip("198.51.101.1")));
        assert!(!range.contains(&ip("2001:db8::1")));
        let v6 = ListEntry::parse("2001:db8::/32", &KeySource::IP).unwrap();
        assert!(v6.contains(&ip("2001:db8:ffff::1")));
        let everyone = ListEntry::parse("0.0.0.0/0", &KeySource::IP).unwrap();
        assert!(everyone.contains(&ip("203.0.113.9")));
        assert!(ListEntry::parse("198.51.100.0/33", &KeySource::IP).is_err());
        assert!(ListEntry::parse("example.com", &KeySource::IP).is_err());
        let header = KeySource::Header("x-api-key".into());
        let exact = ListEntry::parse("k1", &header).unwrap();
        assert!(exact.contains(&value("k1")) && !exact.contains(&value("k2")));
        // An IPv4 client reported IPv4-mapped is listed as its IPv4 address, whichever way the entry is written.
        assert!(ListEntry::parse("203.0.113.7", &KeySource::IP).unwrap().contains(&ip("::ffff:203.0.113.7")));
        let mapped = ListEntry::parse("::ffff:198.51.100.0/120", &KeySource::IP).unwrap();
        assert!(mapped.contains(&ip("198.51.100.9")) && !mapped.contains(&ip("198.51.101.9")));
        // On a header rule an IP entry lists the requests that count by their IP (no key), and only those: a client
        // sending a listed address as its key is not listed, nor is a request without a key by an exact value.
        let monitor = ListEntry::parse("192.0.2.10", &header).unwrap();
        assert!(monitor.contains(&ip("192.0.2.10")));
        assert!(!monitor.contains(&value("192.0.2.10")));
        assert!(!exact.contains(&ip("k1")));
    }
}
