//! Seeded scenarios (DESIGN §20): random schedules of runs, operator moves and faults, judged
//! by the promises about waiting. The generator, the player and the oracles are
//! `support/scenario.rs`; this file decides which scenarios `cargo test` plays.
//!
//! `cargo test` plays a bounded slice: twelve fixed seeds, four slices side by side. Every scenario prints its
//! seed and its moves; a failure says how to replay it:
//!
//! ```text
//! REDLOCK_SCENARIO_SEED=N cargo test --test cli scenarios::replay -- --nocapture
//! ```
//!
//! For as long as asked, several at a time, printing scenarios per minute and what failed:
//!
//! ```text
//! REDLOCK_SCENARIO_SECS=600 REDLOCK_SCENARIO_JOBS=4 \
//!     cargo test --test cli scenarios::soak -- --ignored --nocapture
//! ```
//!
//! The `known_*` scenarios are written out as moves: each plays a way waiting has gone wrong,
//! so that it replays exactly, whatever the generator's dice do.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::support::scenario::{Move, Run, Scenario, Topology};
use crate::support::sections::Dice;

/// A slice: fixed seeds, so that `cargo test` plays the same scenarios every time; the soak
/// below plays new ones.
fn slice(fixed: &[u64]) {
    for &seed in fixed {
        Scenario::generate(seed).run();
    }
}

#[test]
fn slice_1() {
    slice(&[1, 5, 9]);
}

#[test]
fn slice_2() {
    slice(&[2, 6, 10]);
}

#[test]
fn slice_3() {
    slice(&[3, 7, 11]);
}

#[test]
fn slice_4() {
    slice(&[4, 8, 12]);
}

/// Plays the scenario of `REDLOCK_SCENARIO_SEED` (nothing without it).
#[test]
fn replay() {
    let Ok(seed) = std::env::var("REDLOCK_SCENARIO_SEED") else {
        return;
    };
    let seed = seed
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("REDLOCK_SCENARIO_SEED={seed:?}: {e}"));
    Scenario::generate(seed).run();
}

