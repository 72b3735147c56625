//! Who a holder is, as the records show it: the host and user names (from the password
//! database first), and the command with anything that looks like a secret redacted.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

/// A value that looks like a credential, as the records show it instead.
pub const REDACTED: &str = "***";

/// The command as the records keep it, without what looks like a credential (records live for
/// 30 days and `status` shows them to read-only users):
///
/// * the value of an assignment or `--flag=value` whose name looks secret
///   (`PGPASSWORD=x`, `--api-key=x`);
/// * the word after a flag whose name looks secret (`--password x`, `--token x`);
/// * the user information of a URL (`redis://user:pass@host` → `redis://***@host`).
///
/// A name looks secret when it contains PASSWORD, PASSWD, PASSPHRASE, SECRET, TOKEN, KEY,
/// CREDENTIAL or AUTH, or has PASS or PWD as a part of its own (`MYSQL_PWD`, `--pass`), in any
/// case. Anything else is kept as written: a password passed positionally (`mysql -pX`,
/// `redis-cli -a X`) cannot be told from other arguments; use `--label` for such commands.
///
/// This reads shell text (`run -c`'s, or a word that is itself a script): a value runs to the
/// end of its shell word, quotes and escaped quotes (`'a'\''b'`, `"a\"b"`) included; inside a
/// quoted script (`sh -c '… --password x'`) it ends at that script's closing quote. Where the
/// quoting cannot be followed (an unbalanced quote), more is hidden rather than less. The words
/// of an argv are better redacted one by one before they are quoted ([`redact_words`]).
pub fn redact(command: &str) -> String {
    let bytes = command.as_bytes();
    let mut out = String::with_capacity(command.len());
    let mut i = 0;
    let mut hide_next = false;
    let mut quoted = Quoted::No;
    while i < bytes.len() {
        let b = bytes[i];
        if hide_next && !is_separator(b) && !closes(bytes, i, quoted) {
            out.push_str(REDACTED);
            i = value_end(bytes, i, quoted);
            hide_next = false;
            continue;
        }
        if is_break(b) {
            // `\'` outside single quotes is a quote character, not a quote.
            let n = if b == b'\\'
                && quoted != Quoted::Single
                && bytes.get(i + 1).is_some_and(u8::is_ascii)
            {
                2
            } else {
                1
            };
            quoted = track(quoted, &bytes[i..i + n]);
            out.push_str(&command[i..i + n]);
            i += n;
            continue;
        }
        let end = (i..bytes.len())
            .find(|&j| is_break(bytes[j]))
            .unwrap_or(bytes.len());
        let token = &command[i..end];
        let name_end = token
            .find(|c: char| !(c.is_ascii_alphanumeric() || "_-.".contains(c)))
            .unwrap_or(token.len());
        let name = &token[..name_end];
        let secret = looks_secret(name.trim_start_matches('-'));
        if secret && token[name_end..].starts_with('=') {
            out.push_str(&token[..=name_end]);
            out.push_str(REDACTED);
            i = value_end(bytes, i + name_end + 1, quoted);
        } else if let Some((host, user_end)) = userinfo(bytes, i, end) {
            // The user information may hold quotes (`'u:p'\''w@h'`): it runs to the last `@`
            // before the host, across them.
            out.push_str(&command[i..host]);
            out.push_str(REDACTED);
            quoted = track(quoted, &bytes[host..user_end]);
            i = user_end;
        } else {
            out.push_str(token);
            hide_next = secret && name.starts_with('-') && name_end == token.len();
            i = end;
        }
    }
    out
}

/// The words of a command as the records keep them: each word is looked at whole, whatever
/// bytes it holds (quotes, invalid UTF-8), by the rules of [`redact`] — the word after a flag
/// whose name looks secret, the value of `NAME=value` or `--flag=value` whose name looks secret,
/// the user information of a URL become `***`. Quote the words afterwards.
pub fn redact_words<W: AsRef<OsStr>>(words: &[W]) -> Vec<OsString> {
    let mut hide_next = false;
    words
        .iter()
        .map(|word| {
            let bytes = word.as_ref().as_bytes();
            let name_end = bytes
                .iter()
                .position(|&b| !(b.is_ascii_alphanumeric() || b"_-.".contains(&b)))
                .unwrap_or(bytes.len());
            // The name is ASCII by construction.
            let name = String::from_utf8_lossy(&bytes[..name_end]);
            let secret = looks_secret(name.trim_start_matches('-'));
            let flag = secret && name.starts_with('-') && name_end == bytes.len();
            let out = if std::mem::replace(&mut hide_next, flag) {
                REDACTED.as_bytes().to_vec()
            } else if secret && bytes.get(name_end) == Some(&b'=') {
                [&bytes[..=name_end], REDACTED.as_bytes()].concat()
            } else {
                hide_userinfo(bytes)
            };
            OsString::from_vec(out)
        })
        .collect()
}

