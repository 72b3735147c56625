//! Certificates for TLS tests, made by `openssl` in a scratch directory per test: a CA, a
//! server certificate for localhost and 127.0.0.1 and a client certificate signed by it, and
//! an unrelated CA that signed nothing.

use std::path::PathBuf;
use std::process::Command;

use super::temp::TempDir;

/// A CA, a server certificate for localhost/127.0.0.1 and a client certificate, all signed by
/// that CA, plus an unrelated CA that signed nothing.
pub struct Certs {
    dir: TempDir,
}

impl Certs {
    pub fn new() -> Certs {
        let dir = TempDir::new("tls");
        let certs = Certs { dir };
        certs.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=redlock test CA",
        ]);
        certs.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "other.key",
            "-out",
            "other.crt",
            "-days",
            "2",
            "-subj",
            "/CN=another CA",
        ]);
        std::fs::write(
            certs.dir.join("server.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        )
        .expect("write extension file");
        // X.509 v3 (any extension makes it so): TLS libraries reject v1 certificates.
        std::fs::write(
            certs.dir.join("client.ext"),
            "extendedKeyUsage=clientAuth\n",
        )
        .expect("write extension file");
        for (name, ext) in [("server", "server.ext"), ("client", "client.ext")] {
            let key = format!("{name}.key");
            let csr = format!("{name}.csr");
            let crt = format!("{name}.crt");
            certs.openssl(&[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                &key,
                "-out",
                &csr,
                "-subj",
                &format!("/CN={name}"),
            ]);
            certs.openssl(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                "2",
                "-extfile",
                ext,
            ]);
        }
        certs
    }

    /// A self-signed server certificate for `CN=localhost` whose names are `san`, made by
    /// `openssl req -x509` (as most guides do) plus `extra` options; returns its file stem.
    pub fn self_signed(&self, stem: &str, san: &str, extra: &[&str]) -> String {
        let (key, crt) = (format!("{stem}.key"), format!("{stem}.crt"));
        let subject_alt_name = format!("subjectAltName={san}");
        let mut args = vec![
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &crt,
            "-subj",
            "/CN=localhost",
            "-addext",
            &subject_alt_name,
        ];
        args.extend_from_slice(extra);
        self.openssl(&args);
        stem.to_string()
    }

    pub fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("openssl must be installed (apt-get install openssl)");
        assert!(
            out.status.success(),
            "openssl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A file of the directory, as a string for command lines.
    pub fn path(&self, name: &str) -> String {
        let path: PathBuf = self.dir.join(name);
        path.to_str().expect("utf-8 path").to_owned()
    }

    /// `redis-server` (and sentinel) arguments for a TLS listener with the server
    /// certificate; `clients` is `--tls-auth-clients`: `no`, `yes` or `optional`.
    pub fn server_args(&self, clients: &str) -> Vec<String> {
        vec![
            "--tls-cert-file".into(),
            self.path("server.crt"),
            "--tls-key-file".into(),
            self.path("server.key"),
            "--tls-ca-cert-file".into(),
            self.path("ca.crt"),
            "--tls-auth-clients".into(),
            clients.into(),
        ]
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}
