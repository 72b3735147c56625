//! What an error means, in one place: which exit status it stands for ([`classify`]), whether
//! the server answered or could not be reached (the predicates), and how it reads on the one
//! line redlock prints ([`render`]).
//!
//! Errors travel up as `anyhow::Error`. A [`Failure`] carries a status its raiser decided
//! (usage errors, a lost lease); otherwise the first Redis error in the chain decides, by its
//! class. Anything unrecognised is "unavailable" (69): when in doubt, redlock says it could not
//! do its job, never that the lock is busy or free.

use std::fmt;

use redis::RedisError;

use crate::report::exit::Exit;
use crate::report::reply::{self, Meaning};

/// An error whose exit status is already decided by the code that raised it.
#[derive(Debug)]
pub struct Failure {
    pub exit: Exit,
    pub message: String,
}

/// An error that ends redlock with `exit`.
pub fn fail(exit: Exit, message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Failure {
        exit,
        message: message.into(),
    })
}

/// Bad input (64): said before anything is contacted.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    fail(Exit::Usage, message)
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// An error put in plain words: what is wrong and what to do, where the causes below it only
/// name the symptom (a refused connection, `AuthenticationFailed`). [`render`] prints the words
/// and none of the causes; [`classify`] and the predicates still read the causes, so a
/// timed-out request worded this way is still a timeout.
#[derive(Debug)]
pub struct Worded {
    text: String,
    cause: anyhow::Error,
}

/// `err`, said as `text` (see [`Worded`]).
pub fn worded(err: anyhow::Error, text: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Worded {
        text: text.into(),
        cause: err,
    })
}

impl fmt::Display for Worded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for Worded {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.cause.as_ref())
    }
}

/// An error with what it left behind said after it: the line reads as `err`'s, then `; text`
/// (see [`render`]). The status stays `err`'s: the afterword adds a consequence, not a cause.
#[derive(Debug)]
pub struct Afterword {
    text: String,
    cause: anyhow::Error,
}

/// `err`, with `text` said after it (see [`Afterword`]).
pub fn afterword(err: anyhow::Error, text: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Afterword {
        text: text.into(),
        cause: err,
    })
}

impl fmt::Display for Afterword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {}", self.cause, self.text)
    }
}

impl std::error::Error for Afterword {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.cause.as_ref())
    }
}

/// The Redis errors in an error's chain of causes, outermost first.
pub fn redis_errors(err: &anyhow::Error) -> impl Iterator<Item = &RedisError> {
    err.chain().filter_map(|c| c.downcast_ref::<RedisError>())
}

/// The exit status an error stands for.
pub fn classify(err: &anyhow::Error) -> Exit {
    for cause in err.chain() {
        if let Some(failure) = cause.downcast_ref::<Failure>() {
            return failure.exit;
        }
        if let Some(redis) = cause.downcast_ref::<RedisError>() {
            return classify_redis(redis);
        }
    }
    Exit::Unavailable
}

/// Redis errors by what they mean ([`reply::meaning`], whichever server worded them). Passing
/// server states (LOADING, MASTERDOWN, BUSY, CLUSTERDOWN, TRYAGAIN), READONLY and OOM mean
/// "this server cannot take the lock right now": 69. A refused password or ACL is 77; any
/// other reply (a key of another type, an unknown or renamed command, a script the server
/// refuses) means the server is not set up for redlock: 78.
pub fn classify_redis(err: &RedisError) -> Exit {
    match reply::meaning(err) {
        None => Exit::Unavailable,
        Some(Meaning::AclDenied { .. } | Meaning::Unauthenticated | Meaning::WrongPassword) => {
            Exit::Permission
        }
        Some(Meaning::ReadOnly | Meaning::OutOfMemory | Meaning::Transient) => Exit::Unavailable,
        Some(Meaning::WrongType | Meaning::UnknownCommand | Meaning::NoScript | Meaning::Other) => {
            Exit::Config
        }
    }
}

/// Whether a Redis error is an answer about the lock (the server spoke and refused) rather than
/// a failure to reach it. The heartbeat treats the former as lease loss at once and retries the
/// latter until the kill point.
pub fn is_definitive(err: &RedisError) -> bool {
    match classify_redis(err) {
        Exit::Permission | Exit::Config => true,
        Exit::Unavailable => matches!(
            reply::meaning(err),
            Some(Meaning::ReadOnly | Meaning::OutOfMemory)
        ),
        _ => false,
    }
}

/// Whether an error is a reply from the server (it answered) rather than a transport failure.
pub fn is_server_reply(err: &anyhow::Error) -> bool {
    redis_errors(err).any(|e| e.code().is_some())
}

pub fn is_readonly(err: &anyhow::Error) -> bool {
    redis_errors(err).any(|e| reply::meaning(e) == Some(Meaning::ReadOnly))
}

pub fn is_timeout(err: &anyhow::Error) -> bool {
    redis_errors(err).any(redis::RedisError::is_timeout)
}

pub fn is_definitive_error(err: &anyhow::Error) -> bool {
    redis_errors(err).any(is_definitive)
}

