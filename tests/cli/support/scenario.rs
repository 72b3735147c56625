//! Seeded scenarios: a random schedule of runs, operator moves and faults on one or two keys,
//! played against real servers, then judged by the promises about waiting (DESIGN §20).
//!
//! A [`Scenario`] is a topology and a list of [`Step`]s, each a delay and a [`Move`]; it comes
//! from a seed ([`Scenario::generate`]) or is written out by hand ([`Scenario::from_moves`]),
//! and both replay the same moves. Every run's command is a stamped section (one log per key,
//! its run's number in place of a pid, so each section is tied to its run and its shape). While
//! the scenario plays, a sampler counts the live entries of each key's queue at 20 Hz.
//!
//! After the last process has exited, the oracles read the section logs, the exit statuses,
//! stderr, the samples and the audit log:
//!
//! 1. **Safety**: sections overlap only as their shapes allow (an exclusive one alone, shared
//!    with shared, at most 2 of `--slots 2`), and the fences of exclusive sections grow in
//!    start order. Sections running when a `release --force` or (on one server) a restart took
//!    the key away are left out: those moves give up the promise by design.
//! 2. **Bounded queue**: with `--max-waiters N` (every waiting run of such a scenario carries
//!    the same N), no sample counts more than N live entries. Frozen and killed waiters are
//!    counted, as the server counts them: an entry is live until its deadline, whoever owns it.
//!    In a quorum the bound is what a majority of nodes says in one round of samples.
//! 3. **No 69 with time left**: a `--wait` run that exits 69 before its wait ran out, although
//!    no server was restarted or slept during its life, is a failure (dropped connections and
//!    failovers do not excuse it: a waiter reconnects, and asks the sentinels again). A
//!    frozen waiter is held to it too: a freeze breaks no connection (the servers keep idle
//!    clients), so a waiter thawed with time left has nothing to be unavailable about.
//! 4. **The last replacer runs**: on a key whose replacers arrived ≥ 0.3 s apart, the last
//!    not faulted, the earlier ones faulted only once they had queued (frozen ≥ 0.3 s after
//!    arriving, or killed), and no server or operator move touching them, the last to arrive
//!    runs its section to the end and exits 0, and no earlier one starts after it.
//! 5. **Order**: of two runs of one key whose shapes exclude one another, neither faulted and
//!    the later one not a replacer (replacers go ahead by design), the one that arrived ≥ 0.3 s
//!    earlier starts first.
//! 6. **Audit ends**: every `acquired` entry has exactly one end (`released`, `lost`; a
//!    `forced` counts when nothing else ended it) after it, as `redlock log` shows the log (it
//!    ends a lapsed take itself). Read once every lease of the scenario has ended.
//! 7. **Liveness**: when a key comes free (no section of it running) while a waiter that has
//!    queued waits on it, some section starts within the documented 2 s (plus slack) — judged
//!    only in windows with no fault, operator move, several-key run or pause anywhere near.
//!
//! Every run also ends with a status its story explains: an untouched run exits 0, 75 or (when
//! a replacer came) 79.
//!
//! Every process has a deadline, every loop is bounded, and every process and server is killed
//! when the scenario is dropped.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::audit::takes_not_ended_once;
use super::redlock::{Outcome, Running};
use super::sections::{Dice, Held, Section, expect_sections_within_shapes, read_sections};
use super::{RedisQuorum, RedisSentinel, RedisServer, Redlock, TempDir, companion_key, wait_until};

/// The keys a scenario plays on; the second only in scenarios with runs of several keys.
pub const KEYS: [&str; 2] = ["ka", "kb"];

/// The oracle of audit ends (6) fails scenarios only when this is on (else its findings are
/// printed).
pub const AUDIT_ENDS: bool = true;

/// How far apart two arrivals must be for the order oracles to call one the earlier: a margin
/// for a process's start-up, far above it even on a loaded machine.
const APART: u64 = 300_000;

/// How far apart the starts of two holds granted together (shared, or slots) may fall.
const TOGETHER: u64 = 250_000;

/// The documented bound for a dead, frozen or departed head to hold the queue up, and the
/// slack a loaded test machine gets on top (with one tick, the longest a section's last stamp
/// may precede its end).
const BOUND: u64 = 2_000_000;
const SLACK: u64 = 1_000_000;

/// Each tick of a section, in ms; a run holds for `ticks` of them.
const TICK_MS: u64 = 100;

/// How often the sampler counts each queue's live entries.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);

/// The section every run runs: stamps `start`, a tick every `$TICK`, and `end`, each line
/// `SECONDS.MICROS RUN FENCE WHAT` in `$SCENARIO_LOGS/KEY.log` for every key it holds.
const SECTION_SCRIPT: &str = r#"if [ -n "$REDLOCK_KEYS" ]; then
    mapfile -t ks <<<"$REDLOCK_KEYS"; mapfile -t fs <<<"$REDLOCK_FENCES"
else
    ks=("$REDLOCK_KEY"); fs=("$REDLOCK_FENCE")
fi
stamp() {
    local j
    for j in "${!ks[@]}"; do echo "$EPOCHREALTIME $RUN ${fs[$j]} $1" >> "$SCENARIO_LOGS/${ks[$j]}.log"; done
}
stamp start
for ((n = 0; n < TICKS; n++)); do sleep "$TICK"; stamp tick; done
stamp end"#;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// One server.
    Server,
    /// Three independent servers, every run naming all of them.
    Quorum,
    /// A master and its replica behind a sentinel, which runs find the master through.
    Sentinel,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Exclusive,
    Shared,
    /// `--slots 2`.
    Slots,
}

impl Shape {
    fn held(self) -> Held {
        match self {
            Shape::Exclusive => Held::Exclusive,
            Shape::Shared => Held::Shared,
            Shape::Slots => Held::Slots(2),
        }
    }

    /// Whether holds of these shapes exclude one another.
    fn excludes(self, other: Shape) -> bool {
        !matches!(
            (self, other),
            (Shape::Shared, Shape::Shared) | (Shape::Slots, Shape::Slots)
        )
    }
}

