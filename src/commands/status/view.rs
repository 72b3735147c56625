//! What `redlock status` prints: one lock as text or as its object in the `--json` document,
//! and what the servers say of their replicas ([`Replicated`]). A lock's [`View`] (its
//! inspections, and on a quorum each node's) decides once what is shown — its [`Facts`]:
//! the state, the holder and whether its process lives, the lease left, each node's view —
//! and `Facts::text` and `Facts::json` render those facts, each in its own form. Apart from the
//! parent module, which reads the locks a batch at a time and decides the exit status, because
//! this is the output's shape: the part a change to the text or to the JSON fields touches.
//!
//! The text names how each held lock is held on a `shape` line: `exclusive`, `shared` or
//! `N slots`.
//!
//! `--json` prints one document:
//!
//! ```text
//! {"now_ms": 1795238551756, "locks": [{
//!    "key": "report:daily",            // as given, without the prefix
//!    "redis_key": "prod:report:daily", // what is in Redis
//!    "state": "held" | "free" | "wrong_type" | "unknown" (quorum: not enough nodes answered;
//!             or the lock could not be read: then the object has only key, redis_key, state
//!             and error),
//!    "error": null | "cannot read …: NOPERM …",  // why the lock could not be read
//!    "type": "string" | "none" | "hash" | ...,  // the lock key's; "none" for a shared hold
//!    "ttl_left_ms": 29000 | null,      // null when free or without expiry; shared or slotted:
//!                                      // until the last holder's lease ends
//!    "fence": 17 | null,               // the fence counter's current value
//!    "token": "…",                     // only with --show-token, and only when held
//!    "holder": null | {"host", "pid", "user", "command", "started_ms", "renewed_ms",
//!                      "ttl_ms", "fence", "finished", "stop_asked_by" (null, or who
//!                      asked it to stop with --replace: "web-2 (pid 4242, user deploy)"),
//!                      "replicas" (the holder's --replicas N, null without it),
//!                      "age_ms", "since_renewal_ms",
//!                      "pid_alive": true | false | null (null: not on this host)},
//!    "last_run": null | {"outcome": "ok"|"failed"|"killed"|"lease lost"|"timed out"|"replaced",
//!                        "exit", "host", "pid",
//!                        "user", "command", "started_ms", "ended_ms", "duration_ms", "fence"},
//!    "shape": "exclusive" | "shared" | "slots" | null,  // how it is held; null when not held
//!    "slots": 1 | N | null,            // exclusive: 1; --slots N: N; shared or not held: null
//!    "holders": [{"slot": 0 | null, "host", "pid", "user", "command", "started_ms", "ttl_ms",
//!                 "fence", "deadline_ms", "finished" (kept by --hold-at-least), "age_ms",
//!                 "ttl_left_ms",
//!                 "token" (only with --show-token)}],  // shared/slot holders ([] otherwise),
//!                                      // by slot, then fence; "holder" stays the exclusive one
//!    "queue": [{"host", "pid", "user", "command", "since_ms"}],  // waiters, first in line first
//!    "counters": {"runs", "busy", "lost", "failed", "forced", "skipped", "replaced"},
//!    "last_ok_ms": 1795238551000 | null, // when a run last ended ok
//!    "paused": true | false,           // a pause in force: new runs are refused
//!    "once": {"window_start_ms", "every_ms", "host", "pid", "user", "started_ms", "ended_ms",
//!             "exit", "outcome"} | null,  // the --once-per window's run
//!    "pauses": [{"scope": "key" | "prefix", "in_force", "host", "pid", "user", "reason",
//!                "since_ms", "until_ms" (null: until resumed)}],  // in force or lapsed
//!    // only with several --url (a quorum):
//!    "quorum": {"nodes": 3, "majority": 2, "holding": 2},
//!    "nodes": [{"url", "state": "held"|"held_by_another_token"|"free"|"wrong_type"|"error",
//!               "ttl_left_ms", "fence", "error"}]}],
//!  "replication": [{"url", "address": null | "host:port" (each master of a cluster; [] for a
//!                   quorum),
//!                   "role", "offset", "replicas": [{"address", "state", "offset", "lag_s"}],
//!                   "error": null | "…"}]}  // INFO replication; an error when it was refused
//! ```
//!
//! The text ends with a `replication` line per master that has replicas (per server of a
//! Sentinel or Cluster URL, replicas or not): how many, their state, lag and bytes behind.
//! What matters for `--replicas`. A user that may not run INFO gets a note there instead.
//!
//! Numbers are integers; `*_ms` instants are milliseconds since the Unix epoch (server time).

