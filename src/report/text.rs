//! Recorded values (labels, commands, reasons, host and user names) as human-readable output
//! shows them: one function, so that a value a user chose can never start a line of its own
//! or drive the terminal, and reads the same in `log`, `status`, the busy line and `timeline`.
//! JSON output needs none of this: JSON escapes its strings.

use std::borrow::Cow;

/// `value` with every control character written as a shell's `$'…'` would write it: `\n`,
/// `\r`, `\t`, `\xHH` for the other ASCII ones (`\x1b`, `\x1f`, `\x7f`) and `\uHHHH` for the
/// C1 controls and the characters that break a line or reorder text (U+2028, U+2029, the
/// bidirectional overrides). Everything else, backslashes included, is kept as written, so
/// that commands read as typed and applying it twice changes nothing; the exact value is in
/// the JSON output.
pub fn shown(value: &str) -> Cow<'_, str> {
    if !value.chars().any(hidden) {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if hidden(c) && (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if hidden(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Whether `shown` writes `c` as an escape.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn control_characters_read_as_a_shells_escapes() {
        assert_eq!(
            shown("lab\n2026-01-01T00:00:00.000Z  nl  forced\tevil"),
            "lab\\n2026-01-01T00:00:00.000Z  nl  forced\\tevil"
        );
        assert_eq!(
            shown("a\u{1b}[31mred\r\u{1f}\u{7f}"),
            "a\\x1b[31mred\\r\\x1f\\x7f"
        );
        assert_eq!(
            shown("x\u{9b}y\u{2028}z\u{202e}"),
            "x\\u009by\\u2028z\\u202e"
        );
    }

    #[test]
    fn printable_text_is_kept_as_written() {
        let plain = r"./report.sh --since 'a\.b' → café";
        assert!(matches!(shown(plain), std::borrow::Cow::Borrowed(_)));
        assert_eq!(shown(plain), plain);
        let once = shown("r\nx").into_owned();
        assert_eq!(shown(&once), once, "applying it twice changes nothing");
    }
}