/// One `redlock run`.
#[derive(Clone, Debug)]
pub struct Run {
    /// Indexes into [`KEYS`], in the order given.
    pub keys: Vec<usize>,
    pub shape: Shape,
    pub ttl_s: u64,
    pub wait_s: Option<u64>,
    pub max_waiters: Option<u32>,
    pub replace: bool,
    pub once_per: bool,
    /// How many ticks its section holds.
    pub ticks: u64,
}

impl Run {
    /// An exclusive run of the first key holding for `hold_ms`, with `ttl_s`.
    pub fn exclusive(ttl_s: u64, hold_ms: u64) -> Run {
        Run {
            keys: vec![0],
            shape: Shape::Exclusive,
            ttl_s,
            wait_s: None,
            max_waiters: None,
            replace: false,
            once_per: false,
            ticks: hold_ms / TICK_MS,
        }
    }

    pub fn shared(mut self) -> Run {
        self.shape = Shape::Shared;
        self
    }

    pub fn wait(mut self, secs: u64) -> Run {
        self.wait_s = Some(secs);
        self
    }

    pub fn max_waiters(mut self, n: u32) -> Run {
        self.max_waiters = Some(n);
        self
    }

    pub fn replace(mut self) -> Run {
        self.replace = true;
        self
    }

    fn describe(&self) -> String {
        let mut text = self
            .keys
            .iter()
            .map(|&k| KEYS[k])
            .collect::<Vec<_>>()
            .join("+");
        text.push_str(match self.shape {
            Shape::Exclusive => " excl",
            Shape::Shared => " shared",
            Shape::Slots => " slots2",
        });
        let _ = write!(text, " ttl{}", self.ttl_s);
        if let Some(wait) = self.wait_s {
            let _ = write!(text, " wait{wait}");
        }
        if let Some(n) = self.max_waiters {
            let _ = write!(text, " max{n}");
        }
        if self.replace {
            text.push_str(" replace");
        }
        if self.once_per {
            text.push_str(" once");
        }
        let _ = write!(text, " hold{:.1}", (self.ticks * TICK_MS) as f64 / 1000.0);
        text
    }
}

/// What a step of the schedule does.
#[derive(Clone, Debug)]
pub enum Move {
    Run(Run),
    /// `redlock pause KEY`, and `resume KEY` `for_ms` later.
    Pause {
        key: usize,
        for_ms: u64,
    },
    /// `redlock release --force KEY`.
    ForceRelease {
        key: usize,
    },
    /// The mark that tells a release someone queued behind the hold
    /// (`{KEY}:redlock:holder:queued`) deleted on every server: what a mark lost to a heal or
    /// an expiry is. Waiters are woken at their own next attempt instead (a delay, excused in
    /// the liveness oracle); safety and order must hold.
    LoseMark {
        key: usize,
    },
    /// SIGSTOP to the redlock of the `run`th run (counting runs only, from 0), SIGCONT `for_ms`
    /// later; nothing when it has exited already.
    Freeze {
        run: usize,
        for_ms: u64,
    },
    /// SIGKILL to the redlock of the `run`th run.
    Kill {
        run: usize,
    },
    /// `CLIENT KILL TYPE normal` on every server.
    ClientKill,
    /// Kill the `node`th server and start it again, empty.
    Restart {
        node: usize,
    },
    /// `DEBUG SLEEP 0.5` on the `node`th server.
    DebugSleep {
        node: usize,
    },
    /// The sentinel makes the replica the master (Sentinel only).
    Failover,
}

/// A move and how long after the previous move it is made.
#[derive(Clone, Debug)]
pub struct Step {
    pub after_ms: u64,
    pub what: Move,
}

pub struct Scenario {
    /// The seed it was generated from, or the name it was written under.
    pub seed: Option<u64>,
    pub name: String,
    pub topology: Topology,
    pub steps: Vec<Step>,
}

impl Scenario {
    /// The scenario of `seed`: a topology, then moves at random times over 8–15 s.
    pub fn generate(seed: u64) -> Scenario {
        let mut dice = Dice::new(seed);
        let topology = match dice.below(6) {
            0 => Topology::Quorum,
            1 => Topology::Sentinel,
            _ => Topology::Server,
        };
        let nodes = match topology {
            Topology::Server | Topology::Sentinel => 1,
            Topology::Quorum => 3,
        };
        // A bounded queue is one bound for every waiter of the scenario; runs of several keys
        // cannot carry one, so they come only in scenarios without it.
        let limit = (dice.below(4) == 0).then(|| 1 + dice.below(2) as u32);
        let several = limit.is_none() && dice.below(4) == 0;
        // Shared and slotted holders of one key refuse one another (78): one of the two a
        // scenario.
        let together = if dice.below(3) == 0 {
            Shape::Slots
        } else {
            Shape::Shared
        };
        let length_ms = 8_000 + dice.below(7_001);
        let mut steps = Vec::new();
        let mut runs = 0usize;
        let mut elapsed = 0;
        while elapsed < length_ms {
            // Bursts 0.3 s apart (the order oracles' margin), or anything up to 1.5 s.
            let after_ms = if dice.below(3) == 0 {
                300
            } else {
                100 + dice.below(1_401)
            };
            elapsed += after_ms;
            let roll = dice.below(100);
            let what = if runs == 0 || roll < 58 {
                runs += 1;
                Move::Run(random_run(&mut dice, topology, limit, several, together))
            } else if roll < 70 {
                // Freeze a recent run: most likely still waiting or holding.
                let back = dice.below(3.min(runs as u64)) as usize;
                // Now and then past the life of a waiter's entry behind a held lock (15 s).
                let for_ms = if dice.below(12) == 0 {
                    15_000 + dice.below(7_001)
                } else {
                    500 + dice.below(3_501)
                };
                Move::Freeze {
                    run: runs - 1 - back,
                    for_ms,
                }
            } else if roll < 74 {
                let back = dice.below(3.min(runs as u64)) as usize;
                Move::Kill {
                    run: runs - 1 - back,
                }
            } else if roll < 79 {
                Move::Pause {
                    key: pick_key(&mut dice, several),
                    for_ms: 500 + dice.below(2_501),
                }
            } else if roll < 82 {
                Move::ForceRelease {
                    key: pick_key(&mut dice, several),
                }
            } else if roll < 84 {
                Move::LoseMark {
                    key: pick_key(&mut dice, several),
                }
            } else if roll < 88 {
                Move::ClientKill
            } else if roll < 92 && topology == Topology::Sentinel {
                Move::Failover
            } else if roll < 92 {
                Move::Restart {
                    node: dice.below(nodes) as usize,
                }
            } else {
                Move::DebugSleep {
                    node: dice.below(nodes) as usize,
                }
            };
            steps.push(Step { after_ms, what });
        }
        Scenario {
            seed: Some(seed),
            name: format!("seed {seed}"),
            topology,
            steps,
        }
    }

