//! `redlock log KEY... --timeline`: a key's recent runs drawn in the terminal, for incidents —
//! who held the lock when, on which host, who was refused, who waited, and how each hold
//! ended — where the plain log answers the same line by line.
//!
//! One chart per key, from the same reading as `log` (its list with every take's end, inferred
//! lapses included), plus one reading of the lock's state (`inspect.rs`) for what the log
//! cannot tell: the runs waiting now. A wait that ended in a take is in that take's entry
//! (`waited_ms`); one that ran out is its refusal. Time runs left to right from the
//! first entry to the last, or to now while something is still held, waited for or paused;
//! with `--since D`, from D ago to now, and a hold or pause that began before and lasted into
//! that window is drawn from its left edge (the whole list is read for it: it holds at most
//! about a thousand entries). A row per host (a second row for a host when its spans
//! overlap); pauses get a row of their own. The width is `--width`, else `$COLUMNS` (a
//! positive number; anything else is as if it were unset), else the terminal's, else 80, and
//! never below [`MIN_WIDTH`]. Plain ASCII when stdout is not a terminal; a terminal gets block
//! glyphs for the spans (the marks are letters either way). Where two marks fall in one
//! column, the one that says more wins ([`rank`]) and the other moves to a free neighbour
//! when there is one.

use std::collections::BTreeMap;

use anyhow::{Context as _, Result};

use super::Log;
use super::entry::{Entry, time_text};
use super::read::read_logs;
use crate::Context;
use crate::cli::LogArgs;
use crate::lock::inspect::Inspection;
use crate::report::exit::Exit;
use crate::report::log;
use crate::report::text::shown;

/// The narrowest chart: a host's name and a few columns of time.
pub const MIN_WIDTH: u16 = 40;

