//! One module per subcommand: `run`, `sim`, `report`, `compare`, `gate`, `history`, `plan`,
//! `monitor` (and `inputs`, reading finished runs back; `run_extras` and `server_side`, the
//! parts of a run that `run` and `report` share).

pub(crate) mod compare;
pub(crate) mod gate;
pub(crate) mod history;
pub(crate) mod inputs;
pub(crate) mod monitor;
pub(crate) mod plan;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod run_extras;
pub(crate) mod server_side;
pub(crate) mod sim;
pub(crate) mod workload;
