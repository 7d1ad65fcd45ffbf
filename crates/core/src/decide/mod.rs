//! Decisions over measured steps and finished reports: where the knee of a sweep is
//! ([`sweep`]), the highest sustainable load ([`capacity`]), how many devices a demand needs
//! ([`plan`]), the live probes that calibrate the simulator to a server ([`calibrate`]),
//! whether a report passes a release gate ([`gate`]), how two runs differ
//! ([`compare`], [`significance`]), and the dotted paths that name a report's figures
//! ([`report_path`]).

pub mod calibrate;
pub mod capacity;
pub mod compare;
pub mod gate;
pub mod plan;
pub mod report_path;
pub mod significance;
pub mod sweep;
