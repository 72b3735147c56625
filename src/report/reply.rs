//! What a server's error reply means, whichever server words it. Redis and Valkey agree on the
//! error codes (`NOPERM`, `READONLY`, `OOM`, `WRONGTYPE`, `NOSCRIPT`…) but not always on the
//! words after them, and an ACL denial inside a script comes as a plain `ERR` whose words differ
//! between servers (Redis 7.0: "The user executing the script can't …"; Valkey and Redis 7.2:
//! "ACL failure in script: …"). Every place that asks what a reply means asks [`meaning`], so
//! a new server's wording is taught here, once; the table in the tests holds the real replies
//! of each server the suite runs against.

use redis::{ErrorKind, RedisError, ServerErrorKind};

/// What a server's error reply says, in redlock's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meaning {
    /// An ACL refused a command, key or channel: `NOPERM` outside a script (and for a script's
    /// declared keys), an `ERR` inside one (`in_script`).
    AclDenied { in_script: bool },
    /// No password was given to a server that wants one: `NOAUTH`, or the protocol error a
    /// request too large to read before AUTH gets.
    Unauthenticated,
    /// The password or user was refused (`WRONGPASS`).
    WrongPassword,
    /// A replica refused a write (`READONLY`).
    ReadOnly,
    /// The server is at its `maxmemory` and refused a write (`OOM`).
    OutOfMemory,
    /// A key holds another type of value (`WRONGTYPE`).
    WrongType,
    /// The server does not know a command (renamed, disabled, or too old a server), from a
    /// client or from a script.
    UnknownCommand,
    /// `EVALSHA` of a script the server does not hold (`NOSCRIPT`).
    NoScript,
    /// A state that passes: LOADING, BUSY, MASTERDOWN, CLUSTERDOWN, TRYAGAIN, MOVED, ASK, or no
    /// room for another client.
    Transient,
    /// Any other error reply.
    Other,
}

/// What `err` means, or `None` when it is no reply from a server (a transport failure, a
/// timeout).
pub fn meaning(err: &RedisError) -> Option<Meaning> {
    // Some clients (the cluster client) wrap a refused password in another kind of error.
    let text = err.to_string();
    if text.contains("WRONGPASS") || text.contains("invalid username-password") {
        return Some(Meaning::WrongPassword);
    }
    if err.kind() == ErrorKind::AuthenticationFailed {
        return Some(Meaning::WrongPassword);
    }
    if let ErrorKind::Server(kind) = err.kind() {
        match kind {
            ServerErrorKind::NoPerm => return Some(Meaning::AclDenied { in_script: false }),
            ServerErrorKind::ReadOnly => return Some(Meaning::ReadOnly),
            ServerErrorKind::NoScript => return Some(Meaning::NoScript),
            ServerErrorKind::BusyLoading
            | ServerErrorKind::MasterDown
            | ServerErrorKind::ClusterDown
            | ServerErrorKind::TryAgain
            | ServerErrorKind::Moved
            | ServerErrorKind::Ask => return Some(Meaning::Transient),
            _ => {}
        }
    }
    let code = err.code()?;
    let detail = err.detail().unwrap_or("");
    let lower = detail.to_ascii_lowercase();
    Some(match code {
        "NOPERM" => Meaning::AclDenied { in_script: false },
        "NOAUTH" => Meaning::Unauthenticated,
        "WRONGPASS" => Meaning::WrongPassword,
        "READONLY" => Meaning::ReadOnly,
        "OOM" => Meaning::OutOfMemory,
        "WRONGTYPE" => Meaning::WrongType,
        "NOSCRIPT" => Meaning::NoScript,
        "BUSY" | "LOADING" | "MASTERDOWN" | "CLUSTERDOWN" | "TRYAGAIN" | "MOVED" | "ASK" => {
            Meaning::Transient
        }
        // The words of an ERR reply, which is all a script's failed call can return.
        _ if lower.contains("executing the script can't")
            || lower.starts_with("acl failure in script")
            || lower.contains("no permissions to") =>
        {
            Meaning::AclDenied {
                in_script: lower.contains("script"),
            }
        }
        _ if lower.contains("unauthenticated") => Meaning::Unauthenticated,
        _ if lower.contains("you can't write against a read only replica") => Meaning::ReadOnly,
        _ if lower.contains("command not allowed when used memory") => Meaning::OutOfMemory,
        _ if lower.contains("wrong kind of value") => Meaning::WrongType,
        _ if lower.contains("max number of clients") => Meaning::Transient,
        _ if lower.starts_with("unknown command")
            || lower.starts_with("unknown subcommand")
            || lower.starts_with("unknown redis command called from script")
            || lower.starts_with("unknown command called from script") =>
        {
            Meaning::UnknownCommand
        }
        _ => Meaning::Other,
    })
}