    /// A scenario written out as moves, each with its delay after the previous one in ms.
    pub fn from_moves(name: &str, topology: Topology, moves: Vec<(u64, Move)>) -> Scenario {
        Scenario {
            seed: None,
            name: name.to_owned(),
            topology,
            steps: moves
                .into_iter()
                .map(|(after_ms, what)| Step { after_ms, what })
                .collect(),
        }
    }

    /// The scenario on one line: its topology and each move with its delay.
    pub fn describe(&self) -> String {
        let mut text = format!("{} on {:?}:", self.name, self.topology);
        let mut runs = 0;
        for step in &self.steps {
            let what = match &step.what {
                Move::Run(run) => {
                    runs += 1;
                    format!("R{} {}", runs - 1, run.describe())
                }
                Move::Pause { key, for_ms } => format!("pause {} {for_ms}ms", KEYS[*key]),
                Move::ForceRelease { key } => format!("force {}", KEYS[*key]),
                Move::LoseMark { key } => format!("lose-mark {}", KEYS[*key]),
                Move::Freeze { run, for_ms } => format!("freeze R{run} {for_ms}ms"),
                Move::Kill { run } => format!("kill R{run}"),
                Move::ClientKill => "client-kill".to_owned(),
                Move::Restart { node } => format!("restart n{node}"),
                Move::DebugSleep { node } => format!("sleep n{node}"),
                Move::Failover => "failover".to_owned(),
            };
            let _ = write!(text, " +{}ms {what};", step.after_ms);
        }
        text
    }

    /// How to play this scenario again.
    pub fn replay_hint(&self) -> String {
        match self.seed {
            Some(seed) => format!(
                "replay: REDLOCK_SCENARIO_SEED={seed} cargo test --test cli scenarios::replay -- --nocapture"
            ),
            None => format!(
                "replay: cargo test --test cli scenarios::{} -- --exact --nocapture",
                self.name
            ),
        }
    }

    /// Plays the scenario and judges it; panics with every violation, the story of every run
    /// and how to replay it.
    pub fn run(&self) {
        if let Err(failure) = self.outcome() {
            panic!("{failure}");
        }
    }

    /// Plays the scenario and judges it: `Err` with every violation, the runs' stories and how
    /// to replay it (a panic of the harness itself becomes an `Err` too).
    pub fn outcome(&self) -> Result<(), String> {
        println!("scenario {}", self.describe());
        let judged = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let played = self.play();
            let (violations, notes) = played.judge();
            for note in &notes {
                println!("  note: {note}");
            }
            (violations, played.story())
        }));
        let (violations, story) = match judged {
            Ok(judged) => judged,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                (
                    vec![format!("the harness panicked: {message}")],
                    String::new(),
                )
            }
        };
        if violations.is_empty() {
            return Ok(());
        }
        Err(format!(
            "scenario failed: {}\n{}\n{}\n{story}\n{}",
            self.name,
            violations.join("\n"),
            self.describe(),
            self.replay_hint()
        ))
    }

    fn play(&self) -> Played {
        let scratch = TempDir::new("scenario");
        let logs = scratch.path().to_path_buf();
        // DEBUG is refused by default since Redis 7; from the loopback it is a fault we play.
        let debug = ["--enable-debug-command", "local"];
        let mut place = match self.topology {
            Topology::Server => Place::Server(Box::new(RedisServer::start_with(&debug))),
            Topology::Quorum => Place::Quorum(Box::new(RedisQuorum::start_with(3, &debug))),
            Topology::Sentinel => {
                Place::Sentinel(Box::new(RedisSentinel::start_with_server_args(&debug)))
            }
        };
        let clock = Clock::new();
        let limit = self.steps.iter().find_map(|s| match &s.what {
            Move::Run(run) => run.max_waiters,
            _ => None,
        });
        let sampler = Sampler::start(place.urls(), limit, clock);
        let mut played = Played {
            scratch,
            logs,
            clock,
            topology: self.topology,
            runs: Vec::new(),
            disturbances: Vec::new(),
            queue_over: Vec::new(),
            audit: Vec::new(),
        };
        let mut timers: Vec<(Instant, Timer)> = Vec::new();
        let mut previous = Instant::now();
        for step in &self.steps {
            let due = previous + Duration::from_millis(step.after_ms);
            fire_timers_until(&mut timers, due, &mut played, &place);
            sleep_until(due);
            previous = Instant::now();
            played.apply(&step.what, &mut place, &mut timers);
        }
        fire_timers_until(&mut timers, far_future(), &mut played, &place);
        for run in &mut played.runs {
            if let Some(running) = run.running.take() {
                let outcome = running.wait();
                run.exited_us = outcome.exited_at.map(|at| clock.wall(at));
                run.outcome = Some(outcome);
            }
        }
        played.queue_over = sampler.stop();
        if self.topology != Topology::Quorum
            && !played
                .disturbances
                .iter()
                .any(|d| matches!(d.what, Disturbance::Restart | Disturbance::Failover))
        {
            let server = &place.servers()[0];
            // A killed or frozen holder's take ends when its lease lapses: read the logs once
            // no lease of either key is left.
            wait_until(
                "the scenario's leases to end",
                Duration::from_secs(30),
                || {
                    KEYS.iter()
                        .all(|k| !server.exists(k) && !server.exists(&companion_key(k, "leases")))
                        .then_some(())
                },
            );
            played.audit = KEYS
                .iter()
                .map(|k| {
                    takes_not_ended_once(server, k)
                        .into_iter()
                        .map(|wrong| format!("audit of {k}: {wrong}"))
                        .collect()
                })
                .collect();
        }
        played
    }
}

