//! Output that must be put in order before it is printed, in bounded memory: `metrics --all`
//! prints each family's samples together although every lock gives a sample to each family,
//! and `log --all` merges every lock's log by time. Both keep a bounded amount in memory and
//! put the rest in anonymous temporary files: in `$TMPDIR` (else `/tmp`), opened with
//! `O_TMPFILE` so that they have no name and nothing is left behind however redlock ends
//! (where the filesystem cannot, a file named `.redlock-spill.PID.N` is removed as soon as it
//! is opened). Small outputs (a few thousand locks) never touch the disk.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
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

/// A line of output and where it goes in the order: by time (ms, then the place among the
/// entries of that millisecond), then by key; lines that tie stay in the order pushed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Timed {
    pub ms: i64,
    pub seq: i64,
    pub key: String,
    pub line: String,
}

impl Timed {
    fn size(&self) -> usize {
        self.key.len() + self.line.len() + 64
    }

    fn write(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(&self.ms.to_le_bytes())?;
        out.write_all(&self.seq.to_le_bytes())?;
        for text in [&self.key, &self.line] {
            out.write_all(&(text.len() as u64).to_le_bytes())?;
            out.write_all(text.as_bytes())?;
        }
        Ok(())
    }

    /// The next line of a run; `None` at its end.
    fn read(input: &mut impl Read) -> io::Result<Option<Timed>> {
        let mut word = [0u8; 8];
        match input.read_exact(&mut word) {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            other => other?,
        }
        let ms = i64::from_le_bytes(word);
        input.read_exact(&mut word)?;
        let seq = i64::from_le_bytes(word);
        let mut text = || -> io::Result<String> {
            input.read_exact(&mut word)?;
            let mut bytes = vec![0; u64::from_le_bytes(word) as usize];
            input.read_exact(&mut bytes)?;
            String::from_utf8(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
        };
        let key = text()?;
        let line = text()?;
        Ok(Some(Timed { ms, seq, key, line }))
    }

    fn order(&self) -> (i64, i64, &str) {
        (self.ms, self.seq, &self.key)
    }
}

/// How many runs are merged at once: each has a read buffer of [`READ_BUFFER`] and an open
/// file.
const FAN_IN: usize = 64;
const READ_BUFFER: usize = 64 * 1024;

/// An external merge sort of [`Timed`] lines: up to `limit` bytes are sorted in memory; past
/// that, each such run is written to an anonymous file. Runs are merged [`FAN_IN`] at a time
/// as they pile up (a level's [`FAN_IN`] runs make one run of the next level), so no more than
/// [`FAN_IN`] runs per level are open, and a line is rewritten once per level (a level holds
/// [`FAN_IN`] times more than the one below: four levels of 8 MB runs hold 128 GB). Memory:
/// `limit`, and [`FAN_IN`] read buffers while merging, whatever the number of lines.
pub struct TimeSort {
    memory: Vec<Timed>,
    bytes: usize,
    limit: usize,
    /// The runs on disk, each with its level, oldest (and highest) first.
    runs: Vec<(u32, File)>,
}

impl TimeSort {
    pub fn new(limit: usize) -> TimeSort {
        TimeSort {
            memory: Vec::new(),
            bytes: 0,
            limit,
            runs: Vec::new(),
        }
    }

    pub fn push(&mut self, line: Timed) {
        self.bytes += line.size();
        self.memory.push(line);
    }

    /// A point where a run may end: the caller's lines that must keep their order among
    /// equals (one lock's log) are all pushed.
    pub fn boundary(&mut self) -> Result<()> {
        if self.bytes >= self.limit {
            self.spill()?;
        }
        Ok(())
    }

    fn sort_memory(&mut self) {
        self.memory.sort_by(|a, b| a.order().cmp(&b.order()));
    }

    fn spill(&mut self) -> Result<()> {
        self.sort_memory();
        let mut file = BufWriter::with_capacity(READ_BUFFER, anonymous_file()?);
        for line in self.memory.drain(..) {
            line.write(&mut file)
                .context("cannot write a temporary file")?;
        }
        self.runs.push((0, rewound(file)?));
        self.bytes = 0;
        // The last FAN_IN runs of one level become one run of the next.
        loop {
            let n = self.runs.len();
            let Some(level) = self.runs.last().map(|(level, _)| *level) else {
                return Ok(());
            };
            if n < FAN_IN || self.runs[n - FAN_IN..].iter().any(|(l, _)| *l != level) {
                return Ok(());
            }
            self.merge_last(FAN_IN, level + 1)?;
        }
    }

