//! The functions of `goodput._native`: `measure` (an in-process measurement on its own tokio
//! runtime, the calling thread driving or waiting for it without the GIL and checking for Ctrl-C
//! every 100 ms, which stops the measurement and keeps its results), `render_html` and `command`
//! (`crate::command`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use goodput_core::config::{Arrival, LoadSpec, RunConfig, Warmup};
use goodput_core::measure::{MeasureSpec, measure as measure_calls};
use goodput_core::metrics::Slo;
use goodput_core::report::Report;
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use tokio_util::sync::CancellationToken;

use crate::calls::PyCall;

/// How often the waiting thread looks for Ctrl-C.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// The load, stop and warm-up of a measurement, as the Python wrapper passes them.
#[derive(Debug, FromPyObject)]
#[pyo3(from_item_all)]
struct Settings {
    concurrency: Option<u32>,
    rate: Option<f64>,
    requests: Option<u64>,
    duration_secs: Option<f64>,
    warmup_requests: u64,
    warmup_secs: Option<f64>,
    window_secs: f64,
    timeout_secs: f64,
    slo: Option<String>,
    seed: u64,
}

fn secs(name: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        PyValueError::new_err(format!("{name}: must be a non-negative number of seconds"))
    })
}

impl Settings {
    fn config(&self) -> PyResult<RunConfig> {
        let load = match (self.concurrency, self.rate) {
            (_, Some(rate)) => LoadSpec::Open {
                rate_per_sec: rate,
                arrival: Arrival::Poisson,
                max_concurrency: self.concurrency,
            },
            (concurrency, None) => LoadSpec::Closed {
                concurrency: concurrency.unwrap_or(1),
            },
        };
        let warmup = match (self.warmup_secs, self.warmup_requests) {
            (Some(s), _) => Warmup::Duration(secs("warmup", s)?),
            (None, 0) => Warmup::None,
            (None, n) => Warmup::Requests(n),
        };
        let slo = match &self.slo {
            None => None,
            Some(text) => {
                Some(Slo::parse(text).map_err(|e| PyValueError::new_err(format!("slo: {e}")))?)
            }
        };
        Ok(RunConfig {
            load,
            max_requests: self.requests,
            duration: self
                .duration_secs
                .map(|s| secs("duration", s))
                .transpose()?,
            warmup,
            request_timeout: secs("timeout", self.timeout_secs)?,
            no_progress_timeout: secs("timeout", self.timeout_secs)?,
            slo,
            seed: self.seed,
            window: secs("window", self.window_secs)?,
            time_scale: 1.0,
        })
    }
}

/// What is measured, for the report.
#[derive(Debug, FromPyObject)]
#[pyo3(from_item_all)]
struct Described {
    label: String,
    batch_size: u32,
    tags: BTreeMap<String, String>,
    description: String,
}

/// Measures `function` (`call(index)`, or `submit(index, done)` when `coroutine`) and returns
/// the report as JSON text.
#[pyfunction]
#[pyo3(signature = (function, coroutine, settings, described))]
fn measure(
    py: Python<'_>,
    function: Py<PyAny>,
    coroutine: bool,
    settings: Settings,
    described: Described,
) -> PyResult<String> {
    let config = settings.config()?;
    let description: BTreeMap<String, serde_json::Value> =
        serde_json::from_str(&described.description)
            .map_err(|e| PyValueError::new_err(format!("description: {e}")))?;
    let spec = MeasureSpec {
        label: described.label,
        batch_size: described.batch_size,
        tags: described.tags,
        description,
        command_line: vec!["goodput.measure".into()],
    };
    let cancel = CancellationToken::new();
    let inline = !coroutine && matches!(config.load, LoadSpec::Closed { concurrency: 1 });
    let call = Arc::new(PyCall {
        function,
        coroutine,
        inline,
        cancel: cancel.clone(),
    });
    let runtime = if inline {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
    }
    .map_err(|e| PyRuntimeError::new_err(format!("cannot start the async runtime: {e}")))?;
    let token = cancel.clone();
    let task = runtime.spawn(async move {
        let closure = move |index| Arc::clone(&call).call(index);
        measure_calls(&config, &spec, closure, token).await
    });
    let outcome = wait(py, &runtime, task, &cancel);
    py.detach(move || runtime.shutdown_background());
    let report = outcome?;
    serde_json::to_string(&report)
        .map_err(|e| PyRuntimeError::new_err(format!("cannot serialise the report: {e}")))
}

type Measured = Result<Report, goodput_core::measure::MeasureError>;

/// Waits for the measurement without holding the GIL; Ctrl-C (or any other signal handler's
/// exception) cancels it and its report is still returned, except for exceptions other than
/// `KeyboardInterrupt`, which are raised once the measurement has stopped.
fn wait(
    py: Python<'_>,
    runtime: &tokio::runtime::Runtime,
    mut task: tokio::task::JoinHandle<Measured>,
    cancel: &CancellationToken,
) -> PyResult<Report> {
    let mut raised: Option<PyErr> = None;
    let joined = loop {
        let waited = py.detach(|| {
            runtime.block_on(async { tokio::time::timeout(SIGNAL_CHECK, &mut task).await })
        });
        if let Ok(joined) = waited {
            break joined;
        }
        if let Err(error) = py.check_signals() {
            cancel.cancel();
            if !error.is_instance_of::<PyKeyboardInterrupt>(py) {
                raised = Some(error);
            }
        }
    };
    if let Some(error) = raised {
        return Err(error);
    }
    let measured =
        joined.map_err(|e| PyRuntimeError::new_err(format!("the measurement failed: {e}")))?;
    measured.map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The report (JSON text) as one self-contained HTML page.
#[pyfunction]
fn render_html(report_json: &str) -> PyResult<String> {
    let report: serde_json::Value = serde_json::from_str(report_json)
        .map_err(|e| PyValueError::new_err(format!("not a report: {e}")))?;
    goodput_core::html::render_report(&report)
        .map_err(|e| PyRuntimeError::new_err(format!("cannot render the report: {e}")))
}

/// `goodput._native`.
#[pymodule]
fn _native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(measure, module)?)?;
    module.add_function(wrap_pyfunction!(render_html, module)?)?;
    module.add_function(wrap_pyfunction!(crate::command::command, module)?)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
