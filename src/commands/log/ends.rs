//! Which entry ends each take of a lock's log, as `redlock log` shows it: every `acquired` is
//! shown with exactly one end after it.
//!
//! The scripts write an end on every path where a token gives the lock back (`released`,
//! `lost`, `forced`). A lease that simply lapses (its holder's host died, its redlock was
//! killed with its keeper, a waiter never confirmed its provisional grant) ends while no script
//! runs, so nothing is written then; writing it later would cost a command on the paths every
//! run takes. The reader ends such a take instead, with an `expired` entry marked inferred,
//! where the lapse first shows. Taken in the list's order (the order the scripts wrote it):
//!
//! - A take ends at the first of: an end entry that names it (its fence, or its host and pid
//!   at the run's start: [`super::take_of`]'s rule); a later take that could not have been
//!   made while it held the lock (see [`excludes`]), with an inferred `expired` just before
//!   that take; or, while neither has come, a read of the lock's holders, made after the take
//!   was written, in which no holder has its fence: an inferred `expired` at that read.
//! - An end that names a take already ended (the run's own `lost`, written at its release,
//!   after a `forced` removed it or after its lease lapsed) is shown as `noticed`: the run
//!   found its lock gone, which is not a second end.

use super::entry::{Entry, TAKE_SKEW_MS};
use crate::lock::inspect::Inspection;

/// How many takes that ended without their run's release (forced, or lapsed) are kept per log,
/// to show that release as `noticed` when it comes: a run that comes back after its lease
/// lapsed releases within its lease's lifetime or so, long before many other takes ended.
const ENDED_EARLY: usize = 4;

/// A take not ended yet.
#[derive(Debug, Clone)]
struct Open {
    take: Entry,
    /// Whether it was written before the lock's holders were read: only then does a fence
    /// missing from that read say that its lease lapsed.
    before_read: bool,
}

/// The takes of one lock's log that have no end yet, and those that ended before their run's
/// release (forced or lapsed), as the entries go by.
#[derive(Debug, Clone, Default)]
pub struct Ends {
    open: Vec<Open>,
    early: Vec<Entry>,
}

impl Ends {
    /// Takes the next entries of the lock's list, in the list's order, and returns them with
    /// the inferred ends put in and the late ends shown as `noticed`. `before_read`: how many
    /// of `entries` were written before the lock's holders were read (0 when they were not).
    pub fn through(&mut self, entries: Vec<Entry>, before_read: usize) -> Vec<Entry> {
        let mut out = Vec::with_capacity(entries.len());
        for (i, mut entry) in entries.into_iter().enumerate() {
            match entry.get("event") {
                Some("acquired") => {
                    let (lapsed, open): (Vec<Open>, Vec<Open>) = std::mem::take(&mut self.open)
                        .into_iter()
                        .partition(|o| excludes(&entry, &o.take));
                    self.open = open;
                    for o in lapsed {
                        out.push(expired(&o.take, entry.ms, entry.seq));
                        self.ended_early(o.take);
                    }
                    self.open.push(Open {
                        take: entry.clone(),
                        before_read: i < before_read,
                    });
                }
                Some(event @ ("released" | "lost" | "forced")) => {
                    let forced = event == "forced";
                    self.end(&mut entry, forced);
                }
                _ => {}
            }
            out.push(entry);
        }
        out
    }

    /// Every take known before this read (all of them were: the caller read the holders before
    /// the entries it gives [`Ends::through`] next).
    pub fn before_read(&mut self) {
        for o in &mut self.open {
            o.before_read = true;
        }
    }

