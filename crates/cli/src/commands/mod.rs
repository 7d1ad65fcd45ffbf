//! One module per subcommand: `run`, `sim`, `report`, `compare`, `gate`, `history` (and
//! `inputs`, reading finished runs back).

pub(crate) mod compare;
pub(crate) mod gate;
pub(crate) mod history;
pub(crate) mod inputs;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod run_extras;
pub(crate) mod sim;
