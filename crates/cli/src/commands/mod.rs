//! One module per subcommand: `run`, `sim`, `report`, `plan`, `monitor`; `server_side` holds
//! the server-side figures `run` and `report` share.

pub(crate) mod monitor;
pub(crate) mod plan;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod server_side;
pub(crate) mod sim;
