//! The upstreams of `staunch proxy` (and of `[[upstream]]` tables) as `staunch serve` runs
//! them: how they are described, connected, announced and, with `--isolate`, reaped. The
//! proxy's own flags live in `proxy_cmd`; this is what serving needs of them.

use std::ffi::OsString;
use std::time::Duration;

use staunch_client::ConnectOptions;
use staunch_proxy::{Registered, Target, ToolRule, UpstreamSpec};

/// How often idle per-session upstreams (`--isolate`) are looked for.
const REAP_EVERY: Duration = Duration::from_secs(30);

/// An `[[upstream]]` of `staunch.toml` as the proxy runs it.
pub fn spec_from_config(u: &staunch_command::config::UpstreamConfig) -> UpstreamSpec {
    use staunch_command::config::UpstreamTarget;
    let target = match &u.target {
        UpstreamTarget::Command { argv, env, cwd } => Target::Stdio {
            program: argv[0].clone().into(),
            args: argv[1..].iter().map(OsString::from).collect(),
            env: env
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .collect(),
            cwd: cwd.clone(),
        },
        UpstreamTarget::Url { url, headers } => Target::Http {
            url: url.clone(),
            headers: headers.clone(),
        },
    };
    let mut spec = UpstreamSpec::new(u.name.clone(), target);
    spec.prefix = u.prefix.clone();
    spec.default_shape = u.default_shape;
    spec.isolate = u.isolate;
    spec.protocol = u.protocol.clone();
    spec.kill_after_cancel = u.kill_after_cancel;
    spec.question_wait = u.question_wait.unwrap_or(staunch_proxy::QUESTION_WAIT);
    for (name, r) in &u.tools {
        spec.tools.insert(
            name.clone(),
            ToolRule {
                shape: r.shape,
                deadline: r.deadline,
                retry_safe: r.retry_safe,
                side_effects: r.side_effects,
                kill_after_cancel: r.kill_after_cancel,
            },
        );
    }
    spec
}

/// How the proxy connects upstream: it offers to forward sampling and elicitation to the
/// downstream client that caused them.
pub fn connect_options() -> ConnectOptions {
    ConnectOptions {
        client_name: "staunch-proxy".into(),
        capabilities: serde_json::json!({"sampling": {}, "elicitation": {}}),
        ..ConnectOptions::default()
    }
}

/// One line per upstream on stderr: what is served.
pub fn announce(r: &Registered) {
    for pool in &r.pools {
        let up = pool.shared();
        let n = r.tools.iter().filter(|t| t.1 == up.name()).count();
        eprintln!(
            "staunch proxy: {} tools from {:?} ({}, protocol {})",
            n,
            up.name(),
            pool.spec().target.display(),
            up.protocol_version().unwrap_or_default()
        );
    }
}

/// With `--isolate`, ends per-session upstreams idle for the session idle time: a backstop,
/// since a session's upstream ends when the session does ([`staunch_proxy::Pool`]).
pub fn reap_isolated(r: &Registered, idle: Duration) {
    for pool in r.pools.iter().filter(|p| p.spec().isolate) {
        let pool = pool.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(REAP_EVERY);
            loop {
                tick.tick().await;
                pool.reap_idle(idle).await;
            }
        });
    }
}