/// Random scenarios for `REDLOCK_SCENARIO_SECS` (default 600) seconds,
/// `REDLOCK_SCENARIO_JOBS` (default 4) at a time; fails at the end if any failed.
#[test]
#[ignore = "runs for as long as REDLOCK_SCENARIO_SECS says"]
fn soak() {
    let number = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(default)
    };
    let secs = number("REDLOCK_SCENARIO_SECS", 600);
    let jobs = number("REDLOCK_SCENARIO_JOBS", 4).max(1);
    let start = Instant::now();
    let end = start + Duration::from_secs(secs);
    let next_seed = Arc::new(AtomicU64::new(Dice::seed_from_clock() % 1_000_000_007));
    let played = Arc::new(AtomicU64::new(0));
    let failed: Arc<Mutex<Vec<(u64, String)>>> = Arc::default();
    let workers: Vec<_> = (0..jobs)
        .map(|_| {
            let (next_seed, played, failed) = (
                Arc::clone(&next_seed),
                Arc::clone(&played),
                Arc::clone(&failed),
            );
            thread::spawn(move || {
                while Instant::now() < end {
                    let seed = next_seed.fetch_add(1, Ordering::Relaxed);
                    if let Err(failure) = Scenario::generate(seed).outcome() {
                        println!("FAILED {failure}");
                        let first = failure.lines().nth(1).unwrap_or_default().to_owned();
                        failed.lock().expect("failures").push((seed, first));
                    }
                    played.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut reported = Instant::now();
    while workers.iter().any(|w| !w.is_finished()) {
        thread::sleep(Duration::from_millis(200));
        if reported.elapsed() >= Duration::from_secs(60) {
            reported = Instant::now();
            summary(start, &played, &failed);
        }
    }
    for worker in workers {
        worker.join().expect("a soak worker");
    }
    summary(start, &played, &failed);
    let failed = failed.lock().expect("failures");
    assert!(
        failed.is_empty(),
        "{} scenarios failed: {failed:?}",
        failed.len()
    );
}

fn summary(start: Instant, played: &AtomicU64, failed: &Mutex<Vec<(u64, String)>>) {
    let n = played.load(Ordering::Relaxed);
    let minutes = start.elapsed().as_secs_f64() / 60.0;
    let failed = failed.lock().expect("failures");
    println!(
        "soak: {n} scenarios in {minutes:.1} min ({:.1} per minute), {} failed{}",
        n as f64 / minutes.max(1e-9),
        failed.len(),
        failed
            .iter()
            .map(|(seed, why)| format!("\n  seed {seed}: {why}"))
            .collect::<String>()
    );
}

/// Shared waiters behind an exclusive waiter keep their place: none of them joins the shared
/// holder ahead of it, and none is granted too late to run.
#[test]
fn known_shared_waiters_behind_an_exclusive_waiter() {
    Scenario::from_moves(
        "known_shared_waiters_behind_an_exclusive_waiter",
        Topology::Server,
        vec![
            (0, Move::Run(Run::exclusive(5, 3_000).shared())),
            (300, Move::Run(Run::exclusive(5, 500).wait(30))),
            (300, Move::Run(Run::exclusive(5, 500).shared().wait(30))),
            (700, Move::Run(Run::exclusive(5, 500).shared().wait(30))),
            (700, Move::Run(Run::exclusive(5, 500).shared().wait(30))),
        ],
    )
    .run();
}

/// The head waiter, frozen across the release and thawed after its provisional grant lapsed,
/// queues again and runs.
#[test]
fn known_frozen_head_waiter_thawed_after_its_grant_lapsed() {
    Scenario::from_moves(
        "known_frozen_head_waiter_thawed_after_its_grant_lapsed",
        Topology::Server,
        vec![
            (0, Move::Run(Run::exclusive(5, 1_500))),
            (300, Move::Run(Run::exclusive(5, 500).wait(30))),
            (
                300,
                Move::Freeze {
                    run: 1,
                    for_ms: 3_500,
                },
            ),
        ],
    )
    .run();
}

/// `--max-waiters 1` behind a long hold: a frozen waiter's entry lapses after its life (15 s),
/// a newcomer takes the room, and the waiter, thawed, does not join beside it.
#[test]
fn known_thawed_waiter_under_max_waiters_one() {
    Scenario::from_moves(
        "known_thawed_waiter_under_max_waiters_one",
        Topology::Server,
        vec![
            (0, Move::Run(Run::exclusive(5, 25_000))),
            (
                300,
                Move::Run(Run::exclusive(5, 500).wait(60).max_waiters(1)),
            ),
            (
                300,
                Move::Freeze {
                    run: 1,
                    for_ms: 21_000,
                },
            ),
            (
                20_400,
                Move::Run(Run::exclusive(5, 500).wait(60).max_waiters(1)),
            ),
        ],
    )
    .run();
}

/// Three replacers 0.3 s apart: the last to arrive is the one that runs.
#[test]
fn known_last_of_three_replacers_wins() {
    Scenario::from_moves(
        "known_last_of_three_replacers_wins",
        Topology::Server,
        vec![
            (0, Move::Run(Run::exclusive(5, 3_000))),
            (300, Move::Run(Run::exclusive(5, 1_000).wait(30).replace())),
            (300, Move::Run(Run::exclusive(5, 1_000).wait(30).replace())),
            (300, Move::Run(Run::exclusive(5, 1_000).wait(30).replace())),
        ],
    )
    .run();
}

/// A replacer frozen once it queued, granted the lock while frozen, and asked to stop by a
/// later replacer: thawed after its grant lapsed, it does not come back and stop the later one.
#[test]
fn known_replacer_frozen_on_its_grant() {
    Scenario::from_moves(
        "known_replacer_frozen_on_its_grant",
        Topology::Server,
        vec![
            (0, Move::Run(Run::exclusive(5, 3_000))),
            (300, Move::Run(Run::exclusive(5, 1_000).wait(30).replace())),
            (
                300,
                Move::Freeze {
                    run: 1,
                    for_ms: 3_000,
                },
            ),
            (
                1_000,
                Move::Run(Run::exclusive(5, 2_000).wait(30).replace()),
            ),
        ],
    )
    .run();
}
