//! The virtual-time commands: `goodput run|sweep|capacity --virtual-time` ([`run`], [`sweep`],
//! [`capacity`]) and `goodput plan --simulate` ([`plan`]), wired from their flags to the
//! `goodput-virtual` bridge (the client side on the simulator's clock), whose items are
//! re-exported here.

pub(crate) mod capacity;
pub(crate) mod plan;
pub(crate) mod requests;
pub(crate) mod run;
pub(crate) mod sweep;

pub(crate) use goodput_virtual::{
    VirtualRequests, VirtualTarget, virtual_capacity, virtual_capacity_with,
};
