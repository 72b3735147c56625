//! Who a holder is, as the records show it: the host and user names (from the password
//! database first), and the command with anything that looks like a secret redacted.

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
/// case. Quoted values are redacted whole. Anything else is kept as written: a password passed
/// positionally (`mysql -pX`, `redis-cli -a X`) cannot be told from other arguments; use
/// `--label` for such commands.
pub fn redact(command: &str) -> String {
    let bytes = command.as_bytes();
    let mut out = String::with_capacity(command.len());
    let mut i = 0;
    let mut hide_next = false;
    while i < bytes.len() {
        if is_break(bytes[i]) && !(hide_next && is_quote(bytes[i])) {
            out.push(bytes[i] as char);
            i += 1;
            continue;
        }
        if hide_next {
            out.push_str(REDACTED);
            i = value_end(bytes, i);
            hide_next = false;
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
            i = value_end(bytes, i + name_end + 1);
        } else {
            out.push_str(&hide_userinfo(token));
            hide_next = secret && name.starts_with('-') && name_end == token.len();
            i = end;
        }
    }
    out
}

fn is_quote(b: u8) -> bool {
    b == b'\'' || b == b'"'
}

/// Whitespace, a shell separator or a quote: where a word of the command ends.
fn is_break(b: u8) -> bool {
    b.is_ascii_whitespace() || b";&|()".contains(&b) || is_quote(b)
}

/// Where a value starting at `start` ends: after its closing quote when it is quoted, else at
/// the next break.
fn value_end(bytes: &[u8], start: usize) -> usize {
    match bytes.get(start) {
        Some(&q) if is_quote(q) => bytes[start + 1..]
            .iter()
            .position(|&b| b == q)
            .map_or(bytes.len(), |at| start + at + 2),
        _ => (start..bytes.len())
            .find(|&j| is_break(bytes[j]))
            .unwrap_or(bytes.len()),
    }
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

/// `scheme://user:pass@host/...` → `scheme://***@host/...`, for every URL in `word`.
fn hide_userinfo(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| "/?#'\" ".contains(c))
            .unwrap_or(tail.len());
        match tail[..authority_end].rfind('@') {
            Some(user_end) => {
                out.push_str(REDACTED);
                out.push_str(&tail[user_end..authority_end]);
            }
            None => out.push_str(&tail[..authority_end]),
        }
        rest = &tail[authority_end..];
    }
    out.push_str(rest);
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
