//! What the subcommands share: reading finished runs back ([`inputs`]), building the workload
//! from flags ([`workload`]), the session every measuring command runs its steps in
//! ([`session`]), the parts of a run beside the requests — live view, gate, exports, history
//! ([`run_extras`]) — the server's side of a run ([`server_side`]) and the coordination of
//! sharded runs ([`sharded`]).

pub(crate) mod backend;
pub(crate) mod gate;
pub(crate) mod inputs;
pub(crate) mod run_extras;
pub(crate) mod server_side;
pub(crate) mod session;
pub(crate) mod sharded;
pub(crate) mod workload;
