//! `redlock status`: who holds a lock, since when, whether the holder is alive, how the last run
//! ended, and how often runs were refused or lost their lease.
//!
//! Read-only by construction: one pipeline of TYPE/MGET/PTTL/HGETALL per batch of keys (and SCAN
//! for `--all`), so a user with `+@read` can run it. Ages are computed against this host's clock,
//! while the recorded instants are the server's (`redlock doctor` reports the offset).
//!
//! Exit status: 0 when every named key is held, 1 when one is free, 78 when a key holds another
//! type (it is no lock, and nothing redlock does will change that), 69 when Redis cannot be
//! asked. `--all` exits 0 unless it could not ask or a lock could not be read. A lock whose
//! keys could not be read (an ACL that denies a read, a companion key of another type, a
//! record of another layout) is shown as UNKNOWN, never as free or with zero counters, and the
//! status is that error's: 77 for a denial, 78 for a key of another type, 69 otherwise, with
//! one line on stderr naming the key and the error (with `--all`: the first such lock, after
//! the listing).
//!
//! `--all` is streamed, so that listing 100,000 locks takes time in proportion to its output
//! and memory that does not grow with it: SCAN finds the locks a page at a time; every
//! [`BATCH`] locks found are read (one pipeline per 100 locks, on every node), printed and
//! forgotten. What stays is 8 bytes per lock, to list each one once (`keys::Seen`). Within a
//! batch the locks are sorted by key — under 1,000 locks that is the whole listing, in key
//! order — and the batches come in SCAN's order: a listing of more locks is not sorted as a
//! whole (`jq '.locks | sort_by(.key)'` or `sort` sorts it). `--json` is written as it goes:
//! when Redis stops answering midway, the document is left unfinished, with the exit status
//! the failure decides (69 unless said otherwise). When stdout goes away (`status | head`), the
//! listing stops there and the exit status is that of the locks read.
//!
//! What is printed for each lock, as text or as the `--json` document, is in `view`.

mod view;

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Result;

use self::view::{Replicated, View};
use crate::Context;
use crate::cli::StatusArgs;
use crate::lock::inspect::{self, Inspection, Reading};
use crate::lock::keys::{BATCH, Keys};
use crate::lock::nodes::{Nodes, Tally};
use crate::lock::record::LockState;
use crate::report::exit::Exit;
use crate::report::json::Json;
use crate::report::log;

/// A node's (or a lock's) answer that did not come: the line that says why, and its status.
#[derive(Clone)]
struct Failed {
    text: String,
    exit: Exit,
}

pub fn status(ctx: &Context, args: StatusArgs) -> Result<Exit> {
    let named = ctx.keys(&args.keys)?;
    let mut nodes = ctx.nodes(ctx.timeout);
    nodes.connect()?;
    let mut shown = Shown::new(&args, nodes.len());
    if args.all {
        nodes.each_batch_of_locks(
            &ctx.prefix,
            &[crate::lock::scripts::FENCE, crate::lock::scripts::PAUSED],
            |nodes, batch| shown.batch(nodes, &batch),
        )?;
    } else {
        for batch in named.chunks(BATCH) {
            if !shown.batch(&mut nodes, batch)? {
                break;
            }
        }
    }
    let replication = Replicated::read(&mut nodes);
    Ok(shown.finish(&ctx.prefix, &replication))
}

/// A listing under way: what it has printed, and what it has seen that decides its exit
/// status. It holds one batch of locks at a time (see the module doc).
struct Shown {
    json: bool,
    show_token: bool,
    all: bool,
    /// This host's clock when the listing started: the document's `now_ms`, and what ages
    /// are taken against.
    now_ms: i64,
    /// Locks printed so far.
    count: usize,
    /// False once stdout is gone (`status | head`): nothing more is read.
    printing: bool,
    /// The quorum's nodes already warned about (once each, not once per batch).
    warned: Vec<bool>,
    /// The first lock that could not be read.
    unreadable: Option<Failed>,
    unknown: bool,
    wrong_type: bool,
    all_held: bool,
}

impl Shown {
    fn new(args: &StatusArgs, nodes: usize) -> Shown {
        Shown {
            json: args.json,
            show_token: args.show_token,
            all: args.all,
            now_ms: now_ms(),
            count: 0,
            printing: true,
            warned: vec![false; nodes],
            unreadable: None,
            unknown: false,
            wrong_type: false,
            all_held: true,
        }
    }

