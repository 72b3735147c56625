//! Many contenders on one key: every one of them runs, one at a time.

use std::fs;
use std::time::Duration;

use crate::support::{RedisServer, Redlock, TempDir};

const CONTENDERS: usize = 16;

/// Each critical section appends `start PID FENCE`, lingers a little so overlaps would
/// show, then appends `end PID`.
const CRITICAL_SECTION: &str = r#"echo "start $$ $REDLOCK_FENCE" >> "$STRESS_LOG"; sleep 0.05; echo "end $$" >> "$STRESS_LOG""#;

#[test]
fn sixteen_waiting_contenders_all_run_one_at_a_time() {
    let server = RedisServer::start();
    let scratch = TempDir::new("stress");
    let log = scratch.join("sections.log");
    let contenders: Vec<_> = (0..CONTENDERS)
        .map(|_| {
            Redlock::new(&server)
                .env("STRESS_LOG", &log)
                .args(["run", "--key", "stress", "--ttl", "5s", "--wait", "30s"])
                .args(["-c", CRITICAL_SECTION])
                .timeout(Duration::from_secs(60))
                .spawn()
        })
        .collect();
    for contender in contenders {
        contender.exits_with(0);
    }

    let text = fs::read_to_string(&log).expect("read the sections log");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        2 * CONTENDERS,
        "expected {CONTENDERS} start/end pairs:\n{text}"
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
        CONTENDERS,
        "not every contender ran:\n{text}"
    );
}
