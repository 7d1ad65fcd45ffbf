//! Decisions over measured steps and finished reports: where the knee of a sweep is
//! ([`sweep`]), the highest sustainable load ([`capacity`]), how many devices a demand needs
//! ([`plan`]) and which fleet layout serves the most per accelerator ([`layouts`]), the live
//! probes that calibrate the simulator to a server ([`calibrate`]), whether a report passes a
//! release gate ([`gate`]), how two runs differ ([`compare`], [`significance`]), a
//! configuration's figures across repeated runs ([`repeats`], with [`student`]'s t distribution), which server configuration serves the
//! most under an SLO ([`tune`]), the dotted paths that name a report's figures
//! ([`report_path`]), and the runs recorded in a history store ([`history`]: series, listed
//! figures, a figure's trend with significance marks).

pub mod calibrate;
pub mod capacity;
pub mod compare;
pub mod gate;
pub mod history;
pub mod layouts;
pub mod plan;
pub mod repeats;
pub mod report_path;
pub mod significance;
pub mod student;
pub mod sweep;
pub mod tune;
