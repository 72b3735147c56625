//! `redlock status`: who holds a lock, since when, whether the holder is alive, how the last run
//! ended, and how often runs were refused or lost their lease.
//!
//! Read-only by construction: one pipeline of TYPE/MGET/PTTL/HGETALL per batch of keys (and SCAN
//! for `--all`), so a user with `+@read` can run it. Ages are computed against this host's clock,
//! while the recorded instants are the server's (`redlock doctor` reports the offset).
//!
//! Exit status: 0 when every named key is held, 1 when one is free, 78 when a key holds another
//! type (it is no lock, and nothing redlock does will change that), 69 when Redis cannot be
//! asked. `--all` exits 0 unless it could not ask.
//!
//! `--json` prints one document:
//!
//! ```text
//! {"now_ms": 1795238551756, "locks": [{
//!    "key": "report:daily",            // as given, without the prefix
//!    "redis_key": "prod:report:daily", // what is in Redis
//!    "state": "held" | "free" | "wrong_type" | "unknown" (quorum: not enough nodes answered),
//!    "type": "string" | "none" | "hash" | ...,
//!    "ttl_left_ms": 29000 | null,      // null when free or without expiry
//!    "fence": 17 | null,               // the fence counter's current value
//!    "token": "…",                     // only with --show-token, and only when held
//!    "holder": null | {"host", "pid", "user", "command", "started_ms", "renewed_ms",
//!                      "ttl_ms", "fence", "finished", "age_ms", "since_renewal_ms"},
//!    "last_run": null | {"outcome": "ok"|"failed"|"killed"|"lease lost", "exit", "host", "pid",
//!                        "user", "command", "started_ms", "ended_ms", "duration_ms", "fence"},
//!    "counters": {"runs", "busy", "lost", "failed", "forced"},
//!    // only with several --url (a quorum):
//!    "quorum": {"nodes": 3, "majority": 2, "holding": 2},
//!    "nodes": [{"url", "state": "held"|"held_by_another_token"|"free"|"wrong_type"|"error",
//!               "ttl_left_ms", "fence", "error"}]}]}
//! ```
//!
//! Numbers are integers; `*_ms` instants are milliseconds since the Unix epoch (server time).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Result;

use crate::Context;
use crate::cli::StatusArgs;
use crate::exit::Exit;
use crate::json::Json;
use crate::lease::fmt;
use crate::lock::{self, Inspection, Keys};
use crate::log;