/// What redlock adds to a reply's own words on its one line, so that a meaning reads the same
/// whichever server worded it; `None` where the reply is clear or is worded elsewhere.
pub fn explanation(meaning: Meaning) -> Option<&'static str> {
    Some(match meaning {
        Meaning::AclDenied { in_script: true } => {
            "permission denied: the user's ACL refuses a command or key a script of redlock's \
             uses; `redlock doctor` names it"
        }
        Meaning::AclDenied { in_script: false } => {
            "permission denied by the user's ACL: `redlock doctor` names the rule that grants \
             it; the guide lists a least-privilege user"
        }
        Meaning::ReadOnly => {
            "the server is a read-only replica: give redlock the master's address, or a \
             Sentinel URL that finds it"
        }
        Meaning::OutOfMemory => {
            "the server is at its maxmemory and refuses writes: free memory or raise the limit"
        }
        Meaning::UnknownCommand => {
            "the server does not know a command redlock needs: renamed or disabled in its \
             configuration, or too old a server"
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The replies of the servers the suite runs against, as each words them (captured from
    /// Redis 7.0.15, Valkey 8.1.8 and Valkey 9.1.2 with redis-cli; the passing states and the
    /// unauthenticated request as their binaries hold them, Valkey's `%s` being its name),
    /// and what each means. Only the words differ; a meaning must not.
    const WORDINGS: &[(&str, &str, Meaning)] = &[
        // A command the user may not run, outside and inside a script.
        (
            "redis 7.0",
            "NOPERM this user has no permissions to run the 'hmget' command",
            Meaning::AclDenied { in_script: false },
        ),
        (
            "valkey 8, 9",
            "NOPERM User peek has no permissions to run the 'hmget' command",
            Meaning::AclDenied { in_script: false },
        ),
        (
            "redis 7.0",
            "ERR The user executing the script can't run this command or subcommand script: \
             79c0799d0a9e1cb9787686bc596fb66789f03857, on @user_script:1.",
            Meaning::AclDenied { in_script: true },
        ),
        (
            "valkey 8",
            "ERR ACL failure in script: User peek has no permissions to run the 'hmget' command \
             script: 79c0799d0a9e1cb9787686bc596fb66789f03857, on @user_script:1.",
            Meaning::AclDenied { in_script: true },
        ),
        (
            "valkey 9",
            "ERR ACL failure in script: User peek has no permissions to run the 'hmget' command \
             script: on @user_script:1.",
            Meaning::AclDenied { in_script: true },
        ),
        // A key the user may not touch: a script's declared key is checked before it runs.
        (
            "redis 7.0",
            "NOPERM this user has no permissions to access one of the keys used as arguments",
            Meaning::AclDenied { in_script: false },
        ),
        (
            "valkey 8, 9",
            "NOPERM No permissions to access a key",
            Meaning::AclDenied { in_script: false },
        ),
        (
            "redis 7.0",
            "ERR The user executing the script can't access at least one of the keys mentioned \
             in the command arguments script: 6cef24484fc62ca5d3f16a943baa822649c4eff9, on \
             @user_script:1.",
            Meaning::AclDenied { in_script: true },
        ),
        (
            "valkey 9",
            "ERR ACL failure in script: No permissions to access a key script: on \
             @user_script:1.",
            Meaning::AclDenied { in_script: true },
        ),
        // A replica refusing a write, outside and inside a script.
        (
            "redis 7.0, valkey 8, 9",
            "READONLY You can't write against a read only replica.",
            Meaning::ReadOnly,
        ),
        (
            "redis 7.0",
            "READONLY You can't write against a read only replica. script: \
             407d71e294bfe1fd10686cc0b0b6ca4e072ab378, on @user_script:1.",
            Meaning::ReadOnly,
        ),
        (
            "valkey 9",
            "READONLY You can't write against a read only replica. script: on @user_script:1.",
            Meaning::ReadOnly,
        ),
        // maxmemory reached, outside and inside a script.
        (
            "redis 7.0, valkey 8, 9",
            "OOM command not allowed when used memory > 'maxmemory'.",
            Meaning::OutOfMemory,
        ),
        (
            "valkey 9",
            "OOM command not allowed when used memory > 'maxmemory'. script: on @user_script:1.",
            Meaning::OutOfMemory,
        ),
        // A key of another type.
        (
            "redis 7.0, valkey 8, 9",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            Meaning::WrongType,
        ),
        (
            "redis 7.0",
            "WRONGTYPE Operation against a key holding the wrong kind of value script: \
             9cd9f6559c07396eb93387dde0b92c8becd09b12, on @user_script:1.",
            Meaning::WrongType,
        ),
        // A command the server does not know (renamed or disabled), from a client or a script.
        (
            "redis 7.0, valkey 8, 9",
            "ERR unknown command 'FOOBAR', with args beginning with: 'a' ",
            Meaning::UnknownCommand,
        ),
        (
            "redis 7.0",
            "ERR Unknown Redis command called from script script: \
             4d6e5bd6513499b99529697ff0879540e5dd753d, on @user_script:1.",
            Meaning::UnknownCommand,
        ),
        (
            "valkey 8",
            "ERR Unknown command called from script script: \
             4d6e5bd6513499b99529697ff0879540e5dd753d, on @user_script:1.",
            Meaning::UnknownCommand,
        ),
        (
            "valkey 9",
            "ERR Unknown command called from script script: on @user_script:1.",
            Meaning::UnknownCommand,
        ),
        // A script the server does not hold.
        (
            "redis 7.0",
            "NOSCRIPT No matching script. Please use EVAL.",
            Meaning::NoScript,
        ),
        (
            "valkey 8, 9",
            "NOSCRIPT No matching script.",
            Meaning::NoScript,
        ),
        // Passwords.
        (
            "redis 7.0, valkey 8, 9",
            "NOAUTH Authentication required.",
            Meaning::Unauthenticated,
        ),
        (
            "redis 7.0, valkey 8, 9",
            "ERR Protocol error: unauthenticated multibulk length",
            Meaning::Unauthenticated,
        ),
        (
            "redis 7.0, valkey 8, 9",
            "WRONGPASS invalid username-password pair or user is disabled.",
            Meaning::WrongPassword,
        ),
        // Passing states.
        (
            "redis 7.0",
            "LOADING Redis is loading the dataset in memory",
            Meaning::Transient,
        ),
        (
            "valkey 8, 9",
            "LOADING Valkey is loading the dataset in memory",
            Meaning::Transient,
        ),
        (
            "redis 7.0, valkey 8, 9",
            "ERR max number of clients reached",
            Meaning::Transient,
        ),
        (
            "redis 7.0, valkey 8, 9",
            "ERR max number of clients + cluster connections reached",
            Meaning::Transient,
        ),
        (
            "redis 7.0",
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN \
             NOSAVE.",
            Meaning::Transient,
        ),
        (
            "valkey 8, 9",
            "BUSY Valkey is busy running a script. You can only call SCRIPT KILL or SHUTDOWN \
             NOSAVE.",
            Meaning::Transient,
        ),
    ];

    fn reply(line: &str) -> RedisError {
        // As redlock's own reply reader makes them: the crate's parser, from the wire.
        let wire = format!("-{line}\r\n");
        match redis::parse_redis_value(wire.as_bytes()).expect("an error reply") {
            redis::Value::ServerError(e) => e.into(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn each_servers_wording_has_its_meaning() {
        for (server, line, expected) in WORDINGS {
            assert_eq!(meaning(&reply(line)), Some(*expected), "{server}: {line:?}");
        }
    }

    #[test]
    fn a_transport_failure_is_no_reply() {
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(meaning(&io), None);
    }

    #[test]
    fn any_other_error_reply_means_nothing_in_particular() {
        assert_eq!(meaning(&reply("ERR syntax error")), Some(Meaning::Other));
        assert_eq!(
            meaning(&reply("ERR Error running script: @user_script:1: boom")),
            Some(Meaning::Other)
        );
    }
}
