//! One module per subcommand. Each returns the [`Exit`](crate::report::exit::Exit) it ended with or an
//! error that `main` classifies; none of them exits the process.

pub mod acquire;
pub mod check;
pub mod doctor;
pub mod extend;
pub mod generate;
pub mod log;
pub mod metrics;
pub mod pause;
pub mod release;
pub mod run;
mod spill;
pub mod status;