pub fn status(ctx: &Context, args: StatusArgs) -> Result<Exit> {
    let keys = args
        .keys
        .iter()
        .map(|k| Keys::new(&ctx.prefix, k))
        .collect::<Result<Vec<_>>>()?;
    let mut nodes = ctx.nodes(ctx.timeout);
    nodes.connect()?;
    let keys = if args.all {
        let found = nodes.each(|c| lock::scan_locks(c, &ctx.prefix));
        let mut all = std::collections::BTreeMap::new();
        for keys in answered(&nodes, found)?.into_iter().flatten() {
            all.insert(keys.lock.clone(), keys);
        }
        all.into_values().collect()
    } else {
        keys
    };
    let mut per_node: Vec<Result<Vec<Inspection>>> =
        (0..nodes.len()).map(|_| Ok(Vec::new())).collect();
    for batch in keys.chunks(100) {
        for (node, result) in per_node
            .iter_mut()
            .zip(nodes.each(|c| lock::inspect(c, batch)))
        {
            match (node.as_mut(), result) {
                (Ok(all), Ok(mut some)) => all.append(&mut some),
                (Ok(_), Err(e)) => *node = Err(e),
                (Err(_), _) => {}
            }
        }
    }
    let names: Vec<String> = nodes.servers().map(|s| s.name().to_string()).collect();
    let majority = nodes.majority();
    let per_node = if nodes.is_quorum() {
        let per_node = answered_keep_errors(&nodes, per_node)?;
        for (server, result) in nodes.servers().zip(&per_node) {
            if let Err(e) = result {
                crate::log::warn("node_failed", &crate::nodes::node_error(server, e), &[]);
            }
        }
        per_node
    } else {
        vec![Ok(per_node.into_iter().next().expect("one node")?)]
    };
    let now_ms = now_ms();
    let views: Vec<View> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let answers: Vec<(&str, Result<&Inspection, String>)> = names
                .iter()
                .zip(&per_node)
                .map(|(name, r)| {
                    let answer = match r {
                        Ok(all) => Ok(&all[i]),
                        Err(e) => {
                            let text = crate::error::render(e);
                            let prefix = format!("{name}: ");
                            Err(text.strip_prefix(&prefix).unwrap_or(&text).to_string())
                        }
                    };
                    (name.as_str(), answer)
                })
                .collect();
            View::new(k, answers, majority, now_ms)
        })
        .collect();

    if args.json {
        let doc = Json::Obj(vec![
            ("now_ms", Json::Num(now_ms.into())),
            (
                "locks",
                Json::Arr(views.iter().map(|v| v.json(args.show_token)).collect()),
            ),
        ]);
        let _ = log::stdout(&format!("{}\n", doc.render()));
    } else if views.is_empty() {
        let _ = log::stdout(&format!("no locks under prefix {:?}\n", ctx.prefix));
    } else {
        for view in &views {
            if log::stdout(&view.text(args.show_token)).is_err() {
                break;
            }
        }
    }

    if views.iter().any(|v| v.state() == "unknown") {
        crate::log::error(
            "unavailable",
            "the quorum cannot tell whether a lock is held: too many nodes did not answer",
            &[],
        );
        return Ok(Exit::Unavailable);
    }
    if views.iter().any(|v| v.state() == "wrong_type") {
        crate::log::error(
            "wrong_type",
            "a key holds another type of value and is no lock; see the output above",
            &[],
        );
        return Ok(Exit::Config);
    }
    if args.all || views.iter().all(|v| v.state() == "held") {
        Ok(Exit::Success)
    } else {
        Ok(Exit::No)
    }
}

/// The answers of the nodes that answered, or the quorum error when fewer than a majority did.
fn answered<T>(nodes: &crate::nodes::Nodes, results: Vec<Result<T>>) -> Result<Vec<T>> {
    let kept = answered_keep_errors(nodes, results)?;
    Ok(kept.into_iter().filter_map(Result::ok).collect())
}

fn answered_keep_errors<T>(
    nodes: &crate::nodes::Nodes,
    results: Vec<Result<T>>,
) -> Result<Vec<Result<T>>> {
    let ok = results.iter().filter(|r| r.is_ok()).count();
    if ok >= nodes.majority() {
        return Ok(results);
    }
    if !nodes.is_quorum() {
        return Err(results.into_iter().find_map(Result::err).expect("an error"));
    }
    let errors = nodes.failures(&results);
    Err(crate::error::fail(
        Exit::Unavailable,
        format!(
            "no quorum: {} of {} nodes failed, the lock state is unknown: {}",
            errors.len(),
            nodes.len(),
            errors.join("; ")
        ),
    ))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

struct View<'a> {
    keys: &'a Keys,
    /// The inspection shown: the majority's, when one holds the lock.
    i: &'a Inspection,
    now_ms: i64,
    /// Each node's answer, in quorum mode.
    quorum: Option<Quorum<'a>>,
}

struct Quorum<'a> {
    answers: Vec<(&'a str, Result<&'a Inspection, String>)>,
    majority: usize,
    /// How many nodes hold the lock with the most common token.
    holding: usize,
    /// Held by some nodes; the silent ones could make it a majority.
    unknown: bool,
    /// The most common token, which each node's view is compared with.
    token: Option<String>,
}

/// An empty inspection, for a key no node could describe.
static UNKNOWN: std::sync::LazyLock<Inspection> = std::sync::LazyLock::new(|| Inspection {
    key_type: "none".into(),
    ..Inspection::default()
});

