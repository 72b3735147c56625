//! What an acquire that the server refused half way leaves: the script's writes before the
//! refused command stay (a server runs a script without a transaction), so what its token may
//! hold is given back; and a WRONGTYPE is traced to the key that holds another type.

use redis::ConnectionLike;

use super::keys::ACQUIRE_TYPES;
use super::{Claim, Shape};

/// After the acquire script answered with an error. A server runs a script's commands without
/// a transaction: what the script wrote before the command that failed stays, and that may be
/// the lock itself, held with this claim's token for the whole TTL by a process about to exit.
/// So whatever it may hold is given back by its token (the release deletes the lock before it
/// writes its records, so it frees the lock even when a later command of its own is refused).
/// When the lock cannot be shown to be free afterwards, the error says that it may stay held,
/// and how to free it. The error, the cause, keeps its status.
///
/// A reply that comes before the script could run (no password, an ACL refusing the script or
/// a key it declares, a script the server does not hold) left nothing, and nothing is done.
pub(super) fn give_back_after_error(
    con: &mut dyn ConnectionLike,
    claim: &Claim,
    err: anyhow::Error,
) -> anyhow::Error {
    use crate::report::reply::{Meaning, meaning};
    let ran = crate::report::error::redis_errors(&err).any(|e| {
        !matches!(
            meaning(e),
            None | Some(
                Meaning::Unauthenticated
                    | Meaning::WrongPassword
                    | Meaning::NoScript
                    | Meaning::AclDenied { in_script: false }
            )
        )
    });
    if !ran {
        return err;
    }
    let keys = claim.keys;
    let err = which_is_not_a_record(con, claim, err);
    let given_back = crate::lock::hold::give_back_unverified(
        con,
        keys,
        claim.token,
        crate::lock::record::GivenBack::Unused,
    );
    if given_back.is_ok()
        || matches!(
            crate::lock::hold::holds(con, keys, claim.token, claim.shape != Shape::Exclusive),
            Ok(crate::lock::hold::Holding::Free | crate::lock::hold::Holding::Other)
        )
    {
        return err;
    }
    let ttl = crate::supervise::lease::fmt(claim.ttl);
    let text = if keys.also.is_empty() {
        format!(
            "{} may stay held until its TTL ({ttl}) ends: free it with `redlock release {} \
             --force`",
            keys.lock, keys.name
        )
    } else {
        format!(
            "{} may stay held until their TTL ({ttl}) ends: free each with `redlock release \
             KEY --force`",
            keys.names()
        )
    };
    crate::report::error::afterword(err, text)
}

/// An acquire refused with WRONGTYPE: the lock key holds another type (said by
/// `error::not_a_lock`), or one of the records beside it does, which a TYPE of each (only on
/// this path) finds and names: the lock key is then no other data, and the records' key is
/// what to delete.
fn which_is_not_a_record(
    con: &mut dyn ConnectionLike,
    claim: &Claim,
    err: anyhow::Error,
) -> anyhow::Error {
    use crate::report::reply::{Meaning, meaning};
    if !crate::report::error::redis_errors(&err).any(|e| meaning(e) == Some(Meaning::WrongType)) {
        return err;
    }
    let mut expected = Vec::new();
    for keys in claim.keys.each() {
        expected.extend(keys.of_an_acquire(false).into_iter().zip(ACQUIRE_TYPES));
        expected.push((keys.once.clone(), "hash"));
    }
    let mut pipe = redis::pipe();
    for (name, _) in &expected {
        pipe.cmd("TYPE").arg(name);
    }
    let Ok(types) = pipe.query::<Vec<String>>(con) else {
        return err;
    };
    let wrong: Vec<String> = expected
        .iter()
        .zip(&types)
        .filter(|((_, want), is)| is.as_str() != "none" && is.as_str() != *want)
        .map(|((name, want), is)| format!("{name} holds a {is} where redlock keeps a {want}"))
        .collect();
    // The lock key itself, or nothing found: `not_a_lock` says it.
    if wrong.is_empty()
        || claim
            .keys
            .each()
            .any(|k| wrong[0].starts_with(&format!("{} ", k.lock)))
    {
        return err;
    }
    let text = format!(
        "cannot acquire {}: {} (WRONGTYPE): {} of the lock's records, which redlock \
         recreates; delete {}",
        claim.keys.names(),
        wrong.join(", "),
        if wrong.len() == 1 {
            "it is one"
        } else {
            "they are"
        },
        if wrong.len() == 1 { "it" } else { "them" }
    );
    crate::report::error::worded(err, text)
}