    /// The inferred ends of the takes written before `holders` was read whose fence holds
    /// nothing in it, stamped `now_ms` (this host's clock; never before the take).
    pub fn lapsed(&mut self, holders: &Inspection, now_ms: i64) -> Vec<Entry> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.open.len() {
            let o = &self.open[i];
            let gone = o.before_read
                && o.take
                    .get("fence")
                    .and_then(|f| f.parse().ok())
                    .and_then(|f| holders.held_with_fence(f))
                    == Some(false);
            if gone {
                let o = self.open.remove(i);
                out.push(expired(&o.take, now_ms.max(o.take.ms), 0));
                self.ended_early(o.take);
            } else {
                i += 1;
            }
        }
        out
    }

    /// Whether a take has no end yet.
    pub fn any_open(&self) -> bool {
        !self.open.is_empty()
    }

    /// An end entry: it ends the open take it names, or, naming a take that ended before its
    /// run's release, it is shown as `noticed`.
    fn end(&mut self, entry: &mut Entry, forced: bool) {
        let by_fence =
            |t: &Entry| entry.get("fence").is_some() && t.get("fence") == entry.get("fence");
        let open = self.open.iter().rposition(|o| by_fence(&o.take));
        let early = || self.early.iter().rposition(by_fence);
        let (open, early) = match open {
            Some(at) => (Some(at), None),
            None => match early() {
                Some(at) => (None, Some(at)),
                None => (
                    self.open.iter().rposition(|o| by_who(entry, &o.take)),
                    self.early.iter().rposition(|t| by_who(entry, t)),
                ),
            },
        };
        if let Some(at) = open {
            let o = self.open.remove(at);
            if forced {
                self.ended_early(o.take);
            }
        } else if early.is_some() && !forced {
            let logged = entry.get("event").unwrap_or("").to_string();
            if let Some((_, event)) = entry.fields.iter_mut().find(|(k, _)| k == "event") {
                *event = "noticed".to_string();
            }
            entry.fields.push(("logged_as".to_string(), logged));
        }
    }

    fn ended_early(&mut self, take: Entry) {
        if self.early.len() == ENDED_EARLY {
            self.early.remove(0);
        }
        self.early.push(take);
    }
}

/// Whether `end` names `take` by its host and pid, the take made when the run started (see
/// [`super::take_of`]).
fn by_who(end: &Entry, take: &Entry) -> bool {
    let (Some(host), Some(pid)) = (end.get("host"), end.get("pid")) else {
        return false;
    };
    let Some(duration) = end.get("duration_ms").and_then(|d| d.parse::<i64>().ok()) else {
        return false;
    };
    take.get("host") == Some(host)
        && take.get("pid") == Some(pid)
        && take.ms >= end.ms - duration - TAKE_SKEW_MS
}

/// Whether take `later` could not have been made while take `earlier` held the lock: one of
/// them is exclusive, their shapes differ (shared, or N slots), or they are in the same slot.
/// The scripts refuse every such take while the other holds, so `earlier` had lapsed by then.
pub fn excludes(later: &Entry, earlier: &Entry) -> bool {
    match (later.get("shape"), earlier.get("shape")) {
        (Some(a), Some(b)) if a == b => a != "shared" && later.get("slot") == earlier.get("slot"),
        _ => true,
    }
}

