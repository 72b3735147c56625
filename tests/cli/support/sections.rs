//! Critical sections that stamp every line they write, and the oracle that reads them back.
//!
//! A section is `bash` (for `$EPOCHREALTIME`, a clock read without a fork) appending lines
//! `SECONDS.MICROS PID FENCE WHAT` to `$STRESS_LOG`: `start`, `$TICKS` ticks `$TICK` apart, and
//! `end`. A section killed half-way (its lease lost) simply stops writing. The oracle does not
//! trust the writer's order of appends: it groups lines by section, orders sections by their
//! first stamp, and checks that each one's last stamp precedes the next one's first — no two
//! sections' lines interleave — and that fences grow in the order the sections started.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The section as a command line for `redlock run ... -- ARGV`.
pub const SECTION: [&str; 3] = [
    "bash",
    "-c",
    r#"f=$REDLOCK_FENCE
echo "$EPOCHREALTIME $$ $f start" >> "$STRESS_LOG"
for ((i = 0; i < ${TICKS:-0}; i++)); do
    [ -n "$TICK" ] && sleep "$TICK"
    echo "$EPOCHREALTIME $$ $f tick" >> "$STRESS_LOG"
done
echo "$EPOCHREALTIME $$ $f end" >> "$STRESS_LOG""#,
];

/// [`SECTION`] for a run of several keys, stamped with the fence of its lock `key` (read from
/// `REDLOCK_KEYS` and `REDLOCK_FENCES`, one a line, without a fork), so that the oracle checks
/// the fences of one key whatever order each run gave its keys in.
pub fn section_on(key: &str) -> Vec<String> {
    let find = format!(
        r#"mapfile -t ks <<<"$REDLOCK_KEYS"; mapfile -t fs <<<"$REDLOCK_FENCES"
f=; for i in "${{!ks[@]}}"; do [ "${{ks[$i]}}" = '{key}' ] && f=${{fs[$i]}}; done"#
    );
    vec![
        SECTION[0].to_owned(),
        SECTION[1].to_owned(),
        SECTION[2].replacen("f=$REDLOCK_FENCE", &find, 1),
    ]
}

/// One section as the log shows it.
#[derive(Debug)]
pub struct Section {
    pub pid: u32,
    pub fence: u64,
    /// First and last stamp, in microseconds.
    pub first: u64,
    pub last: u64,
    pub ended: bool,
}

/// Every section in `log`, in the order they started.
pub fn read_sections(log: &Path) -> Vec<Section> {
    let text = fs::read_to_string(log).unwrap_or_default();
    let mut by_section: BTreeMap<(u32, u64), Section> = BTreeMap::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        let [stamp, pid, fence, what] = words.as_slice() else {
            panic!("malformed section line {line:?} in {}", log.display());
        };
        let stamp = stamp_micros(stamp).unwrap_or_else(|| panic!("bad stamp in {line:?}"));
        let pid: u32 = pid.parse().expect("pid");
        let fence: u64 = fence
            .parse()
            .unwrap_or_else(|e| panic!("fence in {line:?}: {e}"));
        let section = by_section.entry((pid, fence)).or_insert(Section {
            pid,
            fence,
            first: stamp,
            last: stamp,
            ended: false,
        });
        section.first = section.first.min(stamp);
        section.last = section.last.max(stamp);
        section.ended |= *what == "end";
    }
    let mut sections: Vec<Section> = by_section.into_values().collect();
    sections.sort_by_key(|s| s.first);
    sections
}

/// Panics, showing the offending neighbours, unless the sections in `log` never overlap and
/// their fences grow in the order they started. Returns the sections.
#[track_caller]
pub fn expect_exclusive_sections(log: &Path) -> Vec<Section> {
    let sections = read_sections(log);
    for pair in sections.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(
            a.last < b.first,
            "two critical sections overlap by {} µs:\n  {a:?}\n  {b:?}",
            a.last - b.first
        );
        assert!(
            a.fence < b.fence,
            "fences do not grow in the order the sections started:\n  {a:?}\n  {b:?}"
        );
    }
    sections
}

/// Panics unless the fences of the sections in `log` grow in the order the sections started
/// (they may overlap: for runs where the data under the lock was lost). Returns the sections.
#[track_caller]
pub fn expect_fences_in_start_order(log: &Path) -> Vec<Section> {
    let sections = read_sections(log);
    for pair in sections.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(
            a.fence < b.fence,
            "fences do not grow in the order the sections started:\n  {a:?}\n  {b:?}"
        );
    }
    sections
}

/// How a section held its lock, for [`expect_sections_within_shapes`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    Exclusive,
    Shared,
    /// One of N slots.
    Slots(usize),
}

/// Panics, showing the offending sections, unless `sections` (of one key, in start order, as
/// [`read_sections`] returns them) overlap only as their shapes allow: an exclusive section
/// alone, shared sections with shared ones only, at most N sections of N slots at once (and
/// with no other shape); and unless the fences of the exclusive sections grow in the order they
/// started. `held` says how each section held the lock.
#[track_caller]
pub fn expect_sections_within_shapes(sections: &[Section], held: impl Fn(&Section) -> Held) {
    let mut active: Vec<&Section> = Vec::new();
    for section in sections {
        active.retain(|a| a.last >= section.first);
        let shape = held(section);
        let clash = active.iter().find(|a| {
            let other = held(a);
            match (shape, other) {
                (Held::Shared, Held::Shared) => false,
                (Held::Slots(n), Held::Slots(m)) => n != m || active.len() >= n,
                _ => true,
            }
        });
        if let Some(a) = clash {
            panic!(
                "a {shape:?} section overlaps a {:?} one (with {} running):\n  {a:?}\n  {section:?}",
                held(a),
                active.len()
            );
        }
        active.push(section);
    }
    let exclusive: Vec<&Section> = sections
        .iter()
        .filter(|s| held(s) == Held::Exclusive)
        .collect();
    for pair in exclusive.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        assert!(
            a.fence < b.fence,
            "fences of exclusive sections do not grow in the order they started:\n  {a:?}\n  {b:?}"
        );
    }
}

fn stamp_micros(stamp: &str) -> Option<u64> {
    let (secs, micros) = stamp.split_once(['.', ','])?;
    Some(secs.parse::<u64>().ok()? * 1_000_000 + micros.parse::<u64>().ok()?)
}

/// Busy loops on every core, for tests that must hold on a loaded host; stopped on drop.
pub struct CpuHogs(Vec<Child>);

impl CpuHogs {
    pub fn start(count: usize) -> CpuHogs {
        CpuHogs(
            (0..count)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdin(Stdio::null())
                        .spawn()
                        .expect("start a CPU hog")
                })
                .collect(),
        )
    }
}

impl Drop for CpuHogs {
    fn drop(&mut self) {
        for hog in &mut self.0 {
            let _ = hog.kill();
            let _ = hog.wait();
        }
    }
}

/// A small deterministic generator for fault schedules (xorshift), seeded per test so a
/// failure can be replayed from the seed it prints.
pub struct Dice(u64);

impl Dice {
    pub fn new(seed: u64) -> Dice {
        Dice(seed.max(1))
    }

    pub fn seed_from_clock() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_read_to_the_microsecond() {
        assert_eq!(
            stamp_micros("1700000000.000123"),
            Some(1_700_000_000_000_123)
        );
        assert_eq!(stamp_micros("1700000000,5"), Some(1_700_000_000_000_005));
        assert_eq!(stamp_micros("soon"), None);
    }
}