pub fn timeline(ctx: &Context, args: &LogArgs) -> Result<Exit> {
    if args.keys.iter().any(String::is_empty) {
        return Err(crate::report::error::usage(
            "KEY is empty: name the lock whose log to draw",
        ));
    }
    let named = ctx.keys(&args.keys)?;
    let mut nodes = ctx.nodes(ctx.timeout);
    nodes.connect()?;
    let logs: Vec<Log> = named.iter().map(Log::of).collect();
    let now = crate::commands::status::now_ms();
    let from_ms = args.since.map(|d| (now - d.as_millis() as i64).max(0));
    // The first node that answers: a quorum's nodes keep their own logs.
    let mut first_error = None;
    let mut read = None;
    for i in 0..nodes.len() {
        // Every entry: a hold taken before `--since` may last into its window.
        // A lock that cannot be read ends the timeline with its error, as it ends `log KEY`.
        let every = |con: &mut _| {
            read_logs(con, &logs)?
                .into_iter()
                .collect::<Result<Vec<_>>>()
        };
        match nodes.on(i, every) {
            Ok(r) => {
                read = Some(r);
                break;
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    let Some(read) = read else {
        return Err(first_error.expect("at least one node"));
    };
    // The runs waiting now; a lock whose state cannot be read is drawn without them.
    let states = crate::commands::status::inspect_each(&mut nodes, &named)?;
    let style = Style::for_stdout(args.width);
    let mut out = String::new();
    for ((log, read), state) in logs.iter().zip(read).zip(states) {
        let mut entries: Vec<Entry> = read.list;
        entries.sort_by_key(|e| (e.ms, e.seq));
        if !out.is_empty() {
            out.push('\n');
        }
        let mut chart = Chart::of(&entries, state.ok().as_ref(), now);
        if let Some(from) = from_ms {
            chart.window(from, now);
        }
        out.push_str(&chart.draw(&log.lock, &style));
    }
    log::stdout(&out).context("cannot print the timeline")?;
    Ok(Exit::Success)
}

/// How the chart is drawn: its width, and the glyphs of spans.
pub struct Style {
    pub width: usize,
    /// Block glyphs for the spans (a terminal), or ASCII.
    pub blocks: bool,
}

impl Style {
    /// `--width`, else `$COLUMNS`, else the terminal's width, else 80; blocks on a terminal.
    fn for_stdout(width: Option<u16>) -> Style {
        // SAFETY: isatty only inspects the descriptor.
        let tty = unsafe { libc::isatty(libc::STDOUT_FILENO) } == 1;
        // A positive number; anything else (empty, 0, negative, not a number) is unset.
        let columns = std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.trim().parse::<u16>().ok())
            .filter(|c| *c > 0);
        let width = width
            .or(columns)
            .or_else(|| tty.then(terminal_width).flatten())
            .unwrap_or(80)
            .max(MIN_WIDTH);
        Style {
            width: width.into(),
            blocks: tty,
        }
    }

    fn fill(&self, kind: Fill) -> char {
        match (kind, self.blocks) {
            (Fill::Held, false) => '=',
            (Fill::Held, true) => '█',
            (Fill::Waiting, false) => '.',
            (Fill::Waiting, true) => '░',
            (Fill::Paused, false) => '#',
            (Fill::Paused, true) => '▒',
        }
    }
}

/// The terminal's columns (TIOCGWINSZ on stdout).
fn terminal_width() -> Option<u16> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into the struct passed, which lives for the call.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (rc == 0 && size.ws_col > 0).then_some(size.ws_col)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fill {
    Held,
    Waiting,
    Paused,
}

/// Something that lasted, on a host's row: a hold from its take to its end (`end`: the mark
/// of how it ended; `None` while it lasts), a wait, a pause.
#[derive(Debug)]
struct Span {
    row: String,
    from: i64,
    to: i64,
    fill: Fill,
    end: Option<char>,
    /// It began before the chart's window (`--since`): drawn from the left edge, without `[`.
    clipped: bool,
}

/// Something that happened at an instant on a host's row: a refusal, a skipped run.
#[derive(Debug)]
struct Mark {
    row: String,
    at: i64,
    mark: char,
}

/// The row pauses are drawn on.
const PAUSES: &str = "(paused)";

/// What each mark means, in the order the legend lists them.
const LEGEND: [(char, &str); 13] = [
    ('[', "took the lock"),
    (']', "released"),
    ('X', "failed"),
    ('T', "stopped by --max-runtime"),
    ('R', "replaced"),
    ('L', "lost its lease"),
    ('F', "forced release"),
    ('E', "lease lapsed (inferred)"),
    ('>', "still held"),
    ('B', "refused: busy"),
    ('P', "refused: paused"),
    ('S', "skipped (--once-per)"),
    ('U', "resumed after the pause ran out"),
];

/// Which of two marks falling in one column is drawn there: how a hold ended first (a
/// failure, a forced release, a lapse...), then a plain release, a refusal or skip, a still
/// held `>`, a take; a span's fill and blank last.
fn rank(c: char) -> u8 {
    match c {
        'X' | 'T' | 'R' | 'L' | 'F' | 'E' => 6,
        ']' => 5,
        'B' | 'P' | 'S' | 'U' => 4,
        '>' => 3,
        '[' => 2,
        ' ' => 0,
        _ => 1,
    }
}

/// Puts `mark`, of instant `t`, in column `at` of `cells` (each cell a character and the
/// instant of the mark in it) unless a mark that says more is there; the mark it displaces (or
/// `mark` itself, when it loses) moves to a neighbouring column holding no mark, if there is
/// one on its side: to the right when it came later than the mark that stays, else to the
/// left, so that their order shows (with no room there, it is not drawn). Returns the marks
/// drawn.
fn put(cells: &mut [(char, i64)], at: usize, mark: char, t: i64) -> Vec<char> {
    let (keep, other) = if rank(mark) >= rank(cells[at].0) {
        ((mark, t), cells[at])
    } else {
        (cells[at], (mark, t))
    };
    cells[at] = keep;
    let mut drawn = vec![keep.0];
    if rank(other.0) >= 2 {
        let side = if other.1 >= keep.1 {
            at + 1
        } else {
            at.wrapping_sub(1)
        };
        if side < cells.len() && rank(cells[side].0) <= 1 {
            let i = side;
            cells[i] = other;
            drawn.push(other.0);
        }
    }
    drawn
}

/// A key's chart, before it is drawn.
#[derive(Debug, Default)]
struct Chart {
    spans: Vec<Span>,
    marks: Vec<Mark>,
    /// Rows in the order their host first appears.
    rows: Vec<String>,
    /// The time the chart spans, when given (`--since`): else from the first to the last thing.
    edges: Option<(i64, i64)>,
}

impl Chart {
    /// The spans and marks of `entries` (one key's, by time), with the runs `state` has
    /// waiting at `now`.
    fn of(entries: &[Entry], state: Option<&Inspection>, now: i64) -> Chart {
        let mut chart = Chart::default();
        let host = |e: &Entry| shown(e.get("host").unwrap_or("?")).into_owned();
        // Takes without an end yet, by fence.
        let mut open: BTreeMap<String, (String, i64)> = BTreeMap::new();
        let mut paused: Option<(i64, i64)> = None;
        for e in entries {
            let fence = e.get("fence").unwrap_or("").to_string();
            let end = match e.get("event").unwrap_or("") {
                "acquired" => {
                    chart.row(&host(e));
                    // A waiter's take says how long it waited: drawn up to the take.
                    if let Some(waited) = e.get("waited_ms").and_then(|w| w.parse::<i64>().ok()) {
                        chart.spans.push(Span {
                            row: host(e),
                            from: e.ms - waited,
                            to: e.ms,
                            fill: Fill::Waiting,
                            end: None,
                            clipped: false,
                        });
                    }
                    open.insert(fence, (host(e), e.ms));
                    continue;
                }
                "released" => match e.get("outcome") {
                    Some("failed" | "killed") => 'X',
                    Some("timed out") => 'T',
                    Some("replaced") => 'R',
                    Some("lease lost") => 'L',
                    _ => ']',
                },
                "lost" => 'L',
                "forced" => 'F',
                "expired" => 'E',
                "busy" => {
                    let mark = if e.get("reason") == Some("paused") {
                        'P'
                    } else {
                        'B'
                    };
                    chart.mark(&host(e), e.ms, mark);
                    continue;
                }
                "skipped" => {
                    chart.mark(&host(e), e.ms, 'S');
                    continue;
                }
                "paused" => {
                    let until = e.get("until").and_then(|u| u.parse::<i64>().ok());
                    let until = until.filter(|u| *u > 0).unwrap_or(i64::MAX);
                    chart.close_pause(paused.take());
                    paused = Some((e.ms, until));
                    continue;
                }
                "resumed" => {
                    let pause = paused.take();
                    // A resume after the pause ran out is the operator saying the work is
                    // done: drawn, since the pause's bar ended before it.
                    if pause.is_some_and(|(_, until)| until < e.ms) {
                        chart.mark(PAUSES, e.ms, 'U');
                    }
                    chart.close_pause(pause.map(|(from, to)| (from, to.min(e.ms))));
                    continue;
                }
                _ => continue,
            };
            // A take's end: on the take's row (a forced release names the operator's host).
            let (row, from) = open.remove(&fence).unwrap_or_else(|| (host(e), e.ms));
            chart.row(&row);
            chart.spans.push(Span {
                row,
                from,
                to: e.ms,
                fill: Fill::Held,
                end: Some(end),
                clipped: false,
            });
        }
        chart.close_pause(paused.map(|(from, to)| (from, to.min(now))));
        for (_, (row, from)) in open {
            chart.spans.push(Span {
                row,
                from,
                to: now,
                fill: Fill::Held,
                end: None,
                clipped: false,
            });
        }
        for waiter in state.map_or(&[][..], |s| &s.queue[..]) {
            let row = if waiter.host.is_empty() {
                "?".to_string()
            } else {
                shown(&waiter.host).into_owned()
            };
            chart.row(&row);
            chart.spans.push(Span {
                row,
                from: waiter.since_ms.unwrap_or(now).min(now),
                to: now,
                fill: Fill::Waiting,
                end: None,
                clipped: false,
            });
        }
        chart
    }

    /// Only what happened from `from` to `to`: spans that end before are left out, those that
    /// began before start at `from`; marks outside are left out; the chart then spans the
    /// window whole (`window` keeps an empty span for it).
    fn window(&mut self, from: i64, to: i64) {
        self.spans.retain(|s| s.to >= from && s.from <= to);
        for s in &mut self.spans {
            if s.from < from {
                s.from = from;
                s.clipped = true;
            }
        }
        self.marks.retain(|m| (from..=to).contains(&m.at));
        let rows: Vec<String> = std::mem::take(&mut self.rows);
        self.rows = rows
            .into_iter()
            .filter(|r| {
                self.spans.iter().any(|s| &s.row == r) || self.marks.iter().any(|m| &m.row == r)
            })
            .collect();
        self.edges = Some((from, to));
    }

    fn row(&mut self, row: &str) {
        if !self.rows.iter().any(|r| r == row) {
            self.rows.push(row.to_string());
        }
    }

    fn mark(&mut self, row: &str, at: i64, mark: char) {
        self.row(row);
        self.marks.push(Mark {
            row: row.to_string(),
            at,
            mark,
        });
    }

    fn close_pause(&mut self, pause: Option<(i64, i64)>) {
        if let Some((from, to)) = pause {
            self.row(PAUSES);
            self.spans.push(Span {
                row: PAUSES.to_string(),
                from,
                to: to.max(from),
                fill: Fill::Paused,
                end: None,
                clipped: false,
            });
        }
    }

    /// The chart as lines of at most `style.width` columns.
    fn draw(&self, key: &str, style: &Style) -> String {
        let width = style.width.max(usize::from(MIN_WIDTH));
        let times = self
            .spans
            .iter()
            .flat_map(|s| [s.from, s.to])
            .chain(self.marks.iter().map(|m| m.at));
        let (Some(t0), Some(t1)) = (times.clone().min(), times.max()) else {
            let text = if self.edges.is_some() {
                format!("{key}: no entries in the log in that time\n")
            } else {
                format!("{key}: no entries in the log\n")
            };
            return fit(&text, width);
        };
        let (t0, t1) = self.edges.unwrap_or((t0, t1));
        let t1 = t1.max(t0 + 1);
        let label_width = self
            .rows
            .iter()
            .map(|r| r.chars().count())
            .max()
            .unwrap_or(1)
            .clamp(4, width / 3);
        let cols = width - label_width - 1;
        let col = |t: i64| (((t - t0) as i128 * (cols as i128 - 1)) / (t1 - t0) as i128) as usize;
        // `job  2026-01-02 03:00:00.000 .. 03:41:02.120 UTC, 35s a column`
        let (from, to) = (time_text(t0), time_text(t1));
        let to = if from[..10] == to[..10] {
            &to[11..23]
        } else {
            &to[..23]
        };
        let column = std::time::Duration::from_millis(((t1 - t0) as u64).div_ceil(cols as u64 - 1));
        let mut out = header(
            key,
            &[
                format!(
                    "{} {} .. {} UTC, {} a column",
                    &from[..10],
                    &from[11..23],
                    to.replace('T', " "),
                    crate::supervise::lease::fmt(column)
                ),
                format!(
                    "{} {} .. {} UTC",
                    &from[..10],
                    &from[11..23],
                    to.replace('T', " ")
                ),
                format!(
                    "{} .. {} UTC",
                    &from[11..19],
                    &to[to.len() - 12..to.len() - 4]
                ),
                format!("{} .. {}", &from[11..19], &to[to.len() - 12..to.len() - 4]),
            ],
            width,
        );
        out.push_str(&axis(t0, t1, label_width, cols));
        // Each row's lanes: a host whose spans overlap in time gets another lane below. Spans
        // that follow one another share a lane, and a column both fall in keeps the earlier
        // one's end.
        let mut lanes: Vec<(String, Vec<(char, i64)>)> = Vec::new();
        let mut free_from: Vec<i64> = Vec::new();
        let mut used = String::new();
        let mut spans: Vec<&Span> = self.spans.iter().collect();
        spans.sort_by_key(|s| (s.from, s.to));
        for row in &self.rows {
            let first = lanes.len();
            lanes.push((row.clone(), vec![(' ', 0); cols]));
            free_from.push(i64::MIN);
            for span in spans.iter().filter(|s| &s.row == row) {
                let lane = (first..lanes.len())
                    .find(|&l| free_from[l] <= span.from)
                    .unwrap_or_else(|| {
                        lanes.push((format!("{row}+"), vec![(' ', 0); cols]));
                        free_from.push(i64::MIN);
                        lanes.len() - 1
                    });
                free_from[lane] = span.to;
                let cells = &mut lanes[lane].1;
                let (mut a, mut b) = (col(span.from), col(span.to));
                if cells[a].0 != ' ' && a < b {
                    a += 1;
                }
                // A hold shorter than a column still shows its take and its end.
                if span.fill == Fill::Held && !span.clipped && b == a {
                    if b + 1 < cols {
                        b += 1;
                    } else {
                        a = a.saturating_sub(1);
                    }
                }
                for cell in &mut cells[a..=b] {
                    if rank(cell.0) <= 1 {
                        cell.0 = style.fill(span.fill);
                    }
                }
                if span.fill == Fill::Held {
                    if !span.clipped {
                        used.extend(put(cells, a, '[', span.from));
                    }
                    used.extend(put(cells, b, span.end.unwrap_or('>'), span.to));
                }
            }
            for m in self.marks.iter().filter(|m| &m.row == row) {
                used.extend(put(&mut lanes[first].1, col(m.at), m.mark, m.at));
            }
        }
        for (label, cells) in &lanes {
            let label: String = label.chars().take(label_width).collect();
            let line: String = cells.iter().map(|c| c.0).collect();
            out.push_str(&format!("{label:<label_width$} {}\n", line.trim_end()));
        }
        let mut legend: Vec<String> = LEGEND
            .iter()
            .filter(|(c, _)| used.contains(*c))
            .map(|(c, what)| format!("{c} {what}"))
            .collect();
        for (fill, what) in [(Fill::Waiting, "waiting"), (Fill::Paused, "paused")] {
            if self.spans.iter().any(|s| s.fill == fill) {
                legend.push(format!("{} {what}", style.fill(fill)));
            }
        }
        out.push_str(&wrap(&legend, width));
        out
    }
}

/// The header line: the key and the first of `times` (longest first) that fits in `width`; the
/// key alone, cut, when none does.
fn header(key: &str, times: &[String], width: usize) -> String {
    for t in times {
        let line = format!("{key}  {t}");
        if line.chars().count() <= width {
            return format!("{line}\n");
        }
    }
    fit(key, width)
}

/// The time axis: a tick (`|`) and its time every dozen columns or so, under the header.
fn axis(t0: i64, t1: i64, label_width: usize, cols: usize) -> String {
    let span = t1 - t0;
    let text = |t: i64| {
        let full = time_text(t); // 2026-01-02T03:04:05.678Z
        match span {
            s if s >= 2 * 86_400_000 => full[5..16].to_string(),
            s if s >= 3_600_000 => full[11..16].to_string(),
            s if s >= 10_000 => full[11..19].to_string(),
            _ => full[11..23].to_string(),
        }
    };
    let step = text(t0).len() + 3;
    let mut line = vec![' '; cols];
    let mut at = 0;
    while at + step <= cols {
        let t = t0 + ((span as i128 * at as i128) / (cols as i128 - 1).max(1)) as i64;
        line[at] = '|';
        for (i, c) in text(t).chars().enumerate() {
            line[at + 1 + i] = c;
        }
        at += step.max(cols / 6);
    }
    let line: String = line.iter().collect();
    format!("{:label_width$} {}\n", "", line.trim_end())
}

/// One line cut to `width` columns (and its newline kept).
fn fit(line: &str, width: usize) -> String {
    let line = line.trim_end_matches('\n');
    let mut out: String = line.chars().take(width).collect();
    out.push('\n');
    out
}

/// The legend's items, comma-separated, in lines of at most `width` columns.
fn wrap(items: &[String], width: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for item in items {
        let add = if line.is_empty() {
            item.clone()
        } else {
            format!(", {item}")
        };
        if !line.is_empty() && line.chars().count() + add.chars().count() > width {
            out.push_str(&fit(&format!("{line},"), width));
            line = item.clone();
        } else {
            line.push_str(&add);
        }
    }
    if !line.is_empty() {
        out.push_str(&fit(&line, width));
    }
    out
}

#[cfg(test)]
mod tests;