use std::time::{Duration, UNIX_EPOCH};

use anyhow::Result;

use super::Failed;
use crate::lock::Ran;
use crate::lock::Shape;
use crate::lock::inspect::Inspection;
use crate::lock::keys::Keys;
use crate::lock::nodes::{Nodes, Tally};
use crate::lock::record::{Counters, Holder, LastRun, LockState, Pause, Sharer, Waiter};
use crate::lock::replicas::Replication;
use crate::redis::server::Server;
use crate::report::json::Json;
use crate::report::text::shown;
use crate::supervise::lease::fmt;

/// What each server says of its replicas (`INFO replication`): one more round trip, on the
/// same connection. What matters for `--replicas` is how many replicas each master has and how
/// far behind they are. A user that may not run INFO (a `+@read` user) gets a note instead:
/// `status` itself needs only read commands.
pub(super) struct Replicated {
    servers: Vec<(Server, Result<Masters>)>,
}

/// A server's masters (one, or each of a cluster's, by address) and their replicas.
type Masters = Vec<(Option<String>, Replication)>;

impl Replicated {
    /// Nothing for a quorum: its nodes are independent masters, whose replicas (if any) keep
    /// no lock (`--replicas` is refused there), and a node that did not answer the reading
    /// would be waited for once more.
    pub(super) fn read(nodes: &mut Nodes) -> Replicated {
        if nodes.is_quorum() {
            return Replicated {
                servers: Vec::new(),
            };
        }
        let found = nodes.each(crate::lock::replicas::of_masters);
        Replicated {
            servers: nodes.servers().cloned().zip(found).collect(),
        }
    }

    /// One line per master with replicas (or where replicas are expected: Sentinel, Cluster);
    /// nothing for a lone server.
    pub(super) fn text(&self) -> String {
        let mut out = String::new();
        for (server, found) in &self.servers {
            let expected = server.is_sentinel() || server.is_cluster();
            match found {
                Ok(masters) => {
                    for (address, r) in masters {
                        if !expected && r.is_master() && r.replicas.is_empty() {
                            continue;
                        }
                        let name = match address {
                            Some(address) => format!("{} (master {address})", server.name()),
                            None => server.name().to_string(),
                        };
                        out.push_str(&format!("replication  {name}: {}\n", r.describe()));
                    }
                }
                // Only an ACL denial is fixed by granting +info; a missing or refused password
                // says so itself.
                Err(e) => out.push_str(&format!(
                    "replication  {}: not shown ({}){}\n",
                    server.name(),
                    crate::report::error::render(e),
                    if crate::report::error::is_acl_denial(e) {
                        "; grant +info to see it"
                    } else {
                        ""
                    }
                )),
            }
        }
        out
    }

    pub(super) fn json(&self) -> Json {
        Json::Arr(
            self.servers
                .iter()
                .flat_map(|(server, found)| match found {
                    Ok(masters) => masters
                        .iter()
                        .map(|(address, r)| {
                            let mut fields = vec![
                                ("url", Json::str(server.name())),
                                ("address", Json::opt_str(address.as_deref())),
                            ];
                            if let Json::Obj(more) = r.json() {
                                fields.extend(more);
                            }
                            fields.push(("error", Json::Null));
                            Json::Obj(fields)
                        })
                        .collect::<Vec<_>>(),
                    Err(e) => vec![Json::Obj(vec![
                        ("url", Json::str(server.name())),
                        ("address", Json::Null),
                        ("error", Json::str(crate::report::error::render(e))),
                    ])],
                })
                .collect(),
        )
    }
}

pub(super) struct View<'a> {
    keys: &'a Keys,
    /// The inspection shown: the majority's, when one holds the lock.
    i: &'a Inspection,
    now_ms: i64,
    /// Each node's answer and what they add up to, in quorum mode.
    quorum: Option<Quorum<'a>>,
    /// Why the lock could not be read (on a quorum: by a majority), when it could not.
    pub(super) unreadable: Option<&'a Failed>,
}

struct Quorum<'a> {
    answers: &'a [(&'a str, Result<&'a Inspection, Failed>)],
    majority: usize,
    tally: Tally<'a>,
}

