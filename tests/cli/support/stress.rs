//! Many contenders on one key, each appending to a shared log around its critical section;
//! the log then shows whether the sections ever overlapped.

use std::fs;
use std::path::Path;

/// Each critical section appends `start PID FENCE`, lingers a little so overlaps would show,
/// then appends `end PID`, to the file named by `$STRESS_LOG`.
pub const CRITICAL_SECTION: &str = r#"echo "start $$ $REDLOCK_FENCE" >> "$STRESS_LOG"; sleep 0.05; echo "end $$" >> "$STRESS_LOG""#;

/// How many sections have started so far.
pub fn sections_started(log: &Path) -> usize {
    fs::read_to_string(log)
        .map(|text| text.lines().filter(|l| l.starts_with("start ")).count())
        .unwrap_or(0)
}

/// The log shows `contenders` sections, one at a time (every start followed by its own end),
/// with fences growing in the order they ran, and every contender among them.
pub fn expect_serial_sections(log: &Path, contenders: usize) {
    let text = fs::read_to_string(log).expect("read the sections log");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        2 * contenders,
        "expected {contenders} start/end pairs:\n{text}"
    );
    let mut last_fence = 0u64;
    let mut runners = Vec::new();
    for pair in lines.chunks(2) {
        let start: Vec<&str> = pair[0].split(' ').collect();
        let ["start", pid, fence] = start.as_slice() else {
            panic!(
                "expected a start line, got {:?}; sections overlap:\n{text}",
                pair[0]
            );
        };
        assert_eq!(
            pair[1],
            format!("end {pid}"),
            "critical sections overlap:\n{text}"
        );
        let fence: u64 = fence
            .parse()
            .unwrap_or_else(|e| panic!("fence {fence:?}: {e}\n{text}"));
        assert!(
            fence > last_fence,
            "fences do not grow in the order the sections ran:\n{text}"
        );
        last_fence = fence;
        runners.push(pid.to_owned());
    }
    runners.sort();
    runners.dedup();
    assert_eq!(
        runners.len(),
        contenders,
        "not every contender ran:\n{text}"
    );
}
