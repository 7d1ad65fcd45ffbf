//! One module per subcommand: `run`, `sweep`, `capacity`, `calibrate`, `sim`, `report`,
//! `merge`, `compare`, `gate`, `history`, `ui`, `plan`, `monitor`, `tune`; each `run` takes the
//! subcommand's plain configuration ([`crate::options`]), never its arguments. What several
//! of them share lives in [`crate::wiring`] (including `sharded`, the shard coordination of
//! `run`, `sweep` and `capacity`); the virtual-time paths of `run`, `sweep`, `capacity` and
//! `plan` in [`crate::virtual_target`].

pub(crate) mod calibrate;
pub(crate) mod capacity;
pub(crate) mod compare;
pub(crate) mod gate;
pub(crate) mod history;
pub(crate) mod merge;
pub(crate) mod monitor;
pub(crate) mod plan;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod sim;
pub(crate) mod sweep;
pub(crate) mod tune;
pub(crate) mod ui;
