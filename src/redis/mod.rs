//! Talking to Redis: what `--url` names (`url`), connecting to it (`server`: one server, a
//! Cluster through the redis crate's router, the master Sentinel names), the connection itself
//! (`wire`: TCP, unix socket or TLS, RESP2 replies), TLS (`tls`), why a server could not be used
//! (`reach`), the Sentinel lookup
//! (`sentinel`) and a cluster node's connection (`node`). Knows nothing about locks.

mod dial;
pub mod node;
pub mod reach;
pub mod sentinel;
pub mod server;
pub mod tls;
pub mod url;
pub mod wire;
