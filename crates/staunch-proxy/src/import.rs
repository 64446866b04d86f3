//! A client's `mcpServers` file (Claude Desktop, Cursor, VS Code) as upstreams: each server in
//! it, by command or by Streamable HTTP URL.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{ProxyError, Target, UpstreamSpec};

/// The upstreams' description cannot work.
pub(crate) fn described(message: String) -> ProxyError {
    ProxyError::Described(message)
}

/// The `mcpServers` object of a client configuration file.
pub fn import_mcp_servers(file: &Path) -> Result<Vec<UpstreamSpec>, ProxyError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| described(format!("reading {}: {e}", file.display())))?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| described(format!("{} is not JSON: {e}", file.display())))?;
    let servers = doc
        .get("mcpServers")
        .or_else(|| doc.get("servers"))
        .and_then(Value::as_object)
        .ok_or_else(|| described(format!("{}: no \"mcpServers\" object", file.display())))?;
    let several = servers.len() > 1;
    let mut out = Vec::new();
    for (name, s) in servers {
        let target = if let Some(cmd) = s.get("command").and_then(Value::as_str) {
            let args = s["args"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(OsString::from)
                .collect();
            let env = s["env"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| v.as_str().map(|v| (OsString::from(k), OsString::from(v))))
                .collect();
            Target::Stdio {
                program: cmd.into(),
                args,
                env,
                cwd: s["cwd"].as_str().map(PathBuf::from),
            }
        } else if let Some(url) = s
            .get("url")
            .or_else(|| s.get("serverUrl"))
            .and_then(Value::as_str)
        {
            if s["type"].as_str() == Some("sse") {
                return Err(described(format!(
                    "{name}: the old HTTP+SSE transport (type \"sse\") is not supported; use the \
                     server's Streamable HTTP endpoint"
                )));
            }
            let headers = s["headers"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect();
            Target::Http {
                url: url.to_string(),
                headers,
            }
        } else {
            return Err(described(format!(
                "{}: server {name:?} has neither \"command\" nor \"url\"",
                file.display()
            )));
        };
        let mut spec = UpstreamSpec::new(name.clone(), target);
        if several {
            spec.prefix = format!("{name}_");
        }
        out.push(spec);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_servers_json_becomes_upstreams() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("c.json");
        std::fs::write(
            &f,
            r#"{"mcpServers": {
                "files": {"command": "python", "args": ["s.py"], "env": {"K": "v"}},
                "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "k"}}
            }}"#,
        )
        .unwrap();
        let specs = import_mcp_servers(&f).unwrap();
        assert_eq!(specs.len(), 2);
        let files = specs.iter().find(|s| s.name == "files").unwrap();
        assert_eq!(files.prefix, "files_");
        match &files.target {
            Target::Stdio {
                program, args, env, ..
            } => {
                assert_eq!(program, "python");
                assert_eq!(args, &[OsString::from("s.py")]);
                assert_eq!(env, &[(OsString::from("K"), OsString::from("v"))]);
            }
            other => panic!("{other:?}"),
        }
        let remote = specs.iter().find(|s| s.name == "remote").unwrap();
        match &remote.target {
            Target::Http { url, headers } => {
                assert_eq!(url, "http://127.0.0.1:9/mcp");
                assert_eq!(headers, &[("X-Key".to_string(), "k".to_string())]);
            }
            other => panic!("{other:?}"),
        }
        std::fs::write(
            &f,
            r#"{"mcpServers": {"old": {"type": "sse", "url": "http://h/sse"}}}"#,
        )
        .unwrap();
        assert!(
            import_mcp_servers(&f)
                .unwrap_err()
                .to_string()
                .contains("not supported")
        );
        std::fs::write(&f, r#"{"other": {}}"#).unwrap();
        assert!(
            import_mcp_servers(&f)
                .unwrap_err()
                .to_string()
                .contains("mcpServers")
        );
    }
}