    /// Reads `keys` on every node and prints them; false when stdout is gone.
    fn batch(&mut self, nodes: &mut Nodes, keys: &[Keys]) -> Result<bool> {
        let per_node = inspect_on_each(nodes, keys);
        let names: Vec<String> = nodes.servers().map(|s| s.name().to_string()).collect();
        let majority = nodes.majority();
        let per_node = if nodes.is_quorum() {
            let per_node = nodes.answered(per_node)?;
            for ((server, result), warned) in nodes.servers().zip(&per_node).zip(&mut self.warned) {
                if let Err(e) = result
                    && !*warned
                {
                    *warned = true;
                    log::warn(
                        "node_failed",
                        &crate::lock::nodes::node_error(server, e),
                        &[],
                    );
                }
            }
            per_node
        } else {
            vec![Ok(per_node.into_iter().next().expect("one node")?)]
        };
        let nothing = Inspection::nothing();
        type Answers<'a> = Vec<(&'a str, Result<&'a Inspection, Failed>)>;
        let answers: Vec<Answers> = (0..keys.len())
            .map(|i| {
                names
                    .iter()
                    .zip(&per_node)
                    .map(|(name, r)| {
                        let answer = match r {
                            Ok(all) => all[i].as_ref().map_err(|u| Failed {
                                text: u.why(),
                                exit: u.exit(),
                            }),
                            Err(e) => {
                                let text = crate::report::error::render(e);
                                let prefix = format!("{name}: ");
                                Err(Failed {
                                    text: text.strip_prefix(&prefix).unwrap_or(&text).to_string(),
                                    exit: crate::report::error::classify(e),
                                })
                            }
                        };
                        (name.as_str(), answer)
                    })
                    .collect()
            })
            .collect();
        let mut out = String::new();
        if self.json && self.count == 0 {
            out.push_str(&self.json_head());
        }
        for (k, answers) in keys.iter().zip(&answers) {
            let view = View::new(k, answers, majority, self.now_ms, &nothing);
            if self.json {
                if self.count > 0 {
                    out.push(',');
                }
                out.push_str(&view.facts(self.show_token).json().render());
            } else {
                out.push_str(&view.facts(self.show_token).text());
            }
            self.count += 1;
            if self.unreadable.is_none() {
                self.unreadable = view.unreadable.cloned();
            }
            match view.state() {
                LockState::Unknown => self.unknown = true,
                LockState::WrongType => self.wrong_type = true,
                _ => {}
            }
            self.all_held &= view.state() == LockState::Held;
        }
        self.printing = log::stdout(&out).is_ok();
        Ok(self.printing)
    }

    /// `{"now_ms": …, "locks": [`: the document's start, before its first lock.
    fn json_head(&self) -> String {
        let head = Json::Obj(vec![
            ("now_ms", Json::Num(self.now_ms.into())),
            ("locks", Json::Arr(Vec::new())),
        ])
        .render();
        head.strip_suffix("]}")
            .expect("an object ending with an array")
            .to_string()
    }

    /// Ends the output with what the servers say of their replicas, and says the exit status.
    fn finish(self, prefix: &str, replication: &Replicated) -> Exit {
        if self.printing {
            let tail = format!(",\"replication\":{}}}\n", replication.json().render());
            let end = match (self.json, self.count) {
                (true, 0) => format!("{}]{tail}", self.json_head()),
                (true, _) => format!("]{tail}"),
                (false, 0) => format!("no locks under prefix {prefix:?}\n{}", replication.text()),
                (false, _) => replication.text(),
            };
            let _ = log::stdout(&end);
        }
        if let Some(failed) = self.unreadable {
            return log::ending("unreadable", &failed.text, &[], failed.exit);
        }
        if self.unknown {
            return log::ending(
                "unavailable",
                "the quorum cannot tell whether a lock is held: too many nodes did not answer",
                &[],
                Exit::Unavailable,
            );
        }
        if self.wrong_type {
            return log::ending(
                "wrong_type",
                "a key holds another type of value and is no lock; see the output above",
                &[],
                Exit::Config,
            );
        }
        if self.all || self.all_held {
            Exit::Success
        } else {
            Exit::No
        }
    }
}

/// Every node's readings of `keys`, one pipeline per batch of 100 keys.
pub fn inspect_on_each(nodes: &mut Nodes, keys: &[Keys]) -> Vec<Result<Vec<Reading>>> {
    let now_ms = now_ms();
    let mut per_node: Vec<Result<Vec<Reading>>> =
        (0..nodes.len()).map(|_| Ok(Vec::new())).collect();
    for batch in keys.chunks(100) {
        for (node, result) in per_node
            .iter_mut()
            .zip(nodes.each(|c| inspect::inspect(c, batch, now_ms)))
        {
            match (node.as_mut(), result) {
                (Ok(all), Ok(mut some)) => all.append(&mut some),
                (Ok(_), Err(e)) => *node = Err(e),
                (Err(_), _) => {}
            }
        }
    }
    per_node
}

/// One reading per key, for the commands that read a lock without showing each node
/// (`metrics`, `check`, `pause --drain`): the server's, or in a quorum the view `status`
/// shows (the majority's). An error when the server could not be asked, or a quorum cannot
/// tell whether a lock is held; a lock is unreadable when its server could not read it (in a
/// quorum: when fewer than a majority of the nodes could).
pub fn inspect_each(nodes: &mut Nodes, keys: &[Keys]) -> Result<Vec<Reading>> {
    let per_node = inspect_on_each(nodes, keys);
    if !nodes.is_quorum() {
        return per_node.into_iter().next().expect("one node");
    }
    let per_node = nodes.answered(per_node)?;
    let nothing = Inspection::nothing();
    let majority = nodes.majority();
    let mut out = Vec::with_capacity(keys.len());
    for (i, k) in keys.iter().enumerate() {
        let read: Vec<&Reading> = per_node
            .iter()
            .filter_map(|r| r.as_ref().ok().map(|all| &all[i]))
            .collect();
        let ok: Vec<Option<&Inspection>> = per_node
            .iter()
            .map(|r| r.as_ref().ok().and_then(|all| all[i].as_ref().ok()))
            .collect();
        if ok.iter().flatten().count() < majority
            && let Some(Err(unreadable)) = read.into_iter().find(|r| r.is_err())
        {
            out.push(Err(unreadable.clone()));
            continue;
        }
        let tally = Tally::count(&ok, majority, &nothing);
        if tally.unknown {
            return Err(crate::report::error::fail(
                Exit::Unavailable,
                format!(
                    "the quorum cannot tell whether {} is held: too many nodes did not answer",
                    k.lock
                ),
            ));
        }
        out.push(Ok(tally.shown.clone()));
    }
    Ok(out)
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
