//! Methodology checks: the warnings a report carries when the run itself undermines its
//! numbers — from the steps alone ([`warnings`]) or with the run's description ([`checks`]).

pub mod checks;
pub mod warnings;