impl<'a> View<'a> {
    pub(super) fn new(
        keys: &'a Keys,
        answers: &'a [(&'a str, Result<&'a Inspection, Failed>)],
        majority: usize,
        now_ms: i64,
        nothing: &'a Inspection,
    ) -> View<'a> {
        let ok: Vec<Option<&Inspection>> = answers
            .iter()
            .map(|(_, a)| a.as_ref().ok().copied())
            .collect();
        // Fewer than a majority of the answers are readings of the lock: it was not read.
        let unreadable = (ok.iter().flatten().count() < majority)
            .then(|| answers.iter().find_map(|(_, a)| a.as_ref().err()))
            .flatten();
        if answers.len() == 1 {
            return View {
                keys,
                i: ok[0].unwrap_or(nothing),
                now_ms,
                quorum: None,
                unreadable,
            };
        }
        let tally = Tally::count(&ok, majority, nothing);
        View {
            keys,
            i: tally.shown,
            now_ms,
            quorum: Some(Quorum {
                answers,
                majority,
                tally,
            }),
            unreadable,
        }
    }

    pub(super) fn state(&self) -> LockState {
        if self.unreadable.is_some() || self.quorum.as_ref().is_some_and(|q| q.tally.unknown) {
            return LockState::Unknown;
        }
        self.i.state()
    }

    /// What this lock's output says, once: [`Facts::json`] and [`Facts::text`] render it.
    pub(super) fn facts(&self, show_token: bool) -> Facts<'a> {
        let i = self.i;
        let state = self.state();
        let held = state == LockState::Held;
        let quorum = self.quorum.as_ref().map(|q| QuorumFacts {
            majority: q.majority,
            holding: q.tally.holding,
            nodes: q
                .answers
                .iter()
                .map(|(url, answer)| NodeFacts {
                    url,
                    reading: match answer {
                        Ok(i) => Ok(NodeReading {
                            state: q.tally.view(i).as_str(),
                            ttl_left_ms: Some(i.key_pttl_ms()).filter(|ms| *ms >= 0),
                            fence: i.fence,
                        }),
                        Err(e) => Err(e.text.as_str()),
                    },
                })
                .collect(),
        });
        Facts {
            keys: self.keys,
            now_ms: self.now_ms,
            state,
            unreadable: self.unreadable,
            key_type: &i.key_type,
            ttl_left_ms: i.ttl_left_ms().filter(|_| held),
            fence: i.fence,
            token: i.token.as_deref().filter(|_| show_token && held),
            show_token,
            holder: i.holder().filter(|_| held).map(|h| (h, process_alive(h))),
            shape: i.shape().filter(|_| held),
            sharers: i.sharers(),
            last: i.last.as_ref(),
            quorum,
            queue: &i.queue,
            counters: &i.counters,
            paused: i.pause(self.now_ms).is_some(),
            once: i.once.as_ref(),
            pauses: &i.pauses,
        }
    }
}

/// Everything `status` says of one lock, decided once from the inspection (or, on a quorum,
/// the majority's) so that the text and the JSON cannot tell two stories: which holder is
/// shown, whether its process is alive, what is left of the lease, each node's view.
pub(super) struct Facts<'a> {
    keys: &'a Keys,
    now_ms: i64,
    state: LockState,
    /// Why the lock could not be read: then nothing else is shown.
    unreadable: Option<&'a Failed>,
    key_type: &'a str,
    /// What is left of the lease, while held.
    ttl_left_ms: Option<i64>,
    /// The fence counter: the last fencing token issued.
    fence: Option<i64>,
    /// With `--show-token`, while held.
    token: Option<&'a str>,
    show_token: bool,
    /// The exclusive holder while held, and whether its process exists (`None`: not on this
    /// host, or it finished).
    holder: Option<(&'a Holder, Option<bool>)>,
    /// How the lock is held, while held.
    shape: Option<Shape>,
    /// The shared or slotted holders.
    sharers: &'a [Sharer],
    last: Option<&'a LastRun>,
    quorum: Option<QuorumFacts<'a>>,
    queue: &'a [Waiter],
    counters: &'a Counters,
    /// A pause in force.
    paused: bool,
    once: Option<&'a Ran>,
    pauses: &'a [Pause],
}

struct QuorumFacts<'a> {
    majority: usize,
    /// How many nodes hold the lock with the shown token.
    holding: usize,
    nodes: Vec<NodeFacts<'a>>,
}

