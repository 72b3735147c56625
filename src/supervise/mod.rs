//! Running the command: the lease timeline, the spawn, the command's tree, signals and the
//! keeper. Knows nothing about Redis.

pub mod child;
pub mod keeper;
pub mod lease;
pub mod signals;
mod sys;
pub mod tree;
