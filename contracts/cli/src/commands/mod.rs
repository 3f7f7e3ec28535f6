//! One module per command group; each command reads its flags, does its IO through
//! `chain`, `api` or `results`, and prints through `output`.

pub mod account;
pub mod job;
pub mod keys;
pub mod node;
pub mod submit;
pub mod watch;