/// The inferred end of `take`, at `ms` (sorted with `seq` there). Its id names the take's
/// fence (`expired-FENCE`), so it stays the same from one read to the next while its time may
/// not (see the module doc).
fn expired(take: &Entry, ms: i64, seq: i64) -> Entry {
    let mut fields = vec![("event".to_string(), "expired".to_string())];
    fields.extend(take.fields.iter().filter(|(k, _)| k != "event").cloned());
    fields.push(("inferred".to_string(), "true".to_string()));
    Entry {
        lock: take.lock.clone(),
        ms,
        seq,
        fields,
        raw: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(ms: i64, raw: &str) -> Entry {
        let mut parts = raw.split(' ');
        let mut fields = vec![("event".to_string(), parts.next().unwrap().to_string())];
        fields.extend(parts.map(|p| {
            let (k, v) = p.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        }));
        Entry {
            lock: "job".into(),
            ms,
            seq: 0,
            fields,
            raw: Some(raw.to_string()),
        }
    }

    fn events(entries: &[Entry]) -> Vec<String> {
        entries
            .iter()
            .map(|e| {
                format!(
                    "{} {}",
                    e.get("event").unwrap(),
                    e.get("fence").unwrap_or("-")
                )
            })
            .collect()
    }

    #[test]
    fn a_take_another_take_excludes_ends_just_before_it() {
        let mut ends = Ends::default();
        let out = ends.through(
            vec![
                entry(1000, "acquired fence=1 host=a pid=1"),
                entry(1500, "busy host=b pid=2"),
                entry(3000, "acquired fence=2 host=b pid=2"),
                entry(
                    3100,
                    "released outcome=ok fence=2 host=b pid=2 duration_ms=100",
                ),
            ],
            0,
        );
        assert_eq!(
            events(&out),
            [
                "acquired 1",
                "busy -",
                "expired 1",
                "acquired 2",
                "released 2"
            ]
        );
        assert_eq!(out[2].ms, 3000);
        assert_eq!(out[2].get("inferred"), Some("true"));
        assert_eq!(out[2].get("host"), Some("a"));
        assert!(!ends.any_open());
    }

    #[test]
    fn shared_takes_and_other_slots_do_not_end_one_another() {
        let shared = entry(1000, "acquired fence=1 shape=shared");
        let slot0 = entry(1000, "acquired fence=2 shape=3 slot=0");
        let slot1 = entry(1000, "acquired fence=3 shape=3 slot=1");
        let exclusive = entry(1000, "acquired fence=4");
        assert!(!excludes(&shared, &shared));
        assert!(!excludes(&slot1, &slot0));
        assert!(excludes(&slot0, &slot0));
        assert!(excludes(&slot0, &shared) && excludes(&shared, &slot0));
        assert!(excludes(&exclusive, &shared) && excludes(&shared, &exclusive));
        assert!(excludes(&exclusive, &exclusive));
    }

    #[test]
    fn a_take_whose_fence_holds_nothing_at_a_later_read_lapsed() {
        let mut ends = Ends::default();
        // The second take was written after the holders were read: not judged.
        ends.through(
            vec![
                entry(1000, "acquired fence=1 shape=shared"),
                entry(2000, "acquired fence=2 shape=shared"),
            ],
            1,
        );
        let free = Inspection::nothing();
        let lapsed = ends.lapsed(&free, 900);
        assert_eq!(events(&lapsed), ["expired 1"]);
        assert_eq!(lapsed[0].ms, 1000, "never before its take");
        assert!(ends.any_open());
        ends.before_read();
        assert_eq!(events(&ends.lapsed(&free, 5000)), ["expired 2"]);
        assert!(!ends.any_open());
    }

    #[test]
    fn a_release_after_a_forced_one_or_a_lapse_is_noticed_not_an_end() {
        let mut ends = Ends::default();
        let out = ends.through(
            vec![
                entry(1000, "acquired fence=1 host=a pid=1"),
                entry(1100, "forced host=a pid=1 fence=1 by=ops"),
                entry(
                    1200,
                    "lost outcome=lease\u{a0}lost fence=1 host=a pid=1 duration_ms=200",
                ),
                entry(2000, "acquired fence=2 host=b pid=2"),
                entry(9000, "acquired fence=3 host=c pid=3"),
                entry(
                    9500,
                    "lost outcome=lease\u{a0}lost fence=2 host=b pid=2 duration_ms=7500",
                ),
                entry(
                    9600,
                    "released outcome=ok fence=3 host=c pid=3 duration_ms=600",
                ),
            ],
            0,
        );
        assert_eq!(
            events(&out),
            [
                "acquired 1",
                "forced 1",
                "noticed 1",
                "acquired 2",
                "expired 2",
                "acquired 3",
                "noticed 2",
                "released 3"
            ]
        );
        assert_eq!(out[2].get("logged_as"), Some("lost"));
        assert!(!ends.any_open());
    }

    #[test]
    fn a_quorum_nodes_end_names_its_take_by_host_and_pid() {
        let mut ends = Ends::default();
        let out = ends.through(
            vec![
                entry(1000, "acquired fence=5 host=a pid=1"),
                entry(
                    1100,
                    "released outcome=ok fence=9 host=a pid=1 duration_ms=100",
                ),
            ],
            2,
        );
        assert_eq!(events(&out), ["acquired 5", "released 9"]);
        assert!(!ends.any_open());
    }
}
