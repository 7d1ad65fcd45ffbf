//! What the subcommands share, given their plain configuration ([`crate::options`]): reading
//! finished runs back ([`inputs`]), building the workload from its specification
//! ([`workload`]), the backend of `--api` ([`backend`]), release criteria ([`gate`]), the
//! session every measuring command runs its steps in ([`session`]), the parts of a run beside
//! the requests — live view, gate, exports, history ([`run_extras`]) — the server's side of a
//! run ([`server_side`]), the coordination of sharded runs ([`sharded`]) the servers `goodput
//! tune` starts, readies and stops ([`server_process`]) and Ctrl-C ([`signals`]).

pub(crate) mod backend;
pub(crate) mod gate;
pub(crate) mod inputs;
pub(crate) mod run_extras;
pub(crate) mod server_process;
pub(crate) mod server_side;
pub(crate) mod session;
pub(crate) mod sharded;
pub(crate) mod signals;
pub(crate) mod workload;
