//! Output that must be put in order before it is printed, in bounded memory: `metrics --all`
//! prints each family's samples together although every lock gives a sample to each family,
//! and `log --all` merges every lock's log by time. Both keep a bounded amount in memory and
//! put the rest in anonymous temporary files: in `$TMPDIR` (else `/tmp`), opened with
//! `O_TMPFILE` so that they have no name and nothing is left behind however redlock ends
//! (where the filesystem cannot, a file named `.redlock-spill.PID.N` is removed as soon as it
//! is opened). Small outputs (a few thousand locks) never touch the disk.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use anyhow::{Context as _, Result};

/// An anonymous file for scratch data, read and written, gone once closed.
fn anonymous_file() -> Result<File> {
    let dir = std::env::temp_dir();
    let context = || {
        format!(
            "cannot write a temporary file in {} (set TMPDIR to a writable directory)",
            dir.display()
        )
    };
    match OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(&dir)
    {
        Ok(file) => return Ok(file),
        // EOPNOTSUPP: the filesystem has no O_TMPFILE; EISDIR: the kernel does not know it.
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR)) => {}
        Err(e) => return Err(e).with_context(context),
    }
    for n in 0.. {
        let path: PathBuf = dir.join(format!(".redlock-spill.{}.{n}", std::process::id()));
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(file) => {
                std::fs::remove_file(&path).with_context(context)?;
                return Ok(file);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 100 => {}
            Err(e) => return Err(e).with_context(context),
        }
    }
    unreachable!("the loop returns")
}

/// Text appended in pieces and read back whole, in the order written: up to `limit` bytes in
/// memory, the rest in an anonymous file.
pub struct Spill {
    memory: Vec<u8>,
    file: Option<BufWriter<File>>,
    limit: usize,
}

impl Spill {
    pub fn new(limit: usize) -> Spill {
        Spill {
            memory: Vec::new(),
            file: None,
            limit,
        }
    }

    pub fn push(&mut self, text: &str) -> Result<()> {
        self.memory.extend_from_slice(text.as_bytes());
        if self.memory.len() >= self.limit {
            let file = match &mut self.file {
                Some(file) => file,
                None => self
                    .file
                    .insert(BufWriter::with_capacity(64 * 1024, anonymous_file()?)),
            };
            file.write_all(&self.memory)
                .context("cannot write a temporary file")?;
            self.memory.clear();
        }
        Ok(())
    }

    /// Everything pushed, in order, to `out`.
    pub fn write_to(self, out: &mut impl Write) -> Result<()> {
        if let Some(file) = self.file {
            let mut file = file
                .into_inner()
                .map_err(io::IntoInnerError::into_error)
                .context("cannot write a temporary file")?;
            file.seek(SeekFrom::Start(0))
                .context("cannot read a temporary file")?;
            io::copy(&mut file, out)?;
        }
        out.write_all(&self.memory)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spill_reads_back_what_was_pushed_in_order() {
        let mut spill = Spill::new(8);
        let mut want = String::new();
        for i in 0..100 {
            let piece = format!("line {i}\n");
            spill.push(&piece).unwrap();
            want.push_str(&piece);
        }
        assert!(spill.file.is_some());
        let mut out = Vec::new();
        spill.write_to(&mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), want);
    }
}