/// What to do about a server that wants a password none was given for, as every message says
/// it.
pub const GIVE_PASSWORD: &str =
    "give it with --password-file (or REDLOCK_PASSWORD_FILE) or in the URL";

/// Whether the server refused an unauthenticated client: NOAUTH, or (to a request too large
/// to read before AUTH, such as a script) "Protocol error: unauthenticated multibulk length".
fn unauthenticated(err: &RedisError) -> bool {
    reply::meaning(err) == Some(Meaning::Unauthenticated)
}

/// Whether an ACL denied a command, key or channel (inside a script or not), as opposed to a
/// missing or refused password.
pub fn is_acl_denial(err: &anyhow::Error) -> bool {
    redis_errors(err).any(|e| matches!(reply::meaning(e), Some(Meaning::AclDenied { .. })))
}

/// Whether the server said a key holds another type of value (WRONGTYPE).
pub fn is_wrong_type(err: &anyhow::Error) -> bool {
    redis_errors(err).any(|e| reply::meaning(e) == Some(Meaning::WrongType))
}

/// A lock operation (`doing`: "cannot acquire KEY") a script refused with WRONGTYPE: the lock
/// key holds another type of value. Said as `status` says it, with what to do; `several`
/// when the operation named more than one key. The scripts read the lock key before they
/// write anything, so nothing was changed. Other errors are returned as they are.
pub fn not_a_lock(err: anyhow::Error, doing: &str, several: bool) -> anyhow::Error {
    // Already worded where the key of another type was found (a record beside the lock).
    if !is_wrong_type(&err) || err.chain().any(<dyn std::error::Error>::is::<Worded>) {
        return err;
    }
    let text = if several {
        format!(
            "{doing}: one of the keys holds another type of value, so it is not a lock \
             (WRONGTYPE); nothing was changed: delete it or choose other keys"
        )
    } else {
        format!(
            "{doing}: the key holds another type of value, so it is not a lock (WRONGTYPE); \
             nothing was changed: delete it or choose another key"
        )
    };
    worded(err, text)
}

/// An error and its causes on one line, without repeating a cause its parent already quotes;
/// the afterwords ([`Afterword`]) end it.
pub fn render(err: &anyhow::Error) -> String {
    let mut line = explain(err);
    for cause in err.chain() {
        if let Some(after) = cause.downcast_ref::<Afterword>() {
            line.push_str("; ");
            line.push_str(&after.text);
        }
    }
    line
}

/// [`render`]'s line without the afterwords.
fn explain(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        // An afterword's own words are said last; its cause follows in the chain.
        if cause.is::<Afterword>() {
            continue;
        }
        // Unauthenticated, the server's own words are noise (a protocol error, to a script):
        // say what is wrong and what to do instead, and nothing below it.
        if let Some(redis) = cause.downcast_ref::<RedisError>()
            && unauthenticated(redis)
        {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str("the server requires a password: ");
            line.push_str(GIVE_PASSWORD);
            break;
        }
        // A server's reply in its own words, its code after them (the client's rendering
        // quotes the code, or names the kind of error: no help to whoever reads the line).
        let said = cause.downcast_ref::<RedisError>().and_then(reply_words);
        let said_reply = said.is_some();
        // A socket read timeout surfaces as EAGAIN; say what it means.
        let mut text = said.unwrap_or_else(|| cause.to_string()).replace(
            "Resource temporarily unavailable (os error 11)",
            "timed out",
        );
        text = without_script_place(&text).to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
        // What follows a server's reply is the same reply again (the client's own error
        // type), or what redlock worded itself.
        if cause.is::<Worded>() || said_reply {
            break;
        }
    }
    // What the reply means, said the same way whichever server worded it; where redlock
    // has worded the error itself, that says it already (but for an ACL denial, whose words
    // never say what to do).
    let worded = err.chain().any(<dyn std::error::Error>::is::<Worded>);
    if let Some(explained) = redis_errors(err).find_map(|e| {
        reply::meaning(e)
            .filter(|m| !worded || matches!(m, Meaning::AclDenied { .. }))
            .and_then(reply::explanation)
    }) {
        line.push_str(" (");
        line.push_str(explained);
        line.push(')');
    }
    line
}

/// A server's error reply as the line says it: its words, then its code unless it is the
/// generic `ERR` (`the holder record … (LAYOUT)`); `None` for an error that is no reply.
fn reply_words(err: &RedisError) -> Option<String> {
    let detail = err.detail()?;
    Some(match err.code() {
        Some("ERR") | None => detail.to_string(),
        Some(code) => format!("{detail} ({code})"),
    })
}

/// A reply from inside a script without where in the script the server says it came from
/// (" script: SHA, on @user_script:LINE." after the reply's own words): the script's internals,
/// no help to whoever reads the line.
fn without_script_place(reply: &str) -> &str {
    match reply.rfind(" script: ") {
        Some(at) if reply[at..].contains("@user_script:") => reply[..at].trim_end(),
        _ => reply,
    }
}