struct NodeFacts<'a> {
    url: &'a str,
    /// The node's view of the lock, or why it could not be read.
    reading: Result<NodeReading, &'a str>,
}

struct NodeReading {
    state: &'static str,
    ttl_left_ms: Option<i64>,
    fence: Option<i64>,
}

impl Facts<'_> {
    /// The lock's object in the `--json` document (`schemas/status.json`).
    pub(super) fn json(&self) -> Json {
        let mut fields = vec![
            ("key", Json::str(&self.keys.name)),
            ("redis_key", Json::str(&self.keys.lock)),
            ("state", Json::str(self.state.as_str())),
            (
                "error",
                self.unreadable.map_or(Json::Null, |f| Json::str(&f.text)),
            ),
        ];
        // What could not be read is not shown as empty records or zero counters.
        if self.unreadable.is_some() {
            return Json::Obj(fields);
        }
        fields.extend([
            ("type", Json::str(self.key_type)),
            ("ttl_left_ms", Json::opt_num(self.ttl_left_ms)),
            ("fence", Json::opt_num(self.fence)),
        ]);
        if self.show_token && self.state == LockState::Held {
            fields.push(("token", Json::opt_str(self.token)));
        }
        let holder = self.holder.map_or(Json::Null, |(h, alive)| {
            let mut json = h.json(self.now_ms);
            if let Json::Obj(fields) = &mut json {
                fields.push(("pid_alive", alive.map_or(Json::Null, Json::Bool)));
            }
            json
        });
        fields.push(("holder", holder));
        fields.push((
            "shape",
            self.shape.map_or(Json::Null, |s| Json::str(s.kind())),
        ));
        fields.push((
            "slots",
            match self.shape {
                Some(Shape::Slots(n)) => Json::Num(n.into()),
                Some(Shape::Exclusive) => Json::Num(1),
                _ => Json::Null,
            },
        ));
        fields.push((
            "holders",
            Json::Arr(
                self.sharers
                    .iter()
                    .map(|h| h.json(self.now_ms, self.show_token))
                    .collect(),
            ),
        ));
        fields.push(("last_run", self.last.map_or(Json::Null, LastRun::json)));
        if let Some(q) = &self.quorum {
            fields.push((
                "quorum",
                Json::Obj(vec![
                    ("nodes", Json::Num(q.nodes.len() as i128)),
                    ("majority", Json::Num(q.majority as i128)),
                    ("holding", Json::Num(q.holding as i128)),
                ]),
            ));
            let nodes = q.nodes.iter().map(|n| {
                let (state, ttl, fence, error) = match &n.reading {
                    Ok(r) => (r.state, r.ttl_left_ms, r.fence, None),
                    Err(e) => ("error", None, None, Some(*e)),
                };
                Json::Obj(vec![
                    ("url", Json::str(n.url)),
                    ("state", Json::str(state)),
                    ("ttl_left_ms", Json::opt_num(ttl)),
                    ("fence", Json::opt_num(fence)),
                    ("error", Json::opt_str(error)),
                ])
            });
            fields.push(("nodes", Json::Arr(nodes.collect())));
        }
        fields.push((
            "queue",
            Json::Arr(self.queue.iter().map(Waiter::json).collect()),
        ));
        fields.push(("counters", self.counters.json()));
        fields.push(("last_ok_ms", Json::opt_num(self.counters.last_ok_ms)));
        fields.push(("paused", Json::Bool(self.paused)));
        fields.push(("once", self.once.map_or(Json::Null, Ran::json)));
        fields.push((
            "pauses",
            Json::Arr(self.pauses.iter().map(|p| p.json(self.now_ms)).collect()),
        ));
        Json::Obj(fields)
    }

    /// The lock's lines of text.
    pub(super) fn text(&self) -> String {
        let mut out = String::new();
        let key = &self.keys.lock;
        if let Some(failed) = self.unreadable {
            return format!("{key}: UNKNOWN: could not be read: {}\n", failed.text);
        }
        let shape = self
            .shape
            .map(|s| format!("  shape     {}\n", s.describe()))
            .unwrap_or_default();
        match self.state {
            LockState::WrongType => {
                out.push_str(&format!(
                    "{key}: NOT A LOCK: the key holds a {}; redlock cannot use it until it is \
                     deleted or another key is chosen\n",
                    self.key_type
                ));
                return out;
            }
            LockState::Free => out.push_str(&format!("{key}: free\n")),
            LockState::Unknown => out.push_str(&format!(
                "{key}: UNKNOWN: held on fewer nodes than a majority, and the nodes that did not \
                 answer could complete one\n"
            )),
            LockState::Held if !self.sharers.is_empty() => {
                out.push_str(&format!(
                    "{key}: {}; {}\n",
                    crate::lock::describe_sharers(
                        self.shape.unwrap_or_default(),
                        self.sharers.len()
                    ),
                    self.expiry().replace("expires", "the last lease ends")
                ));
                out.push_str(&shape);
                for h in self.sharers {
                    let mut line = format!("  holder    {}", h.describe());
                    if let Some(started) = h.started_ms {
                        line.push_str(&format!(", since {} ago", self.age(started)));
                    }
                    if h.finished {
                        line.push_str(", command finished (kept by --hold-at-least)");
                    }
                    if let Some(deadline) = h.deadline_ms {
                        line.push_str(&format!(
                            ", expires in {}",
                            fmt(Duration::from_millis((deadline - self.now_ms).max(0) as u64))
                        ));
                    }
                    if let Some(cmd) = &h.command {
                        line.push_str(&format!(": {}", shown(cmd)));
                    }
                    out.push_str(&line);
                    out.push('\n');
                    if self.show_token
                        && let Some(token) = &h.token
                    {
                        out.push_str(&format!("            token {token}\n"));
                    }
                }
            }
            LockState::Held => match self.holder {
                Some((h, alive)) => {
                    let mut who = format!(
                        "{key}: held by {}",
                        crate::lock::record::who(
                            &h.host,
                            h.pid.map(i64::from),
                            h.user.as_deref(),
                            None
                        )
                    );
                    if let Some(f) = h.fence {
                        who.push_str(&format!(", fence {f}"));
                    }
                    out.push_str(&who);
                    out.push('\n');
                    out.push_str(&shape);
                    if let Some(cmd) = &h.command {
                        out.push_str(&format!("  command   {}\n", shown(cmd)));
                    }
                    if let Some(started) = h.started_ms {
                        out.push_str(&format!(
                            "  since     {} ({} ago)\n",
                            instant(started),
                            self.age(started)
                        ));
                    }
                    out.push_str(&format!("  lease     {}\n", self.liveness(h, alive)));
                    // Which faults the holder's lock survives (docs/guide.md's table).
                    if let Some(n) = h.replicas {
                        out.push_str(&format!(
                            "  replicas  --replicas {n}: each renewal counts once {n} acknowledge it (what that \
                             survives: redlock doctor --replicas {n})\n"
                        ));
                    }
                    if let Some(by) = &h.stop_asked_by {
                        out.push_str(&format!(
                            "  stopping  asked to stop by {} (--replace)",
                            shown(by)
                        ));
                        // A kept hold or a dead holder has no command left to stop.
                        if !h.finished && alive != Some(false) {
                            out.push_str(": its redlock stops the command's tree, then releases");
                        }
                        out.push('\n');
                    }
                }
                None => {
                    out.push_str(&format!(
                        "{key}: held by a client that left no holder record (not redlock?); {}\n",
                        self.expiry()
                    ));
                    out.push_str(&shape);
                }
            },
        }
        if let Some(once) = self.once {
            out.push_str(&format!("  once per  {}\n", once.summary()));
        }
        for pause in self.pauses {
            out.push_str(&format!("  paused    {}\n", pause.describe(self.now_ms)));
        }
        if let Some(q) = &self.quorum {
            out.push_str(&format!(
                "  quorum    {} of {} nodes hold it (majority {})\n",
                q.holding,
                q.nodes.len(),
                q.majority
            ));
            for n in &q.nodes {
                let line = match &n.reading {
                    Ok(r) => {
                        let mut line = r.state.replace('_', " ");
                        if let Some(ms) = r.ttl_left_ms {
                            line.push_str(&format!(
                                ", expires in {}",
                                fmt(Duration::from_millis(ms as u64))
                            ));
                        }
                        if let Some(f) = r.fence {
                            line.push_str(&format!(", fence counter {f}"));
                        }
                        line
                    }
                    Err(e) => format!("ERROR: {e}"),
                };
                out.push_str(&format!("  node      {}: {line}\n", n.url));
            }
        }
        if let Some(token) = self.token {
            out.push_str(&format!("  token     {token}\n"));
        }
        if let Some(last) = self.last {
            let mut line = format!("  last run  {}", last.outcome.as_str());
            if let Some(exit) = last.exit {
                line.push_str(&format!(" (exit {exit})"));
            }
            if let Some(host) = &last.host {
                line.push_str(&format!(" on {}", shown(host)));
            }
            if let Some(started) = last.started_ms {
                line.push_str(&format!(", started {}", instant(started)));
            }
            if let Some(ms) = last.duration_ms {
                line.push_str(&format!(
                    ", took {}",
                    fmt(Duration::from_millis(ms.max(0) as u64))
                ));
            }
            out.push_str(&line);
            out.push('\n');
        }
        for (place, waiter) in self.queue.iter().enumerate() {
            let mut line = format!(
                "  waiting   {}. {}",
                place + 1,
                crate::lock::record::who(
                    &waiter.host,
                    waiter.pid.map(i64::from),
                    waiter.user.as_deref(),
                    None
                )
            );
            if let Some(since) = waiter.since_ms {
                line.push_str(&format!(", for {}", self.age(since)));
            }
            if let Some(command) = &waiter.command {
                line.push_str(&format!(": {}", shown(command)));
            }
            out.push_str(&line);
            out.push('\n');
        }
        if let Some(fence) = self.fence {
            out.push_str(&format!("  fence     {fence} (last issued)\n"));
        }
        let c = self.counters;
        out.push_str(&format!(
            "  counters  runs {}, busy {}, lease lost {}, failed {}, forced releases {}",
            c.runs, c.busy, c.lost, c.failed, c.forced
        ));
        if c.skipped > 0 {
            out.push_str(&format!(", skipped (--once-per) {}", c.skipped));
        }
        if c.replaced > 0 {
            out.push_str(&format!(", replaced {}", c.replaced));
        }
        out.push('\n');
        out
    }

    fn age(&self, since_ms: i64) -> String {
        fmt(Duration::from_millis(
            ((self.now_ms - since_ms).max(0) / 1000 * 1000) as u64,
        ))
    }

    fn expiry(&self) -> String {
        match self.ttl_left_ms {
            Some(ms) => format!("expires in {}", fmt(Duration::from_millis(ms as u64))),
            None => "no expiry: it will never free itself".to_string(),
        }
    }

    /// Whether the holder is alive, as far as its process and its renewals tell.
    fn liveness(&self, h: &Holder, alive: Option<bool>) -> String {
        let expiry = self.expiry();
        if alive == Some(false) {
            return format!(
                "DEAD: its process {} is gone from this host; nothing renews the lock, which {expiry}",
                h.pid.unwrap_or(0)
            );
        }
        if h.finished {
            return format!("command finished; kept until expiry by --hold-at-least, {expiry}");
        }
        if h.no_renewal {
            return format!(
                "taken to last without renewals (redlock acquire, or a run whose lease covers its \
                 --max-runtime), {expiry}"
            );
        }
        let (Some(renewed), Some(ttl)) = (h.renewed_ms, h.ttl_ms) else {
            return expiry;
        };
        let since = (self.now_ms - renewed).max(0);
        let interval = ttl / 3;
        if since <= interval + interval / 2 + 1000 {
            format!(
                "alive: renewed {} ago (every {}), {expiry}",
                fmt(Duration::from_millis(since as u64)),
                fmt(Duration::from_millis(interval as u64))
            )
        } else {
            format!(
                "NOT RENEWED for {} (a run renews every {}): the holder may be stalled or cut \
                 off; {expiry}",
                fmt(Duration::from_millis(since as u64)),
                fmt(Duration::from_millis(interval as u64))
            )
        }
    }
}

/// Whether the holder's process still exists, when it ran on this host (same host name);
/// `None` when that cannot be told from here. A holder that finished (`--hold-at-least`) has
/// no process to look for.
fn process_alive(h: &Holder) -> Option<bool> {
    let pid = libc::pid_t::try_from(h.pid?).ok().filter(|p| *p > 0)?;
    if h.finished || h.host != crate::lock::record::hostname() {
        return None;
    }
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let rc = unsafe { libc::kill(pid, 0) };
    Some(rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH))
}

/// Milliseconds since the epoch as RFC 3339, to the second.
fn instant(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}
