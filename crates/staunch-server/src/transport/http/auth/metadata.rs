//! OAuth 2.0 Protected Resource Metadata (RFC 9728): the document a client reads to learn which
//! authorization server issues tokens for this resource, and where it lives.
//!
//! For a resource `https://host/mcp` the document is at
//! `https://host/.well-known/oauth-protected-resource/mcp` (the well-known segment inserted
//! between host and path, RFC 9728 §3.1); the root form `/.well-known/oauth-protected-resource`
//! is served too, for clients that try it.

use axum::http::Uri;
use serde_json::{Value, json};

pub(crate) const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The metadata document.
pub(crate) fn metadata_document(
    resource: &str,
    authorization_servers: &[String],
    scopes: &[String],
) -> Value {
    let mut doc = json!({
        "resource": resource,
        // RFC 6750 §2.1 only: tokens in a query string or a form body are refused.
        "bearer_methods_supported": ["header"],
        "resource_name": "staunch MCP server",
    });
    if !authorization_servers.is_empty() {
        doc["authorization_servers"] = json!(authorization_servers);
    }
    if !scopes.is_empty() {
        doc["scopes_supported"] = json!(scopes);
    }
    doc
}

/// The path of a resource URL, when it has one beyond `/`.
pub(crate) fn resource_path(resource: &str) -> Option<String> {
    let uri: Uri = resource.parse().ok()?;
    let path = uri.path().trim_end_matches('/');
    (!path.is_empty()).then(|| path.to_string())
}

/// Where the metadata of `resource` is (RFC 9728 §3.1).
pub(crate) fn metadata_url(resource: &str) -> String {
    let Ok(uri) = resource.parse::<Uri>() else {
        return WELL_KNOWN.to_string();
    };
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return WELL_KNOWN.to_string();
    };
    let path = resource_path(resource).unwrap_or_default();
    format!("{scheme}://{authority}{WELL_KNOWN}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_goes_between_host_and_path() {
        assert_eq!(
            metadata_url("https://mcp.example.com/mcp"),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:8080"),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            metadata_url("http://h/a/b/"),
            "http://h/.well-known/oauth-protected-resource/a/b"
        );
    }

    #[test]
    fn document_omits_empty_lists() {
        let d = metadata_document("http://h/mcp", &[], &[]);
        assert_eq!(d["resource"], "http://h/mcp");
        assert!(d.get("authorization_servers").is_none());
        assert!(d.get("scopes_supported").is_none());
        let d = metadata_document("http://h/mcp", &["http://as".into()], &["a".into()]);
        assert_eq!(d["authorization_servers"], json!(["http://as"]));
        assert_eq!(d["scopes_supported"], json!(["a"]));
        assert_eq!(d["bearer_methods_supported"], json!(["header"]));
    }
}