/// A server's error reply (`CODE detail`), as tests need them.
#[cfg(test)]
pub fn server_error(line: &str) -> RedisError {
    let (code, detail) = line.split_once(' ').unwrap();
    redis::make_extension_error(code.to_string(), Some(detail.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_wanting_a_password_is_told_how_to_give_it() {
        for reply in [
            "NOAUTH Authentication required.",
            "ERR Protocol error: unauthenticated multibulk length",
        ] {
            let err = anyhow::Error::new(server_error(reply)).context("cannot acquire job");
            assert_eq!(
                render(&err),
                "cannot acquire job: the server requires a password: give it with \
                 --password-file (or REDLOCK_PASSWORD_FILE) or in the URL"
            );
        }
        let err = anyhow::Error::new(server_error("WRONGPASS invalid")).context("x");
        assert!(!render(&err).contains("--password-file"));
    }

    #[test]
    fn a_key_of_another_type_is_said_to_be_no_lock() {
        let err = anyhow::Error::new(server_error(
            "WRONGTYPE Operation against a key holding the wrong kind of value script: 29db",
        ))
        .context("cannot acquire job");
        let err = not_a_lock(err, "cannot acquire job", false);
        let line = render(&err);
        assert!(
            line.starts_with("cannot acquire job: the key holds another type"),
            "{line}"
        );
        assert!(line.contains("delete it or choose another key"), "{line}");
        assert!(!line.contains("script"), "{line}");
        assert_eq!(classify(&err), Exit::Config);
        let other = not_a_lock(anyhow::anyhow!("refused"), "cannot acquire job", false);
        assert_eq!(render(&other), "refused");
    }

    #[test]
    fn redis_errors_are_classified_by_their_code() {
        assert_eq!(classify_redis(&server_error("WRONGTYPE x")), Exit::Config);
        assert_eq!(classify_redis(&server_error("OOM x")), Exit::Unavailable);
        assert_eq!(
            classify_redis(&server_error("WRONGPASS x")),
            Exit::Permission
        );
        assert_eq!(classify_redis(&server_error("NOAUTH x")), Exit::Permission);
        assert_eq!(classify_redis(&server_error("BUSY x")), Exit::Unavailable);
        assert_eq!(
            classify_redis(&server_error(
                "ERR Protocol error: unauthenticated multibulk length"
            )),
            Exit::Permission
        );
        assert_eq!(
            classify_redis(&server_error(
                "ERR The user executing the script can't run this command or subcommand"
            )),
            Exit::Permission
        );
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(classify_redis(&io), Exit::Unavailable);
        assert!(!is_definitive(&io));
        assert!(is_definitive(&server_error("WRONGTYPE x")));
        assert!(is_definitive(&server_error("READONLY x")));
        assert!(!is_definitive(&server_error("LOADING x")));
    }

    #[test]
    fn a_meaning_reads_the_same_whichever_server_worded_it() {
        // (Redis 7.0's words, Valkey's) for one meaning: the same status, the same words added.
        for (redis, valkey) in [
            (
                "ERR The user executing the script can't run this command or subcommand script: \
                 79c0799d0a9e1cb9787686bc596fb66789f03857, on @user_script:1.",
                "ERR ACL failure in script: User peek has no permissions to run the 'hmget' \
                 command script: on @user_script:1.",
            ),
            (
                "ERR Unknown Redis command called from script script: 4d6e, on @user_script:1.",
                "ERR Unknown command called from script script: on @user_script:1.",
            ),
            (
                "NOPERM this user has no permissions to access one of the keys used as arguments",
                "NOPERM No permissions to access a key",
            ),
        ] {
            let (redis, valkey) = (
                anyhow::Error::new(server_error(redis)).context("cannot release job"),
                anyhow::Error::new(server_error(valkey)).context("cannot release job"),
            );
            assert_eq!(classify(&redis), classify(&valkey));
            let added = |line: String| line[line.rfind(" (").expect("words added")..].to_owned();
            assert_eq!(added(render(&redis)), added(render(&valkey)));
        }
    }

    #[test]
    fn a_reply_from_a_script_is_said_without_the_place_in_the_script() {
        for (reply, said) in [
            (
                "LAYOUT the fence counter {job}:redlock:fence is 2:1, not of data layout 1: \
                 written by another redlock; nothing was taken script: 3f5d, on @user_script:95.",
                "LAYOUT the fence counter {job}:redlock:fence is 2:1, not of data layout 1: \
                 written by another redlock; nothing was taken",
            ),
            (
                "ERR ACL failure in script: User peek has no permissions to run the 'hmget' \
                 command script: on @user_script:1.",
                "ERR ACL failure in script: User peek has no permissions to run the 'hmget' \
                 command",
            ),
            ("LAYOUT plain words", "LAYOUT plain words"),
        ] {
            assert_eq!(without_script_place(reply), said);
            let err = anyhow::Error::new(server_error(reply)).context("cannot acquire job");
            assert!(!render(&err).contains("@user_script"), "{}", render(&err));
        }
    }

    #[test]
    fn failures_win_over_everything_else() {
        let err = fail(Exit::LeaseLost, "lost").context("while running");
        assert_eq!(classify(&err), Exit::LeaseLost);
        assert_eq!(
            classify(&anyhow::anyhow!("something odd")),
            Exit::Unavailable
        );
    }
}
