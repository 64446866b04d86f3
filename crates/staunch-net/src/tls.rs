//! The rustls client configuration, built once per process: the `ring` provider, TLS 1.2 and
//! 1.3, ALPN `http/1.1`, and the roots rustls-native-certs finds (the system store, or the
//! files `SSL_CERT_FILE` / `SSL_CERT_DIR` name — which is how tests trust their own CA).

use std::sync::{Arc, OnceLock};

use rustls::{ClientConfig, RootCertStore};

/// The configuration and, when no root could be loaded, why (https then fails up front in
/// [`crate::check_url`] instead of at every handshake with "unknown issuer").
pub(crate) struct Tls {
    pub(crate) client: ClientConfig,
    pub(crate) roots_problem: Option<String>,
}

pub(crate) fn config() -> &'static Tls {
    static TLS: OnceLock<Tls> = OnceLock::new();
    TLS.get_or_init(build)
}

/// A configuration that trusts nothing, for a client that only ever dials `http://`: it never
/// handshakes, and the system's roots (milliseconds of PEM parsing) are not loaded for it.
pub(crate) fn plain_config() -> &'static ClientConfig {
    static PLAIN: OnceLock<ClientConfig> = OnceLock::new();
    PLAIN.get_or_init(|| with_roots(RootCertStore::empty()))
}

fn with_roots(roots: RootCertStore) -> ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        // rustls' own ring provider supports its own safe defaults: this cannot fail.
        .expect("the ring provider supports TLS 1.2 and 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth()
}

fn build() -> Tls {
    let loaded = rustls_native_certs::load_native_certs();
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(loaded.certs);
    let roots_problem = (added == 0).then(|| {
        if loaded.errors.is_empty() {
            "none found".to_string()
        } else {
            loaded
                .errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        }
    });
    Tls {
        client: with_roots(roots),
        roots_problem,
    }
}