fn random_run(
    dice: &mut Dice,
    topology: Topology,
    limit: Option<u32>,
    several: bool,
    together: Shape,
) -> Run {
    let keys = if several && dice.below(3) == 0 {
        if dice.below(2) == 0 {
            vec![0, 1]
        } else {
            vec![1, 0]
        }
    } else {
        vec![pick_key(dice, several)]
    };
    // Shapes are refused in a quorum, and several keys are taken exclusively.
    let shape = if topology == Topology::Quorum || keys.len() > 1 {
        Shape::Exclusive
    } else {
        if dice.below(5) < 3 {
            Shape::Exclusive
        } else {
            together
        }
    };
    let wait_s = (dice.below(10) < 7).then(|| 3 + dice.below(28));
    // --replace: exclusive, one key, not a quorum; never with --once-per.
    let replace = shape == Shape::Exclusive
        && keys.len() == 1
        && topology != Topology::Quorum
        && dice.below(8) == 0;
    // --once-per: one key, one server (a quorum keeps no record per window); never replacing.
    let once_per =
        !replace && keys.len() == 1 && topology != Topology::Quorum && dice.below(30) == 0;
    Run {
        keys,
        shape,
        ttl_s: 2 + dice.below(4),
        max_waiters: wait_s.and(limit),
        wait_s,
        replace,
        once_per,
        // Now and then a hold long enough for a frozen waiter's entry to lapse behind it.
        ticks: if dice.below(15) == 0 {
            150 + dice.below(101)
        } else {
            2 + dice.below(19)
        },
    }
}

fn pick_key(dice: &mut Dice, several: bool) -> usize {
    if several { dice.below(2) as usize } else { 0 }
}

/// The servers of a scenario.
enum Place {
    Server(Box<RedisServer>),
    Quorum(Box<RedisQuorum>),
    Sentinel(Box<RedisSentinel>),
}

impl Place {
    fn redlock(&self) -> Redlock {
        match self {
            Place::Server(server) => Redlock::new(server),
            Place::Quorum(quorum) => quorum.redlock(),
            Place::Sentinel(sentinel) => Redlock::without_url().args(["--url", &sentinel.url()]),
        }
    }

    /// The servers that hold the locks: on Sentinel, the master of the moment.
    fn servers(&self) -> Vec<&RedisServer> {
        match self {
            Place::Server(server) => vec![server],
            Place::Quorum(quorum) => quorum.nodes().iter().collect(),
            Place::Sentinel(sentinel) => vec![sentinel.master()],
        }
    }

    fn urls(&self) -> Vec<String> {
        self.servers().iter().map(|s| s.url()).collect()
    }

    fn server_mut(&mut self, node: usize) -> &mut RedisServer {
        match self {
            Place::Server(server) => server,
            Place::Quorum(quorum) => quorum.node_mut(node % 3),
            Place::Sentinel(sentinel) => sentinel.master_mut(),
        }
    }
}

/// The wall clock the sections stamp (µs since the epoch), read off the monotonic clock so
/// that a process's exit, known as an `Instant`, can be placed among the stamps.
#[derive(Clone, Copy)]
struct Clock {
    base: Instant,
    base_wall: u64,
}

impl Clock {
    fn new() -> Clock {
        Clock {
            base: Instant::now(),
            base_wall: wall_now(),
        }
    }

    fn now(&self) -> u64 {
        self.wall(Instant::now())
    }

    fn wall(&self, at: Instant) -> u64 {
        self.base_wall + at.saturating_duration_since(self.base).as_micros() as u64
    }
}

fn wall_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(3600)
}

/// Waits for the schedule's next move (the schedule's own delay, not a synchronisation).
fn sleep_until(due: Instant) {
    let left = due.saturating_duration_since(Instant::now());
    if !left.is_zero() {
        thread::sleep(left);
    }
}

/// The second half of a move, due later.
enum Timer {
    Thaw(usize),
    Resume(usize),
}

