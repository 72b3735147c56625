//! Scratch directories that disappear with the test that made them (the tempfile crate).
//!
//! Each test gets its own directory, so parallel tests never share a socket, a log or a
//! marker file. The path stays short on purpose: a unix socket path must fit in 108 bytes,
//! so the directory is `$TMPDIR/redlock-LABEL-XXXXXX`.

use std::path::{Path, PathBuf};

pub struct TempDir(tempfile::TempDir);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        let dir = tempfile::Builder::new()
            .prefix(&format!("redlock-{label}-"))
            .tempdir()
            .unwrap_or_else(|e| panic!("cannot create a scratch directory for {label}: {e}"));
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
}
