//! A TLS terminator on 127.0.0.1 that presents one of the fixture certificates and copies the
//! decrypted bytes to a plain-TCP backend — so any loopback HTTP server can be reached over
//! https:// the way a reverse proxy would front it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::{ServerConfig, crypto::ring::default_provider};

/// The fixtures folder (`ca.pem`, `server.pem`/`.key`, `untrusted.pem`/`.key`).
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls")
}

/// The test CA that signed `server.pem`; point `SSL_CERT_FILE` at it.
pub fn test_ca() -> PathBuf {
    fixtures().join("ca.pem")
}

/// Which certificate the terminator presents.
#[derive(Clone, Copy, Debug)]
pub enum Cert {
    /// `localhost`/`127.0.0.1`, signed by the test CA.
    Trusted,
    /// Self-signed, trusted by no test.
    Untrusted,
}

/// A running terminator; it stops when dropped.
pub struct TlsFront {
    /// Where it accepts TLS.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Accepts TLS on a free loopback port and forwards each connection to `backend`.
pub async fn tls_front(backend: SocketAddr, cert: Cert) -> TlsFront {
    let name = match cert {
        Cert::Trusted => "server",
        Cert::Untrusted => "untrusted",
    };
    let dir = fixtures();
    let certs = CertificateDer::pem_file_iter(dir.join(format!("{name}.pem")))
        .expect("fixture certificate")
        .collect::<Result<Vec<_>, _>>()
        .expect("fixture certificate");
    let key = PrivateKeyDer::from_pem_file(dir.join(format!("{name}.key"))).expect("fixture key");
    let mut config = ServerConfig::builder_with_provider(Arc::new(default_provider()))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("fixture certificate and key");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake: nothing to forward.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut plain) = TcpStream::connect(backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    TlsFront { addr, task }
}
