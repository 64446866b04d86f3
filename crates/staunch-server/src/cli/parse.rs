//! Parsers of the flags' values: a duration in the unit a flag's name says, a count that cannot
//! be zero, an address to listen on.

use std::time::Duration;

use crate::units::parse_duration;

/// A `*-ms` flag: a bare number is milliseconds (the unit in the flag's name); anything else is
/// a duration in the one grammar (`1.5s`, `2m`, `1h30m`).
pub fn parse_millis(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if let Ok(n) = t.parse::<u64>() {
        return Ok(n);
    }
    if t.parse::<f64>().is_ok() {
        return Err(format!(
            "{t:?}: a bare number here is whole milliseconds; for a fraction write a duration \
             such as 1.5s"
        ));
    }
    let d = parse_duration(t)?;
    u64::try_from(d.as_millis()).map_err(|_| format!("{t:?} is too long"))
}

/// A `*-secs` flag: a bare number is seconds (the unit in the flag's name); anything else is a
/// duration in the one grammar (`90m`, `7d`), in whole seconds.
pub fn parse_secs(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if let Ok(n) = t.parse::<u64>() {
        return Ok(n);
    }
    let d = parse_duration(t)?;
    if d.subsec_nanos() != 0 {
        return Err(format!("{t:?} is not a whole number of seconds"));
    }
    Ok(d.as_secs())
}

/// A count that cannot be zero (`--max-in-flight`, `--job-workers`): zero would refuse every
/// request or never run a job, which is never what was meant.
pub fn parse_at_least_one(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a whole number")),
    }
}

/// An address to listen on: `127.0.0.1:8080`, `[::1]:8080`, or a host name with a port
/// (`localhost:8080`), resolved once at start; a name with IPv4 and IPv6 addresses binds the
/// IPv4 one.
pub fn parse_listen_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    if let Ok(addr) = s.parse() {
        return Ok(addr);
    }
    if !s.contains(':') {
        return Err(format!(
            "{s:?} has no port; write HOST:PORT, e.g. 127.0.0.1:8080 or localhost:8080"
        ));
    }
    let addrs: Vec<std::net::SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(s)
        .map_err(|e| format!("{s:?} is not an address to listen on ({e}); write HOST:PORT"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("{s:?} resolves to no address"))
}

/// A library default in a `*-ms` flag's unit.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A library default in a `*-secs` flag's unit.
pub fn secs(d: Duration) -> u64 {
    d.as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_flags_take_a_bare_number_in_their_unit_or_any_duration() {
        assert_eq!(parse_millis("2000"), Ok(2000));
        assert_eq!(parse_millis("2s"), Ok(2000));
        assert_eq!(parse_millis("1.5s"), Ok(1500));
        assert_eq!(parse_millis("1m30s"), Ok(90_000));
        assert!(
            parse_millis("1.5")
                .unwrap_err()
                .contains("whole milliseconds")
        );
        assert!(parse_millis("soon").unwrap_err().contains("1h30m"));
        assert_eq!(parse_secs("3600"), Ok(3600));
        assert_eq!(parse_secs("7d"), Ok(7 * 86_400));
        assert_eq!(parse_secs("1h30m"), Ok(5400));
        assert!(
            parse_secs("1500ms")
                .unwrap_err()
                .contains("whole number of seconds")
        );
        assert_eq!(parse_at_least_one("3"), Ok(3));
        assert!(parse_at_least_one("0").unwrap_err().contains("at least 1"));
        assert!(parse_at_least_one("x").is_err());
    }

    #[test]
    fn listen_addresses_take_names() {
        assert_eq!(
            parse_listen_addr("127.0.0.1:8080").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(
            parse_listen_addr("[::1]:9").unwrap(),
            "[::1]:9".parse().unwrap()
        );
        let local = parse_listen_addr("localhost:8097").unwrap();
        assert!(local.ip().is_loopback() && local.port() == 8097, "{local}");
        assert!(
            parse_listen_addr("localhost")
                .unwrap_err()
                .contains("no port")
        );
        assert!(parse_listen_addr("localhost:99999").is_err());
    }
}
