//! What is watched around the requests: the server's own metrics during a run ([`server`]) or
//! without one ([`monitor`]), the machines involved ([`environment`]), the client's own
//! overhead ([`overhead`]), and live figures for a UI while a run goes on ([`live`]).

pub mod environment;
pub mod live;
pub mod monitor;
pub mod overhead;
pub mod server;
