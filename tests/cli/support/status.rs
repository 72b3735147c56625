//! Reading a lock's state the way an operator does: through `redlock status --json`.

use super::json::{Document, Json};
use super::redis_server::RedisServer;
use super::redlock::Redlock;

/// The document `redlock status --json ARGS...` prints, after expecting exit status `code`.
pub fn status_document(server: &RedisServer, args: &[&str], code: i32) -> Json {
    let outcome = Redlock::new(server)
        .args(["status", "--json"])
        .args(args)
        .exits_with(code);
    Json::parse(outcome.stdout.trim_end())
        .unwrap_or_else(|e| outcome.fail(&format!("status --json printed no JSON document: {e}")))
}

/// The object `redlock status --json KEY` prints for one lock, held (0) or free (1).
pub fn lock_status(server: &RedisServer, key: &str) -> Json {
    let outcome = Redlock::new(server).args(["status", "--json", key]).run();
    if !matches!(outcome.code(), Some(0 | 1)) {
        outcome.fail("expected status to exit 0 (held) or 1 (free)");
    }
    let document = Json::parse(outcome.stdout.trim_end())
        .unwrap_or_else(|e| outcome.fail(&format!("status --json printed no JSON document: {e}")));
    match document.items("locks") {
        [lock] => lock.clone(),
        locks => outcome.fail(&format!("expected one lock, found {}", locks.len())),
    }
}