impl<'a> View<'a> {
    fn new(
        keys: &'a Keys,
        answers: Vec<(&'a str, Result<&'a Inspection, String>)>,
        majority: usize,
        now_ms: i64,
    ) -> View<'a> {
        if answers.len() == 1 {
            let i = answers[0].1.as_ref().ok().copied().unwrap_or(&UNKNOWN);
            return View {
                keys,
                i,
                now_ms,
                quorum: None,
            };
        }
        // The token most nodes hold decides; without a majority for one token, the lock is
        // free as far as the quorum is concerned.
        let ok: Vec<&Inspection> = answers
            .iter()
            .filter_map(|(_, a)| a.as_ref().ok().copied())
            .collect();
        let mut best: Option<(&Inspection, usize)> = None;
        for i in &ok {
            if let Some(token) = &i.token {
                let count = ok
                    .iter()
                    .filter(|j| j.token.as_ref() == Some(token))
                    .count();
                if best.is_none_or(|(_, c)| count > c) {
                    best = Some((i, count));
                }
            }
        }
        let (i, holding) = match best {
            Some((i, count)) if count >= majority => (i, count),
            Some((_, count)) => (
                ok.iter()
                    .copied()
                    .find(|i| i.token.is_none())
                    .unwrap_or(&UNKNOWN),
                count,
            ),
            None => (ok.first().copied().unwrap_or(&UNKNOWN), 0),
        };
        let wrong = ok
            .iter()
            .copied()
            .find(|i| i.key_type != "string" && i.key_type != "none");
        // Without a majority for one token, the nodes that did not answer decide: if they
        // could complete one, nobody can say whether the lock is held.
        let silent = answers.len() - ok.len();
        let unknown = holding < majority && holding + silent >= majority && holding > 0;
        let token = best.and_then(|(i, _)| i.token.clone());
        View {
            keys,
            i: wrong.unwrap_or(i),
            now_ms,
            quorum: Some(Quorum {
                answers,
                majority,
                holding,
                unknown,
                token,
            }),
        }
    }

    fn state(&self) -> &'static str {
        if self.quorum.as_ref().is_some_and(|q| q.unknown) {
            return "unknown";
        }
        match self.i.key_type.as_str() {
            "string" => "held",
            "none" => "free",
            _ => "wrong_type",
        }
    }

    fn holder(&self, name: &str) -> Option<&str> {
        // A holder record outliving its lock (the key was deleted by someone else) is stale.
        if self.state() != "held" {
            return None;
        }
        Inspection::field(&self.i.holder, name)
    }

    fn holder_num(&self, name: &str) -> Option<i64> {
        self.holder(name).and_then(|v| v.parse().ok())
    }

    fn last(&self, name: &str) -> Option<&str> {
        Inspection::field(&self.i.last, name)
    }

    fn last_num(&self, name: &str) -> Option<i64> {
        self.last(name).and_then(|v| v.parse().ok())
    }

    fn counter(&self, name: &str) -> i64 {
        Inspection::field(&self.i.stats, name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    fn ttl_left_ms(&self) -> Option<i64> {
        (self.state() == "held" && self.i.pttl_ms >= 0).then_some(self.i.pttl_ms)
    }

    fn json(&self, show_token: bool) -> Json {
        let mut fields = vec![
            ("key", Json::str(&self.keys.name)),
            ("redis_key", Json::str(&self.keys.lock)),
            ("state", Json::str(self.state())),
            ("type", Json::str(&self.i.key_type)),
            ("ttl_left_ms", Json::opt_num(self.ttl_left_ms())),
            ("fence", Json::opt_num(self.i.fence)),
        ];
        if show_token && self.state() == "held" {
            fields.push(("token", Json::opt_str(self.i.token.as_deref())));
        }
        let holder = if self.holder("host").is_some() {
            let started = self.holder_num("started");
            let renewed = self.holder_num("renewed");
            Json::Obj(vec![
                ("host", Json::opt_str(self.holder("host"))),
                ("pid", Json::opt_num(self.holder_num("pid"))),
                ("user", Json::opt_str(self.holder("user"))),
                ("command", Json::opt_str(self.holder("cmd"))),
                ("started_ms", Json::opt_num(started)),
                ("renewed_ms", Json::opt_num(renewed)),
                ("ttl_ms", Json::opt_num(self.holder_num("ttl"))),
                ("fence", Json::opt_num(self.holder_num("fence"))),
                ("finished", Json::Bool(self.holder("finished") == Some("1"))),
                ("age_ms", Json::opt_num(started.map(|s| self.now_ms - s))),
                (
                    "since_renewal_ms",
                    Json::opt_num(renewed.map(|r| self.now_ms - r)),
                ),
            ])
        } else {
            Json::Null
        };
        fields.push(("holder", holder));
        let last = if self.last("outcome").is_some() {
            Json::Obj(vec![
                ("outcome", Json::opt_str(self.last("outcome"))),
                ("exit", Json::opt_num(self.last_num("exit"))),
                ("host", Json::opt_str(self.last("host"))),
                ("pid", Json::opt_num(self.last_num("pid"))),
                ("user", Json::opt_str(self.last("user"))),
                ("command", Json::opt_str(self.last("cmd"))),
                ("started_ms", Json::opt_num(self.last_num("started"))),
                ("ended_ms", Json::opt_num(self.last_num("ended"))),
                ("duration_ms", Json::opt_num(self.last_num("duration_ms"))),
                ("fence", Json::opt_num(self.last_num("fence"))),
            ])
        } else {
            Json::Null
        };
        fields.push(("last_run", last));
        if let Some(q) = &self.quorum {
            fields.push((
                "quorum",
                Json::Obj(vec![
                    ("nodes", Json::Num(q.answers.len() as i128)),
                    ("majority", Json::Num(q.majority as i128)),
                    ("holding", Json::Num(q.holding as i128)),
                ]),
            ));
            fields.push((
                "nodes",
                Json::Arr(
                    q.answers
                        .iter()
                        .map(|(url, answer)| match answer {
                            Ok(i) => Json::Obj(vec![
                                ("url", Json::str(*url)),
                                ("state", Json::str(node_state(i, q.token.as_deref()))),
                                (
                                    "ttl_left_ms",
                                    Json::opt_num((i.pttl_ms >= 0).then_some(i.pttl_ms)),
                                ),
                                ("fence", Json::opt_num(i.fence)),
                                ("error", Json::Null),
                            ]),
                            Err(e) => Json::Obj(vec![
                                ("url", Json::str(*url)),
                                ("state", Json::str("error")),
                                ("ttl_left_ms", Json::Null),
                                ("fence", Json::Null),
                                ("error", Json::str(e)),
                            ]),
                        })
                        .collect(),
                ),
            ));
        }
        fields.push((
            "counters",
            Json::Obj(
                ["runs", "busy", "lost", "failed", "forced"]
                    .into_iter()
                    .map(|c| (c, Json::Num(self.counter(c).into())))
                    .collect(),
            ),
        ));
        Json::Obj(fields)
    }

    fn text(&self, show_token: bool) -> String {
        let mut out = String::new();
        let key = &self.keys.lock;
        match self.state() {
            "wrong_type" => {
                out.push_str(&format!(
                    "{key}: NOT A LOCK: the key holds a {}; redlock cannot use it until it is \
                     deleted or another key is chosen\n",
                    self.i.key_type
                ));
                return out;
            }
            "free" => out.push_str(&format!("{key}: free\n")),
            "unknown" => out.push_str(&format!(
                "{key}: UNKNOWN: held on fewer nodes than a majority, and the nodes that did not \
                 answer could complete one\n"
            )),
            _ => match self.holder("host") {
                Some(host) => {
                    let mut who = format!("{key}: held by {host}");
                    let details: Vec<String> = [
                        self.holder("pid").map(|p| format!("pid {p}")),
                        self.holder("user").map(|u| format!("user {u}")),
                    ]
                    .into_iter()
                    .flatten()
                    .collect();
                    if !details.is_empty() {
                        who.push_str(&format!(" ({})", details.join(", ")));
                    }
                    if let Some(f) = self.holder("fence") {
                        who.push_str(&format!(", fence {f}"));
                    }
                    out.push_str(&who);
                    out.push('\n');
                    if let Some(cmd) = self.holder("cmd") {
                        out.push_str(&format!("  command   {cmd}\n"));
                    }
                    if let Some(started) = self.holder_num("started") {
                        out.push_str(&format!(
                            "  since     {} ({} ago)\n",
                            instant(started),
                            self.age(started)
                        ));
                    }
                    out.push_str(&format!("  lease     {}\n", self.liveness()));
                }
                None => out.push_str(&format!(
                    "{key}: held by a client that left no holder record (not redlock?); {}\n",
                    self.expiry()
                )),
            },
        }
        if let Some(q) = &self.quorum {
            out.push_str(&format!(
                "  quorum    {} of {} nodes hold it (majority {})\n",
                q.holding,
                q.answers.len(),
                q.majority
            ));
            for (url, answer) in &q.answers {
                let line = match answer {
                    Ok(i) => {
                        let mut line = node_state(i, q.token.as_deref()).replace('_', " ");
                        if i.pttl_ms >= 0 {
                            line.push_str(&format!(
                                ", expires in {}",
                                fmt(Duration::from_millis(i.pttl_ms as u64))
                            ));
                        }
                        if let Some(f) = i.fence {
                            line.push_str(&format!(", fence counter {f}"));
                        }
                        line
                    }
                    Err(e) => format!("ERROR: {e}"),
                };
                out.push_str(&format!("  node      {url}: {line}\n"));
            }
        }
        if show_token && let Some(token) = &self.i.token {
            out.push_str(&format!("  token     {token}\n"));
        }
        if let Some(outcome) = self.last("outcome") {
            let mut line = format!("  last run  {outcome}");
            if let Some(exit) = self.last("exit") {
                line.push_str(&format!(" (exit {exit})"));
            }
            if let Some(host) = self.last("host") {
                line.push_str(&format!(" on {host}"));
            }
            if let Some(started) = self.last_num("started") {
                line.push_str(&format!(", started {}", instant(started)));
            }
            if let Some(ms) = self.last_num("duration_ms") {
                line.push_str(&format!(
                    ", took {}",
                    fmt(Duration::from_millis(ms.max(0) as u64))
                ));
            }
            out.push_str(&line);
            out.push('\n');
        }
        if let Some(fence) = self.i.fence {
            out.push_str(&format!("  fence     {fence} (last issued)\n"));
        }
        out.push_str(&format!(
            "  counters  runs {}, busy {}, lease lost {}, failed {}, forced releases {}\n",
            self.counter("runs"),
            self.counter("busy"),
            self.counter("lost"),
            self.counter("failed"),
            self.counter("forced")
        ));
        out
    }

    fn age(&self, since_ms: i64) -> String {
        fmt(Duration::from_millis(
            ((self.now_ms - since_ms).max(0) / 1000 * 1000) as u64,
        ))
    }

    fn expiry(&self) -> String {
        match self.ttl_left_ms() {
            Some(ms) => format!("expires in {}", fmt(Duration::from_millis(ms as u64))),
            None => "no expiry: it will never free itself".to_string(),
        }
    }

    /// Whether the holder is alive, as far as its renewals tell.
    fn liveness(&self) -> String {
        let expiry = self.expiry();
        if self.holder("finished") == Some("1") {
            return format!("command finished; kept until expiry by --hold-at-least, {expiry}");
        }
        let (Some(renewed), Some(ttl)) = (self.holder_num("renewed"), self.holder_num("ttl"))
        else {
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

/// One node's view of a lock, next to the most common token.
fn node_state(i: &Inspection, token: Option<&str>) -> &'static str {
    match i.key_type.as_str() {
        "none" => "free",
        "string" if token.is_some() && i.token.as_deref() == token => "held",
        "string" => "held_by_another_token",
        _ => "wrong_type",
    }
}

/// Milliseconds since the epoch as RFC 3339, to the second.
pub fn instant(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}
