//! `--balancer NGINX`: the workload goes through a real load balancer — nginx running the
//! repository's `deploy/nginx/staunch.conf`, round robin over every instance, no stickiness —
//! so a worker's session, its resumes and its answers land on whichever instance nginx picks,
//! and a SIGKILLed instance is one nginx stops sending to on its own.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use tokio::process::{Child, Command};

/// nginx in front of the instances, stopped when dropped.
pub struct Balancer {
    child: Child,
    port: u16,
}

/// The configuration for nginx from the recipe's template: `@PREFIX@`, `@LISTEN@`, and one
/// `server` line per instance (the template names two, `@UPSTREAM_A@` and `@UPSTREAM_B@`).
fn render(template: &str, prefix: &Path, listen: u16, upstreams: &[u16]) -> anyhow::Result<String> {
    anyhow::ensure!(
        upstreams.len() >= 2,
        "a balancer needs two instances or more"
    );
    // The comments name the placeholders too: leave them out.
    let template: String = template
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    let b_line = template
        .lines()
        .find(|l| l.contains("@UPSTREAM_B@"))
        .context("the template has no @UPSTREAM_B@ line")?;
    // Further instances: copies of B's line.
    let mut b_lines = String::from(b_line);
    for _ in 2..upstreams.len() {
        b_lines.push('\n');
        b_lines.push_str(b_line);
    }
    let mut out = template
        .replacen(b_line, &b_lines, 1)
        .replace("@PREFIX@", &prefix.display().to_string())
        .replace("@LISTEN@", &format!("127.0.0.1:{listen}"))
        .replace("@UPSTREAM_A@", &format!("127.0.0.1:{}", upstreams[0]));
    for port in &upstreams[1..] {
        out = out.replacen("@UPSTREAM_B@", &format!("127.0.0.1:{port}"), 1);
    }
    anyhow::ensure!(!out.contains('@'), "a placeholder is left in the template");
    Ok(out)
}

impl Balancer {
    pub async fn start(
        nginx: &Path,
        template: &Path,
        dir: &Path,
        upstreams: &[u16],
    ) -> anyhow::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let prefix = dir.join("nginx");
        std::fs::create_dir_all(&prefix)?;
        let text = std::fs::read_to_string(template)
            .with_context(|| format!("reading {}", template.display()))?;
        let conf = prefix.join("nginx.conf");
        std::fs::write(&conf, render(&text, &prefix, port, upstreams)?)?;
        let child = Command::new(nginx)
            .arg("-p")
            .arg(&prefix)
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(prefix.join("error.log"))
            .args(["-g", "daemon off;"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", nginx.display()))?;
        let end = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            anyhow::ensure!(
                tokio::time::Instant::now() < end,
                "nginx did not listen on 127.0.0.1:{port}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Self { child, port })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        // SIGTERM: nginx's master stops its workers and exits (a SIGKILL would leave the
        // workers running, holding the listening socket and our output pipes).
        match self
            .child
            .id()
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        {
            Some(pid) => {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
            None => {
                let _ = self.child.start_kill();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_instance_gets_a_server_line() {
        let t = "# @UPSTREAM_B@ is another\npid @PREFIX@/x.pid;\n  server @UPSTREAM_A@ max_fails=2;\n  server @UPSTREAM_B@ max_fails=2;\nlisten @LISTEN@;\n";
        let out = render(t, Path::new("/tmp/p"), 9, &[1, 2, 3]).unwrap();
        assert_eq!(
            out,
            "pid /tmp/p/x.pid;\n  server 127.0.0.1:1 max_fails=2;\n  server 127.0.0.1:2 max_fails=2;\n  server 127.0.0.1:3 max_fails=2;\nlisten 127.0.0.1:9;\n"
        );
        assert!(render(t, Path::new("/p"), 9, &[1]).is_err());
    }
}
