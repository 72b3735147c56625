//! Integration tests for the `redlock` binary: each test starts its own `redis-server`
//! (see `support`) and runs the real binary against it, as cron or a container would.

mod support;

mod acl;
mod acquire_extend;
mod audit_log;
mod check;
mod cluster;
mod deploy_container;
mod deploy_systemd;
mod docs;
mod doctor;
mod harness;
mod integrity;
mod logging;
mod metrics;
mod model;
mod nested;
mod once;
mod package;
mod pause;
mod queue;
mod quorum;
mod release;
mod run;
mod run_contention;
mod run_errors;
mod run_heartbeat;
mod run_job_control;
mod run_lease_loss;
mod run_max_runtime;
mod run_reaping;
mod run_release;
mod run_security;
mod run_signals;
mod run_stress;
mod run_supervision;
mod run_usage;
mod seams;
mod sentinel;
mod shapes;
mod startup_symbols;
mod status;
mod tls;
mod tls_topologies;
mod waiting;
