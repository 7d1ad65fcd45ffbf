//! One module per subcommand: `run`, `sweep`, `capacity` (and `capacity_virtual`), `sim`,
//! `report`, `merge`, `compare`, `gate`, `history`, `plan`, `monitor` (and `inputs`, reading finished
//! runs back; `session`, what `run`, `sweep` and `capacity` share; `run_extras` and
//! `server_side`, the parts of a run that `run` and `report` share).

pub(crate) mod capacity;
pub(crate) mod capacity_virtual;
pub(crate) mod compare;
pub(crate) mod gate;
pub(crate) mod history;
pub(crate) mod inputs;
pub(crate) mod merge;
pub(crate) mod monitor;
pub(crate) mod plan;
pub(crate) mod plan_simulate;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod run_extras;
pub(crate) mod server_side;
pub(crate) mod session;
pub(crate) mod sharded;
pub(crate) mod sim;
pub(crate) mod sweep;
pub(crate) mod workload;
