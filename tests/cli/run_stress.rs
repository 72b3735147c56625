//! Many contenders on one key: every one of them runs, one at a time.

use std::time::Duration;

use crate::support::stress::{CRITICAL_SECTION, expect_serial_sections};
use crate::support::{RedisServer, Redlock, TempDir};

const CONTENDERS: usize = 16;

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

    expect_serial_sections(&log, CONTENDERS);
}