/// Whether the text at a point is inside quotes, as far as [`redact`] can follow.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Quoted {
    No,
    Single,
    Double,
}

/// The quoting after `span`, from `quoted` before it.
fn track(mut quoted: Quoted, span: &[u8]) -> Quoted {
    let mut j = 0;
    while j < span.len() {
        match (quoted, span[j]) {
            (Quoted::No, b'\'') => quoted = Quoted::Single,
            (Quoted::No, b'"') => quoted = Quoted::Double,
            (Quoted::Single, b'\'') | (Quoted::Double, b'"') => quoted = Quoted::No,
            (Quoted::No | Quoted::Double, b'\\') => j += 1,
            _ => {}
        }
        j += 1;
    }
    quoted
}

fn is_quote(b: u8) -> bool {
    b == b'\'' || b == b'"'
}

/// A shell separator or whitespace: where an unquoted word ends.
fn is_separator(b: u8) -> bool {
    b.is_ascii_whitespace() || b";&|()".contains(&b)
}

/// Whitespace, a shell separator, a quote or a backslash: where a name or a URL of the command
/// ends.
fn is_break(b: u8) -> bool {
    is_separator(b) || is_quote(b) || b == b'\\'
}

/// Whether the byte at `at` closes the quotes the text is in (`'\''` inside single quotes is
/// a quote character, not the end).
fn closes(bytes: &[u8], at: usize, quoted: Quoted) -> bool {
    match quoted {
        Quoted::No => false,
        Quoted::Single => bytes[at] == b'\'' && !bytes[at..].starts_with(b"'\\''"),
        Quoted::Double => bytes[at] == b'"',
    }
}

/// Where `needle` next occurs in `bytes` from `from`, as the index just past it.
fn past(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|at| from + at + needle.len())
}

/// Where a value starting at `start` ends: at the end of its shell word, with quoted parts and
/// escaped characters in it. Inside quotes (`sh -c '… --token x'`), before their closing quote,
/// with the quoted parts the script in quotes writes (`'\''…'\''` in single quotes, `\"…\"` or
/// `'…'` in double quotes, `"…"` in single quotes) when they close before it.
fn value_end(bytes: &[u8], start: usize, quoted: Quoted) -> usize {
    let len = bytes.len();
    let first = |from: usize, hit: &dyn Fn(usize) -> bool| (from..len).find(|&k| hit(k));
    let mut j = start;
    while j < len {
        j = match (quoted, bytes[j]) {
            (Quoted::Single, b'\'') if bytes[j..].starts_with(b"'\\''") => {
                match first(j + 4, &|k| bytes[k] == b'\'') {
                    Some(k) if bytes[k..].starts_with(b"'\\''") => k + 4,
                    _ => j + 4,
                }
            }
            (Quoted::Single, b'\'') | (Quoted::Double, b'"') => break,
            (Quoted::Double, b'\\') if bytes.get(j + 1) == Some(&b'"') => {
                match first(j + 2, &|k| bytes[k] == b'"') {
                    Some(k) if bytes[k - 1] == b'\\' => k + 1,
                    _ => j + 2,
                }
            }
            (Quoted::No | Quoted::Double, b'\\') => j + 2,
            (Quoted::No, b'"') => double_quoted_end(bytes, j + 1),
            // An unclosed quote runs to the end of the text.
            (Quoted::No, b'\'') => past(bytes, j + 1, b"'").unwrap_or(len),
            (Quoted::Single, b'"') => {
                // To the next `"` unless the quotes close first (`'\''` does not close them).
                let mut k = j + 1;
                while k < len && bytes[k] != b'"' && !closes(bytes, k, quoted) {
                    k += if bytes[k..].starts_with(b"'\\''") {
                        4
                    } else {
                        1
                    };
                }
                if bytes.get(k) == Some(&b'"') {
                    k + 1
                } else {
                    j + 1
                }
            }
            (Quoted::Double, b'\'') => match first(j + 1, &|k| is_quote(bytes[k])) {
                Some(k) if bytes[k] == b'\'' => k + 1,
                _ => j + 1,
            },
            (_, b) if is_separator(b) => break,
            _ => j + 1,
        };
    }
    j.min(len)
}