    /// The last `count` runs merged into one run of `level`. Runs next to each other merge
    /// into one that keeps their order among equal lines.
    fn merge_last(&mut self, count: usize, level: u32) -> Result<()> {
        let group = self.runs.split_off(self.runs.len() - count);
        let mut merged = BufWriter::with_capacity(READ_BUFFER, anonymous_file()?);
        merge(group.into_iter().map(|(_, f)| f).collect(), &mut |line| {
            line.write(&mut merged)
                .context("cannot write a temporary file")
        })?;
        self.runs.push((level, rewound(merged)?));
        Ok(())
    }

    /// Every line, in order, to `out`: a line at a time.
    pub fn drain(mut self, out: &mut dyn FnMut(&str) -> Result<()>) -> Result<()> {
        if self.runs.is_empty() {
            self.sort_memory();
            for line in &self.memory {
                out(&line.line)?;
            }
            return Ok(());
        }
        if !self.memory.is_empty() {
            self.spill()?;
        }
        // At most FAN_IN runs for the last merge: the smallest (last) ones merged first.
        while self.runs.len() > FAN_IN {
            let count = (self.runs.len() - FAN_IN + 1).min(FAN_IN);
            self.merge_last(count, u32::MAX)?;
        }
        let runs = std::mem::take(&mut self.runs);
        merge(runs.into_iter().map(|(_, f)| f).collect(), &mut |line| {
            out(&line.line)
        })
    }
}

/// The file written, flushed and read from its start.
fn rewound(file: BufWriter<File>) -> Result<File> {
    let mut file = file
        .into_inner()
        .map_err(io::IntoInnerError::into_error)
        .context("cannot write a temporary file")?;
    file.seek(SeekFrom::Start(0))
        .context("cannot read a temporary file")?;
    Ok(file)
}

/// One run's next line, ordered for the merge's heap: by the line's order, then by run (a
/// run pushed earlier holds the lines pushed earlier).
struct Head {
    line: Timed,
    run: usize,
}

impl PartialEq for Head {
    fn eq(&self, other: &Head) -> bool {
        self.cmp(other).is_eq()
    }
}

impl Eq for Head {}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Head) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Head {
    fn cmp(&self, other: &Head) -> std::cmp::Ordering {
        (self.line.order(), self.run).cmp(&(other.line.order(), other.run))
    }
}

/// Merges sorted runs into one order.
fn merge(runs: Vec<File>, out: &mut dyn FnMut(&Timed) -> Result<()>) -> Result<()> {
    let read = |e: io::Error| anyhow::Error::new(e).context("cannot read a temporary file");
    let mut readers: Vec<BufReader<File>> = runs
        .into_iter()
        .map(|f| BufReader::with_capacity(READ_BUFFER, f))
        .collect();
    let mut heap = BinaryHeap::new();
    for (run, reader) in readers.iter_mut().enumerate() {
        if let Some(line) = Timed::read(reader).map_err(read)? {
            heap.push(Reverse(Head { line, run }));
        }
    }
    while let Some(Reverse(Head { line, run })) = heap.pop() {
        out(&line)?;
        if let Some(next) = Timed::read(&mut readers[run]).map_err(read)? {
            heap.push(Reverse(Head { line: next, run }));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timed(ms: i64, seq: i64, key: &str, line: &str) -> Timed {
        Timed {
            ms,
            seq,
            key: key.into(),
            line: line.into(),
        }
    }

    fn drained(sort: TimeSort) -> Vec<String> {
        let mut out = Vec::new();
        sort.drain(&mut |line| {
            out.push(line.to_string());
            Ok(())
        })
        .unwrap();
        out
    }

    #[test]
    fn lines_come_out_by_time_then_key_keeping_ties_in_order_in_memory_or_spilled() {
        for limit in [usize::MAX, 1] {
            let mut sort = TimeSort::new(limit);
            for (ms, key, line) in [(5, "b", "b5"), (1, "b", "b1"), (3, "b", "b3 first")] {
                sort.push(timed(ms, 0, key, line));
            }
            sort.push(timed(3, 0, "b", "b3 second"));
            sort.boundary().unwrap();
            for (ms, key, line) in [(2, "a", "a2"), (3, "a", "a3"), (9, "a", "a9\nmore")] {
                sort.push(timed(ms, 0, key, line));
                sort.boundary().unwrap();
            }
            assert_eq!(
                drained(sort),
                ["b1", "a2", "a3", "b3 first", "b3 second", "b5", "a9\nmore"],
                "limit {limit}"
            );
        }
    }

    #[test]
    fn more_runs_than_are_merged_at_once_are_merged_in_rounds() {
        let mut sort = TimeSort::new(1);
        let n = (FAN_IN * FAN_IN + 3 * FAN_IN + 5) as i64;
        for i in (0..n).rev() {
            sort.push(timed(i, 0, "k", &i.to_string()));
            sort.boundary().unwrap();
        }
        assert!(
            sort.runs.len() < 2 * FAN_IN,
            "{} runs open",
            sort.runs.len()
        );
        let want: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        assert_eq!(drained(sort), want);
    }

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