/// Fires, on time, every timer due before `until`; with `until` far off, all of them.
fn fire_timers_until(
    timers: &mut Vec<(Instant, Timer)>,
    until: Instant,
    played: &mut Played,
    place: &Place,
) {
    loop {
        timers.sort_by_key(|(due, _)| *due);
        if timers.first().is_none_or(|(due, _)| *due > until) {
            return;
        }
        let (due, timer) = timers.remove(0);
        sleep_until(due);
        match timer {
            Timer::Thaw(run) => {
                let run = &mut played.runs[run];
                if let Some(running) = &mut run.running {
                    running.signal_if_running(libc::SIGCONT);
                }
                if let Some(open) = run.frozen.iter_mut().find(|f| f.1 == u64::MAX) {
                    open.1 = played.clock.now();
                }
            }
            Timer::Resume(key) => {
                let _ = place
                    .redlock()
                    .args(["resume", KEYS[key]])
                    .timeout(Duration::from_secs(10))
                    .run();
                if let Some(open) = played.disturbances.iter_mut().find(|d| {
                    d.what == Disturbance::Pause && d.key == Some(key) && d.to == u64::MAX
                }) {
                    open.to = played.clock.now();
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Disturbance {
    Pause,
    ForceRelease,
    LostMark,
    ClientKill,
    Restart,
    DebugSleep,
    Failover,
}

impl Disturbance {
    /// Whether it touched the servers (rather than one key's records).
    fn of_servers(self) -> bool {
        matches!(
            self,
            Disturbance::ClientKill
                | Disturbance::Restart
                | Disturbance::DebugSleep
                | Disturbance::Failover
        )
    }
}

/// A server fault or operator move, from when it was made to when it was over (µs).
#[derive(Debug)]
struct Disturbed {
    what: Disturbance,
    /// The key an operator move was about; `None` for the servers' faults.
    key: Option<usize>,
    from: u64,
    to: u64,
}

impl Disturbed {
    fn touches(&self, keys: &[usize], from: u64, to: u64) -> bool {
        self.from <= to && self.to >= from && self.key.is_none_or(|k| keys.contains(&k))
    }
}

/// A run as it was played.
struct PlayedRun {
    spec: Run,
    arrived: u64,
    running: Option<Running>,
    pid: i32,
    outcome: Option<Outcome>,
    exited_us: Option<u64>,
    /// Frozen from, to (µs); `to` is `u64::MAX` until thawed.
    frozen: Vec<(u64, u64)>,
    killed: Option<u64>,
}

impl PlayedRun {
    fn faulted(&self) -> bool {
        !self.frozen.is_empty() || self.killed.is_some()
    }

    fn code(&self) -> Option<i32> {
        self.outcome.as_ref().and_then(Outcome::code)
    }

    fn ended(&self) -> u64 {
        self.exited_us.unwrap_or(u64::MAX)
    }

    fn stderr(&self) -> &str {
        self.outcome.as_ref().map_or("", |o| o.stderr.as_str())
    }
}

struct Played {
    /// Kept so that the logs outlive the judging.
    #[allow(dead_code)]
    scratch: TempDir,
    logs: PathBuf,
    clock: Clock,
    topology: Topology,
    runs: Vec<PlayedRun>,
    disturbances: Vec<Disturbed>,
    /// Samples that counted more live waiters than the bound.
    queue_over: Vec<String>,
    /// Each key's takes without exactly one end in its audit log (one server, no restart).
    audit: Vec<Vec<String>>,
}

impl Played {
    fn apply(&mut self, what: &Move, place: &mut Place, timers: &mut Vec<(Instant, Timer)>) {
        let clock = self.clock;
        match what {
            Move::Run(spec) => {
                let index = self.runs.len();
                let mut redlock = place
                    .redlock()
                    .env("SCENARIO_LOGS", &self.logs)
                    .env("RUN", index.to_string())
                    .env("TICKS", spec.ticks.to_string())
                    .env("TICK", format!("0.{}", TICK_MS / 100))
                    .arg("run");
                for &k in &spec.keys {
                    redlock = redlock.args(["--key", KEYS[k]]);
                }
                redlock = redlock.args(["--ttl", &format!("{}s", spec.ttl_s)]);
                match spec.shape {
                    Shape::Exclusive => {}
                    Shape::Shared => redlock = redlock.arg("--shared"),
                    Shape::Slots => redlock = redlock.args(["--slots", "2"]),
                }
                if let Some(wait) = spec.wait_s {
                    redlock = redlock.args(["--wait", &format!("{wait}s")]);
                }
                if let Some(n) = spec.max_waiters {
                    redlock = redlock.args(["--max-waiters", &n.to_string()]);
                }
                if spec.replace {
                    redlock = redlock.arg("--replace");
                }
                if spec.once_per {
                    redlock = redlock.args(["--once-per", "1h"]);
                }
                // Room for the wait, the hold, a frozen holder's lease and the longest freeze.
                let deadline =
                    spec.wait_s.unwrap_or(0) + spec.ticks * TICK_MS / 1000 + 2 * spec.ttl_s + 50;
                let redlock = redlock.timeout(Duration::from_secs(deadline)).args([
                    "--",
                    "bash",
                    "-c",
                    SECTION_SCRIPT,
                ]);
                let arrived = clock.now();
                let running = redlock.spawn();
                self.runs.push(PlayedRun {
                    spec: spec.clone(),
                    arrived,
                    pid: running.pid(),
                    running: Some(running),
                    outcome: None,
                    exited_us: None,
                    frozen: Vec::new(),
                    killed: None,
                });
            }
            Move::Freeze { run, for_ms } => {
                let Some(target) = self.runs.get_mut(*run) else {
                    return;
                };
                let Some(running) = &mut target.running else {
                    return;
                };
                if running.signal_if_running(libc::SIGSTOP) {
                    target.frozen.push((clock.now(), u64::MAX));
                    timers.push((
                        Instant::now() + Duration::from_millis(*for_ms),
                        Timer::Thaw(*run),
                    ));
                }
            }
            Move::Kill { run } => {
                let Some(target) = self.runs.get_mut(*run) else {
                    return;
                };
                let Some(running) = &mut target.running else {
                    return;
                };
                if running.signal_if_running(libc::SIGKILL) {
                    target.killed = Some(clock.now());
                }
            }
            Move::Pause { key, for_ms } => {
                let from = clock.now();
                let _ = place
                    .redlock()
                    .args(["pause", KEYS[*key]])
                    .timeout(Duration::from_secs(10))
                    .run();
                self.disturbances.push(Disturbed {
                    what: Disturbance::Pause,
                    key: Some(*key),
                    from,
                    to: u64::MAX,
                });
                timers.push((
                    Instant::now() + Duration::from_millis(*for_ms),
                    Timer::Resume(*key),
                ));
            }
            Move::ForceRelease { key } => {
                let from = clock.now();
                let _ = place
                    .redlock()
                    .args(["release", "--force", KEYS[*key]])
                    .timeout(Duration::from_secs(10))
                    .run();
                self.disturbances.push(Disturbed {
                    what: Disturbance::ForceRelease,
                    key: Some(*key),
                    from,
                    to: clock.now(),
                });
            }
            Move::LoseMark { key } => {
                let from = clock.now();
                let mark = format!("{}:queued", companion_key(KEYS[*key], "holder"));
                for server in place.servers() {
                    let _: redis::RedisResult<i64> = server.try_query(&["DEL", &mark]);
                }
                // Until the next attempt of a waiter behind a held lock (every 5 s) marks it
                // again.
                self.disturbances.push(Disturbed {
                    what: Disturbance::LostMark,
                    key: Some(*key),
                    from,
                    to: clock.now() + 6_000_000,
                });
            }
            Move::ClientKill => {
                let from = clock.now();
                for server in place.servers() {
                    let _: redis::RedisResult<i64> =
                        server.try_query(&["CLIENT", "KILL", "TYPE", "normal"]);
                }
                self.disturbances.push(Disturbed {
                    what: Disturbance::ClientKill,
                    key: None,
                    from,
                    to: clock.now(),
                });
            }
            Move::Restart { node } => {
                let from = clock.now();
                place.server_mut(*node).restart();
                self.disturbances.push(Disturbed {
                    what: Disturbance::Restart,
                    key: None,
                    from,
                    to: clock.now(),
                });
            }
            Move::Failover => {
                let from = clock.now();
                if let Place::Sentinel(sentinel) = place {
                    sentinel.failover();
                }
                self.disturbances.push(Disturbed {
                    what: Disturbance::Failover,
                    key: None,
                    from,
                    to: clock.now(),
                });
            }
            Move::DebugSleep { node } => {
                let from = clock.now();
                let _: redis::RedisResult<()> = place
                    .server_mut(*node)
                    .try_query(&["DEBUG", "SLEEP", "0.5"]);
                self.disturbances.push(Disturbed {
                    what: Disturbance::DebugSleep,
                    key: None,
                    from,
                    to: clock.now().max(from + 500_000),
                });
            }
        }
    }

    /// Every run: when it arrived, what it was, what befell it, and how it ended.
    fn story(&self) -> String {
        let mut text = String::from("runs (times in s from the first arrival):\n");
        let zero = self.runs.first().map_or(0, |r| r.arrived);
        let secs = |us: u64| (us.saturating_sub(zero)) as f64 / 1e6;
        for (i, run) in self.runs.iter().enumerate() {
            let status = run
                .outcome
                .as_ref()
                .and_then(|o| o.status)
                .map_or("?".to_owned(), |s| format!("{s}"));
            let _ = write!(
                text,
                "  R{i} at {:.2} ({}) pid {}: {status} at {:.2}",
                secs(run.arrived),
                run.spec.describe(),
                run.pid,
                run.exited_us.map_or(f64::NAN, secs)
            );
            for (from, to) in &run.frozen {
                let _ = write!(text, "; frozen {:.2}–{:.2}", secs(*from), secs(*to));
            }
            if let Some(at) = run.killed {
                let _ = write!(text, "; killed {:.2}", secs(at));
            }
            for line in run.stderr().lines().filter(|l| l.starts_with("redlock:")) {
                let _ = write!(text, "\n      {line}");
            }
            text.push('\n');
        }
        for d in &self.disturbances {
            let _ = writeln!(
                text,
                "  {:?}{} {:.2}–{:.2}",
                d.what,
                d.key.map_or(String::new(), |k| format!(" {}", KEYS[k])),
                secs(d.from),
                secs(d.to)
            );
        }
        for (k, key) in KEYS.iter().enumerate() {
            for s in read_sections(&self.log(k)) {
                let _ = writeln!(
                    text,
                    "  {key}: R{} {:.3}–{:.3}{} fence {}",
                    s.pid,
                    secs(s.first),
                    secs(s.last),
                    if s.ended { "" } else { " (cut)" },
                    s.fence
                );
            }
        }
        text
    }

    fn log(&self, key: usize) -> PathBuf {
        self.logs.join(format!("{}.log", KEYS[key]))
    }

    fn run_of(&self, section: &Section) -> &PlayedRun {
        &self.runs[section.pid as usize]
    }

    /// The violations of the oracles that are on, and notes from those that are not.
    fn judge(&self) -> (Vec<String>, Vec<String>) {
        let mut violations = Vec::new();
        let mut notes = Vec::new();
        let sections: Vec<Vec<Section>> = (0..KEYS.len())
            .map(|k| read_sections(&self.log(k)))
            .collect();
        self.safety(&sections, &mut violations);
        for over in &self.queue_over {
            violations.push(format!("bounded queue: {over}"));
        }
        self.no_69_with_time_left(&mut violations);
        self.statuses(&mut violations);
        self.last_replacer_runs(&sections, &mut violations);
        self.order(&sections, &mut violations);
        self.liveness(&sections, &mut violations);
        let audit = self.audit_ends();
        if AUDIT_ENDS {
            violations.extend(audit);
        } else {
            notes.extend(audit);
        }
        (violations, notes)
    }

    /// Oracle 1.
    fn safety(&self, sections: &[Vec<Section>], violations: &mut Vec<String>) {
        for (k, of_key) in sections.iter().enumerate() {
            let kept: Vec<Section> = of_key
                .iter()
                .filter(|s| {
                    !self.disturbances.iter().any(|d| {
                        // A restart of the only server, or a failover to a replica the lock
                        // had not reached (no --replicas), loses the lock: the promise is
                        // --replicas' to keep, not waiting's.
                        let takes_away = d.what == Disturbance::ForceRelease
                            || d.what == Disturbance::Failover
                            || (d.what == Disturbance::Restart
                                && self.topology != Topology::Quorum);
                        takes_away && d.touches(&[k], s.first, s.last)
                    })
                })
                .map(|s| Section { ..*s })
                .collect();
            let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                expect_sections_within_shapes(&kept, |s| self.run_of(s).spec.shape.held());
            }));
            if let Err(panic) = checked {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_else(|| "sections overlap".to_owned());
                violations.push(format!("safety on {}: {message}", KEYS[k]));
            }
        }
    }

    fn servers_disturbed(&self, from: u64, to: u64) -> bool {
        self.disturbances
            .iter()
            .any(|d| d.what.of_servers() && d.from <= to && d.to >= from)
    }

    fn disturbed(&self, keys: &[usize], from: u64, to: u64) -> bool {
        self.disturbances.iter().any(|d| d.touches(keys, from, to))
    }

    /// Oracle 3.
    fn no_69_with_time_left(&self, violations: &mut Vec<String>) {
        for (i, run) in self.runs.iter().enumerate() {
            let Some(wait) = run.spec.wait_s else {
                continue;
            };
            if run.code() != Some(69) || run.killed.is_some() {
                continue;
            }
            let ended = run.ended();
            let time_left = ended + 500_000 < run.arrived + wait * 1_000_000;
            // A dropped connection is no unhealthy server: a waiter gets past it. Nor is a
            // failover: a waiter asks the sentinels again and waits on the new master.
            let unhealthy = self.disturbances.iter().any(|d| {
                d.what.of_servers()
                    && d.what != Disturbance::ClientKill
                    && d.what != Disturbance::Failover
                    && d.from <= ended
                    && d.to >= run.arrived
            });
            if time_left && !unhealthy {
                violations.push(format!(
                    "R{i} exited 69 with its wait not run out and its server healthy{}",
                    if run.frozen.is_empty() {
                        ""
                    } else {
                        " (it had been frozen and thawed)"
                    }
                ));
            }
        }
    }

    /// Every status explained: an untouched run exits 0, 75, or 79 after a replacer came.
    fn statuses(&self, violations: &mut Vec<String>) {
        for (i, run) in self.runs.iter().enumerate() {
            if run.faulted() || self.disturbed(&run.spec.keys, run.arrived, run.ended()) {
                continue;
            }
            let replacer_came = self.runs.iter().any(|other| {
                other.spec.replace
                    && other.spec.keys.iter().any(|k| run.spec.keys.contains(k))
                    && other.arrived < run.ended()
            });
            match run.code() {
                Some(0 | 75) => {}
                Some(79) if replacer_came => {}
                // 69 has its own oracle, with the wait's own rule.
                Some(69) if run.spec.wait_s.is_some() => {}
                other => violations.push(format!(
                    "R{i} untouched by any fault exited {other:?}, which nothing in its story explains"
                )),
            }
        }
    }

    /// Oracle 4.
    fn last_replacer_runs(&self, sections: &[Vec<Section>], violations: &mut Vec<String>) {
        if self.runs.iter().any(|r| r.spec.keys.len() > 1) {
            return;
        }
        for (k, of_key) in sections.iter().enumerate() {
            let replacers: Vec<(usize, &PlayedRun)> = self
                .runs
                .iter()
                .enumerate()
                .filter(|(_, r)| r.spec.replace && r.spec.keys == [k])
                .collect();
            let Some(&(last, run)) = replacers.last() else {
                continue;
            };
            let apart = replacers
                .windows(2)
                .all(|w| w[1].1.arrived >= w[0].1.arrived + APART);
            let first = replacers[0].1.arrived;
            // An earlier replacer frozen once it had queued (or killed) is held to it too: a
            // thaw must not bring a superseded replacer back. One frozen sooner may not have
            // arrived at the server before a later one.
            let queued_when_faulted =
                |r: &PlayedRun| r.frozen.iter().all(|&(from, _)| from >= r.arrived + APART);
            let untouched = !run.faulted()
                && replacers[..replacers.len() - 1]
                    .iter()
                    .all(|(_, r)| !r.faulted() || queued_when_faulted(r))
                && !self.disturbed(&[k], first, run.ended());
            // Without --wait a replacer that meets a shared hold is a plain busy run (75).
            let patient = run.spec.wait_s.is_some_and(|w| w >= 10);
            if !apart || !untouched || !patient || run.stderr().contains("queue is full") {
                continue;
            }
            let ran = of_key.iter().any(|s| s.pid as usize == last && s.ended);
            let last_start = of_key
                .iter()
                .find(|s| s.pid as usize == last)
                .map(|s| s.first);
            let after_it = of_key.iter().find(|s| {
                let r = s.pid as usize;
                r != last && self.runs[r].spec.replace && last_start.is_some_and(|l| s.first > l)
            });
            if let Some(s) = after_it {
                violations.push(format!(
                    "R{} replaced on {} after the last replacer R{last} started; \
                     the last --replace to arrive must be the one that runs",
                    s.pid, KEYS[k]
                ));
            }
            if !ran || run.code() != Some(0) {
                violations.push(format!(
                    "the last replacer of {}, R{last}, did not run to the end (exit {:?}); \
                     the last --replace to arrive must be the one that runs",
                    KEYS[k],
                    run.code()
                ));
            }
        }
    }

    /// Oracle 5.
    fn order(&self, sections: &[Vec<Section>], violations: &mut Vec<String>) {
        for (k, of_key) in sections.iter().enumerate() {
            let start_of = |run: usize| {
                of_key
                    .iter()
                    .find(|s| s.pid as usize == run)
                    .map(|s| s.first)
            };
            for (a, ra) in self.runs.iter().enumerate() {
                for (b, rb) in self.runs.iter().enumerate() {
                    if ra.spec.keys != [k]
                        || rb.spec.keys != [k]
                        || rb.arrived < ra.arrived + APART
                        || rb.spec.replace
                        || ra.faulted()
                        || rb.faulted()
                    {
                        continue;
                    }
                    let (Some(sa), Some(sb)) = (start_of(a), start_of(b)) else {
                        continue;
                    };
                    // Holds that go together may be granted together, and start in any order.
                    let together = if ra.spec.shape.excludes(rb.spec.shape) {
                        0
                    } else {
                        TOGETHER
                    };
                    // A lost mark only delays a hand-off: the order holds through it.
                    let disturbed = self.disturbances.iter().any(|d| {
                        d.what != Disturbance::LostMark && d.touches(&[k], ra.arrived, sa)
                    });
                    if sb + together < sa && !disturbed {
                        violations.push(format!(
                            "order on {}: R{b} arrived {:.2} s after R{a} but started {:.2} s before it",
                            KEYS[k],
                            (rb.arrived - ra.arrived) as f64 / 1e6,
                            (sa - sb) as f64 / 1e6
                        ));
                    }
                }
            }
        }
    }

    /// Oracle 7.
    fn liveness(&self, sections: &[Vec<Section>], violations: &mut Vec<String>) {
        for (k, of_key) in sections.iter().enumerate() {
            // The moments the key came free: no section of it running.
            let mut free_at = Vec::new();
            let mut busy_until = 0u64;
            for (i, s) in of_key.iter().enumerate() {
                busy_until = busy_until.max(s.last);
                let next = of_key.get(i + 1).map(|n| n.first);
                if next.is_none_or(|n| n > busy_until) {
                    free_at.push((busy_until, next));
                }
            }
            for (free, next) in free_at {
                let (from, to) = (free.saturating_sub(BOUND + SLACK), free + BOUND + SLACK);
                let quiet = !self.disturbed(&[0, 1], from, to)
                    && self.runs.iter().all(|r| {
                        let alive = r.arrived <= to && r.ended() >= from;
                        !alive
                            || (r.spec.keys.len() == 1
                                && r.frozen.iter().all(|f| f.1 < from || f.0 > to)
                                && r.killed.is_none_or(|at| at < from || at > to))
                    });
                if !quiet {
                    continue;
                }
                let waiter = self.runs.iter().position(|r| {
                    r.spec.keys == [k]
                        && !r.faulted()
                        && r.arrived + 500_000 < free
                        && r.ended() > free
                        && !of_key
                            .iter()
                            .any(|s| s.pid as usize == index_of(&self.runs, r) && s.first <= free)
                        && r.spec
                            .wait_s
                            .is_some_and(|w| r.arrived + w * 1_000_000 > to)
                        && !r.stderr().contains("queue is full")
                });
                let Some(waiter) = waiter else {
                    continue;
                };
                let late = next.is_none_or(|n| n > free + BOUND + SLACK);
                if late {
                    violations.push(format!(
                        "liveness on {}: it came free at {:.2} with R{waiter} waiting, and the next \
                         section started {}",
                        KEYS[k],
                        (free - self.runs[0].arrived) as f64 / 1e6,
                        next.map_or("never".to_owned(), |n| format!(
                            "{:.2} s later",
                            (n - free) as f64 / 1e6
                        ))
                    ));
                }
            }
        }
    }

    /// Oracle 6: each `acquired` has exactly one end after it, as `redlock log` shows the log
    /// (which ends a take whose lease lapsed itself).
    fn audit_ends(&self) -> Vec<String> {
        self.audit.iter().flatten().cloned().collect()
    }
}

/// Counts each queue's live entries at 20 Hz on every server, on connections of its own.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<Vec<String>>>,
}

/// The live entries of a queue's liveness set (deadline after the server's clock), counted
/// in one step on the server.
const COUNT_LIVE: &str = "local t = redis.call('TIME') \
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) \
return redis.call('ZCOUNT', KEYS[1], string.format('(%d', now), '+inf')";

impl Sampler {
    fn start(urls: Vec<String>, limit: Option<u32>, clock: Clock) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let Some(limit) = limit else {
            return Sampler { stop, thread: None };
        };
        let flag = Arc::clone(&stop);
        let thread = thread::spawn(move || {
            let mut over = Vec::new();
            let mut samples_over = 0;
            let mut connections: Vec<Option<redis::Connection>> =
                urls.iter().map(|_| None).collect();
            let majority = urls.len() / 2 + 1;
            // Bounded by the scenario's own end, and by a ceiling should that never come.
            let ceiling = Instant::now() + Duration::from_secs(300);
            while !flag.load(Ordering::Relaxed) && Instant::now() < ceiling {
                for (k, key) in KEYS.iter().enumerate() {
                    let alive = companion_key(key, "alive");
                    let counts: Vec<i64> = urls
                        .iter()
                        .zip(connections.iter_mut())
                        .map(|(url, slot)| count_live(url, slot, &alive))
                        .collect();
                    let mut sorted = counts.clone();
                    sorted.sort_unstable_by(|a, b| b.cmp(a));
                    if sorted[majority - 1] > i64::from(limit) {
                        samples_over += 1;
                        if over.len() < 3 {
                            over.push(format!(
                                "{} live waiters on {} under --max-waiters {limit} at {} µs (per node {counts:?})",
                                sorted[majority - 1],
                                KEYS[k],
                                clock.now()
                            ));
                        }
                    }
                }
                thread::sleep(SAMPLE_EVERY);
            }
            if samples_over > over.len() {
                over.push(format!("{samples_over} samples over the bound in all"));
            }
            over
        });
        Sampler {
            stop,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .map(|t| t.join().unwrap_or_default())
            .unwrap_or_default()
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One count, or 0 when the server does not answer (it is restarting, or asleep past the
/// timeout): a server that does not answer admits nobody either.
fn count_live(url: &str, slot: &mut Option<redis::Connection>, alive: &str) -> i64 {
    if slot.is_none() {
        let connected = redis::Client::open(url).and_then(|client| {
            let con = client.get_connection_with_timeout(Duration::from_millis(500))?;
            con.set_read_timeout(Some(Duration::from_secs(1)))?;
            con.set_write_timeout(Some(Duration::from_secs(1)))?;
            Ok(con)
        });
        *slot = connected.ok();
    }
    let Some(con) = slot else {
        return 0;
    };
    match redis::cmd("EVAL")
        .arg(COUNT_LIVE)
        .arg(1)
        .arg(alive)
        .query::<i64>(con)
    {
        Ok(n) => n,
        Err(_) => {
            *slot = None;
            0
        }
    }
}

fn index_of(runs: &[PlayedRun], run: &PlayedRun) -> usize {
    runs.iter()
        .position(|r| std::ptr::eq(r, run))
        .expect("a run of this scenario")
}
