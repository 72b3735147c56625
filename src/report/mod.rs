//! What redlock tells its caller: exit statuses, what an error means, its own log lines, JSON.

pub mod error;
pub mod exit;
pub mod json;
pub mod log;
pub mod reply;
pub mod text;
