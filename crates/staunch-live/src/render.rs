//! What the live page shows: the requests in flight, the proxy's upstream work after a cancel
//! and the newest jobs, rendered here as HTML table rows (one rendering path, escaped once) for
//! the page and for every update of its stream.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use staunch_jobs::{owning_instance, progress_fraction, progress_of, short_age};
use staunch_server::Server;
use staunch_store::{JobFilter, JobRecord, JobState, JobStore};

/// Jobs shown (newest first).
const JOBS_SHOWN: usize = 50;

pub(crate) struct Snapshot {
    pub(crate) requests: String,
    pub(crate) jobs: String,
    /// `None` when nothing is proxied (the section stays hidden).
    pub(crate) upstream: Option<String>,
    pub(crate) at: String,
}

pub(crate) async fn snapshot(
    server: &Server,
    jobs: &dyn JobStore,
    upstreams: &[Arc<staunch_proxy::Pool>],
) -> Snapshot {
    let now = staunch_store::now_ms();
    let requests = requests_rows(server);
    let upstream = (!upstreams.is_empty()).then(|| upstream_rows(upstreams));
    let jobs = match jobs
        .list_all(&JobFilter {
            limit: JOBS_SHOWN,
            ..JobFilter::default()
        })
        .await
    {
        Ok(list) => jobs_rows(&list, now),
        Err(e) => format!(
            "<tr><td colspan=\"7\" class=\"err\">could not read jobs: {}</td></tr>",
            escape(&e.to_string())
        ),
    };
    Snapshot {
        requests,
        jobs,
        upstream,
        at: staunch_jobs::iso(now),
    }
}

/// Calls whose upstream kept working after the proxy gave up on them, newest first.
fn upstream_rows(upstreams: &[Arc<staunch_proxy::Pool>]) -> String {
    let mut all: Vec<staunch_proxy::LateWork> =
        upstreams.iter().flat_map(|p| p.ledger().recent()).collect();
    if all.is_empty() {
        return "<tr><td colspan=\"8\" class=\"none\">none seen: no upstream sent anything \
                after a cancel, and none had to be killed</td></tr>"
            .into();
    }
    all.sort_by_key(|w| std::cmp::Reverse(w.abandoned_at));
    let mut out = String::new();
    for w in all {
        let stopped = match w.stopped {
            Some(true) => "killed after the grace",
            Some(false) => "exited after stdin closed",
            None => "—",
        };
        let _ = write!(
            out,
            "<tr class=\"orphaned\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{stopped}</td></tr>",
            escape(&w.upstream),
            escape(&w.tool),
            escape(&w.session),
            escape(&w.request_id),
            ms_text(w.went_on_for()),
            w.progress,
            if w.response { "yes" } else { "no" },
        );
    }
    out
}

fn ms_text(d: Duration) -> String {
    short_age(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn requests_rows(server: &Server) -> String {
    let list = server.in_flight_requests();
    if list.is_empty() {
        return "<tr><td colspan=\"5\" class=\"none\">nothing in flight</td></tr>".into();
    }
    let mut out = String::new();
    for r in list {
        let (class, cancel) = match &r.cancel {
            None => ("", "—".to_string()),
            Some(c) => (
                if r.orphaned { "orphaned" } else { "cancelled" },
                format!(
                    "{} {} ago ({}){}",
                    if c.answers { "deadline" } else { "cancelled" },
                    ms_text(c.since),
                    escape(&c.reason),
                    if r.orphaned {
                        " — ORPHANED: still running past the grace period"
                    } else {
                        ""
                    }
                ),
            ),
        };
        let _ = write!(
            out,
            "<tr class=\"{class}\" data-request-id=\"{}\"><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{cancel}</td></tr>",
            escape(&r.request_id),
            escape(&r.connection),
            escape(&r.request_id),
            escape(&r.what),
            ms_text(r.elapsed),
        );
    }
    out
}

fn jobs_rows(jobs: &[JobRecord], now_ms: i64) -> String {
    if jobs.is_empty() {
        return "<tr><td colspan=\"7\" class=\"none\">no jobs</td></tr>".into();
    }
    let mut out = String::new();
    for j in jobs {
        let state = if j.state == JobState::Running && j.cancel_requested_ms.is_some() {
            "cancelling"
        } else {
            j.state.as_str()
        };
        let done = progress_of(j).map_or(0.0, |(d, _, _)| d);
        let fraction = progress_fraction(j);
        let label = match progress_of(j) {
            Some((_, _, Some(m))) => m,
            Some((d, Some(t), _)) => format!("{d} of {t}"),
            Some((d, None, _)) => format!("{d}"),
            None => String::new(),
        };
        let pct = fraction.map_or(0.0, |f| f * 100.0);
        let button = if j.state.is_terminal() || j.cancel_requested_ms.is_some() {
            String::new()
        } else {
            format!(
                "<button class=\"cancel\" data-job=\"{}\">Cancel</button>",
                escape(&j.id)
            )
        };
        let _ = write!(
            out,
            "<tr class=\"job {state}\" data-job-id=\"{id}\" data-state=\"{state}\" data-done=\"{done}\">\
             <td class=\"id\" title=\"{id}\">{short}</td><td>{tool}</td><td class=\"state\">{state}</td>\
             <td><div class=\"bar\"><div style=\"width:{pct:.1}%\"></div></div><span class=\"plabel\">{label}</span></td>\
             <td>{age}</td><td>{instance}</td><td>{button}</td></tr>",
            id = escape(&j.id),
            short = escape(&j.id.chars().take(12).collect::<String>()),
            tool = escape(&j.tool),
            label = escape(&label),
            age = short_age(now_ms - j.created_ms),
            instance = escape(owning_instance(j).unwrap_or("—")),
        );
    }
    out
}

/// HTML-escapes text for element content and quoted attributes.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            escape(r#"<a href="x">'&'</a>"#),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
    }
}