/// Just past the `"` that closes a double-quoted string whose text starts at `from` (a `\"` in
/// it does not close it); the end of the text when none does.
fn double_quoted_end(bytes: &[u8], from: usize) -> usize {
    let mut j = from;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => j += 2,
            b'"' => return j + 1,
            _ => j += 1,
        }
    }
    bytes.len()
}

/// Where the authority of a URL whose `scheme://` starts the text at `from` ends: at `/`, `?`,
/// `#` or whitespace. Quotes are part of it: a password may hold them.
fn authority_end(bytes: &[u8], from: usize) -> usize {
    (from..bytes.len())
        .find(|&j| b"/?#".contains(&bytes[j]) || bytes[j].is_ascii_whitespace())
        .unwrap_or(bytes.len())
}

/// For the first URL with user information in the word `start..end` of `bytes`: where its user
/// information starts (just past `://`) and where it ends (at the last `@` of the authority).
fn userinfo(bytes: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    let mut from = start;
    while let Some(host) = past(&bytes[..end], from, b"://") {
        let authority = authority_end(bytes, host);
        if let Some(at) = bytes[host..authority].iter().rposition(|&b| b == b'@') {
            return Some((host, host + at));
        }
        from = host;
    }
    None
}

fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if upper.is_empty() || upper == "PWD" || upper == "OLDPWD" {
        return false;
    }
    const INSIDE: [&str; 8] = [
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "SECRET",
        "TOKEN",
        "KEY",
        "CREDENTIAL",
        "AUTH",
    ];
    INSIDE.iter().any(|w| upper.contains(w))
        || upper
            .split(['_', '-', '.'])
            .any(|part| part == "PASS" || part == "PWD")
}

/// `scheme://user:pass@host/...` → `scheme://***@host/...`, for every URL in one word.
fn hide_userinfo(word: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(word.len());
    let mut from = 0;
    while let Some(host) = past(word, from, b"://") {
        out.extend_from_slice(&word[from..host]);
        let authority = authority_end(word, host);
        match word[host..authority].iter().rposition(|&b| b == b'@') {
            Some(at) => {
                out.extend_from_slice(REDACTED.as_bytes());
                out.extend_from_slice(&word[host + at..authority]);
            }
            None => out.extend_from_slice(&word[host..authority]),
        }
        from = authority;
    }
    out.extend_from_slice(&word[from..]);
    out
}

pub(super) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// The name of the user this process runs as: from the password database file (a static
/// binary cannot ask NSS, so users known only to LDAP or SSSD are not found there), else
/// `$USER` or `$LOGNAME`, else `uid N`.
pub fn user_name() -> String {
    // SAFETY: getuid cannot fail and touches no memory of ours.
    let uid = unsafe { libc::getuid() };
    read_small("/etc/passwd")
        .and_then(|passwd| passwd_name(&passwd, uid))
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .or_else(|| std::env::var("LOGNAME").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| format!("uid {uid}"))
}

/// A file of at most 64 KiB, read without a size probe (open, read, close: this is on every
/// run's start-up path); `None` when it cannot be read or is larger. The buffer grows from 4 KiB
/// as needed and is never zeroed first: zeroing 64 KiB would fault in every page of it per run.
fn read_small(path: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    const MAX: usize = 64 * 1024;
    let file = std::fs::File::open(path).ok()?;
    let mut buf = Vec::with_capacity(4096);
    file.take(MAX as u64 + 1).read_to_end(&mut buf).ok()?;
    (buf.len() <= MAX).then_some(buf)
}

/// The first name with this uid in a passwd(5) file (`name:password:uid:gid:…`).
pub(super) fn passwd_name(passwd: &[u8], uid: libc::uid_t) -> Option<String> {
    passwd.split(|&b| b == b'\n').find_map(|line| {
        let mut fields = line.split(|&b| b == b':');
        let name = fields.next()?;
        let id = fields.nth(1)?;
        (!name.is_empty()
            && !name.starts_with(b"+")
            && std::str::from_utf8(id).ok()?.parse() == Ok(uid))
        .then(|| String::from_utf8_lossy(name).into_owned())
    })
}

pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its whole length; gethostname writes at most that much.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".to_string();
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..len]).into_owned()
}
