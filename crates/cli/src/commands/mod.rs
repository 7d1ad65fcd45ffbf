//! One module per subcommand: `run`, `sim`, `report`.

pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod sim;
pub(crate) mod workload;
