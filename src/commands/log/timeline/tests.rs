//! The timeline's drawing, without a server: marks, widths and the header.

use super::*;

fn entry(ms: i64, fields: &[(&str, &str)]) -> Entry {
    Entry {
        lock: "job".into(),
        ms,
        seq: 0,
        fields: fields
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
        raw: None,
    }
}

fn ascii(width: usize) -> Style {
    Style {
        width,
        blocks: false,
    }
}

#[test]
fn holds_refusals_and_ends_go_on_their_hosts_rows() {
    let entries = [
        entry(
            0,
            &[("event", "acquired"), ("fence", "1"), ("host", "web-1")],
        ),
        entry(100, &[("event", "busy"), ("host", "web-2")]),
        entry(
            500,
            &[
                ("event", "released"),
                ("fence", "1"),
                ("host", "web-1"),
                ("outcome", "ok"),
            ],
        ),
        entry(
            600,
            &[("event", "acquired"), ("fence", "2"), ("host", "web-2")],
        ),
        entry(900, &[("event", "forced"), ("fence", "2"), ("host", "ops")]),
        entry(
            950,
            &[("event", "acquired"), ("fence", "3"), ("host", "web-1")],
        ),
    ];
    let text = Chart::of(&entries, None, 1000).draw("job", &ascii(60));
    let rows: Vec<&str> = text.lines().collect();
    assert!(rows.iter().all(|l| l.chars().count() <= 60), "{text}");
    assert!(text.is_ascii(), "{text}");
    let web1 = rows.iter().find(|l| l.starts_with("web-1 ")).expect(&text);
    let web2 = rows.iter().find(|l| l.starts_with("web-2 ")).expect(&text);
    assert!(web1.contains("[===") && web1.contains("=]"), "{text}");
    assert!(web1.trim_end().ends_with('>'), "still held: {text}");
    assert!(web2.contains('B') && web2.contains("=F"), "{text}");
    assert!(
        !text.contains("ops"),
        "a forced release ends the holder's bar: {text}"
    );
    assert!(text.contains("F forced release") && text.contains("B refused: busy"));
}

#[test]
fn overlapping_holds_of_one_host_get_a_second_row_and_pauses_their_own() {
    let entries = [
        entry(
            0,
            &[
                ("event", "acquired"),
                ("fence", "1"),
                ("host", "a"),
                ("shape", "shared"),
            ],
        ),
        entry(
            10,
            &[
                ("event", "acquired"),
                ("fence", "2"),
                ("host", "a"),
                ("shape", "shared"),
            ],
        ),
        entry(
            50,
            &[("event", "released"), ("fence", "1"), ("outcome", "failed")],
        ),
        entry(
            60,
            &[("event", "released"), ("fence", "2"), ("outcome", "ok")],
        ),
        entry(70, &[("event", "paused"), ("host", "ops"), ("until", "90")]),
    ];
    let text = Chart::of(&entries, None, 100).draw("job", &ascii(50));
    assert!(text.contains("\na+ "), "{text}");
    assert!(text.contains("X failed"), "{text}");
    let pause = text.lines().find(|l| l.starts_with(PAUSES)).expect(&text);
    assert!(pause.contains("###"), "{text}");
}

#[test]
fn at_narrow_widths_how_a_hold_ended_wins_its_column_and_short_holds_show_both_ends() {
    // A failure then a busy refusal, a forced release then a busy refusal, a shared hold's
    // release and a skip: each pair a few ms apart, in one column at 40 columns over 30s.
    let mut entries = Vec::new();
    let mut at = 0;
    let mut next = |ms: i64| {
        at += ms;
        at
    };
    for (fence, end) in [("1", "failed"), ("2", "forced"), ("3", "ok")] {
        entries.push(entry(
            next(1000),
            &[("event", "acquired"), ("fence", fence), ("host", "h")],
        ));
        let ended = next(2000);
        if end == "forced" {
            entries.push(entry(
                ended,
                &[("event", "forced"), ("fence", fence), ("host", "ops")],
            ));
        } else {
            entries.push(entry(
                ended,
                &[
                    ("event", "released"),
                    ("fence", fence),
                    ("host", "h"),
                    ("outcome", end),
                ],
            ));
        }
        let refusal = if end == "ok" { "skipped" } else { "busy" };
        entries.push(entry(ended + 5, &[("event", refusal), ("host", "h")]));
    }
    // A hold that took no time at all.
    entries.push(entry(
        next(20_000),
        &[("event", "acquired"), ("fence", "4"), ("host", "h")],
    ));
    entries.push(entry(
        at,
        &[
            ("event", "released"),
            ("fence", "4"),
            ("host", "h"),
            ("outcome", "ok"),
        ],
    ));
    let text = Chart::of(&entries, None, at).draw("job", &ascii(40));
    let h = text.lines().find(|l| l.starts_with("h ")).expect(&text);
    for mark in ['X', 'F', ']'] {
        assert!(h.contains(mark), "{mark} lost:\n{text}");
    }
    // What loses its column is drawn beside, in the order things happened, or not at all.
    assert!(
        h.find('B').is_none_or(|b| h.find('X') < Some(b)),
        "in the order they happened:\n{text}"
    );
    let wider = Chart::of(&entries, None, at).draw("job", &ascii(72));
    let h = wider.lines().find(|l| l.starts_with("h ")).expect(&wider);
    for mark in ['X', 'F', ']', 'B', 'S'] {
        assert!(h.contains(mark), "{mark} lost:\n{wider}");
    }
    assert!(
        h.find('X') < h.find('B') && h.find('F') < h.rfind('B') && h.find(']') < h.find('S'),
        "in the order they happened:\n{wider}"
    );
    assert!(h.trim_end().ends_with("[]"), "a zero-length hold:\n{text}");
}

#[test]
fn the_header_is_shortened_whole_never_cut_mid_time() {
    let entries = [
        entry(
            1_795_000_000_000,
            &[("event", "acquired"), ("fence", "1"), ("host", "h")],
        ),
        entry(
            1_795_000_030_000,
            &[
                ("event", "released"),
                ("fence", "1"),
                ("host", "h"),
                ("outcome", "ok"),
            ],
        ),
    ];
    for (width, key) in [(40, "report:daily"), (40, "job"), (60, "report:daily")] {
        let text = Chart::of(&entries, None, 0).draw(key, &ascii(width));
        let header = text.lines().next().unwrap();
        assert!(header.chars().count() <= width, "{text}");
        assert!(
            header.ends_with(" UTC") || header.ends_with("a column") || header.ends_with(":30"),
            "{width}: {header}"
        );
    }
    let long_key = "k".repeat(60);
    let text = Chart::of(&entries, None, 0).draw(&long_key, &ascii(40));
    assert_eq!(text.lines().next().unwrap(), "k".repeat(40));
}

#[test]
fn a_key_without_entries_says_so() {
    let text = Chart::of(&[], None, 5).draw("job", &ascii(80));
    assert_eq!(text, "job: no entries in the log\n");
}
