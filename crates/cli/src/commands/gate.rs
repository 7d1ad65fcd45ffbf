//! `goodput gate`: judge a report against release criteria and choose the exit status (0 all
//! pass, 1 one fails, 2 usage error — returned as an error). The criteria are
//! [`crate::wiring::gate`]'s, shared with `goodput run --gate`.

use std::process::ExitCode;

use anyhow::Result;

use crate::exit::{EXIT_OK, EXIT_RUN_FAILED};
use crate::options::analysis::GateOptions;
use crate::wiring::gate::{criteria, judge, print};
use crate::wiring::inputs::load_report;

/// Runs `goodput gate`.
pub(crate) fn run(options: GateOptions) -> Result<ExitCode> {
    let criteria = criteria(
        options.criteria.as_deref(),
        options.conditions,
        options.step,
    )?;
    let report = load_report(&options.report)?;
    let (passed, text) = judge(&report.value, &criteria)?;
    print(&text)?;
    Ok(ExitCode::from(if passed {
        EXIT_OK
    } else {
        EXIT_RUN_FAILED
    }))
}
