//! One measured Python call, as the async call [`goodput_core::measure`] times: a plain
//! function runs on the measuring thread when calls are made one at a time, else on blocking
//! threads (so several can run at once when it releases the GIL); a
//! coroutine is submitted to the package's event loop thread and its end is stamped by a done
//! callback. Start and end are stamped right around the Python call; an exception becomes a
//! failed request of its kind (a `KeyboardInterrupt` also stops the measurement).

use std::sync::{Arc, Mutex};

use goodput_core::measure::{Completion, call_error};
use goodput_core::record::{Failure, OutcomeKind};
use pyo3::exceptions::{PyConnectionError, PyKeyboardInterrupt, PyTimeoutError};
use pyo3::prelude::*;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The Python side of a measurement: `call(index)` for a plain function, or
/// `submit(index, done)` for a coroutine function. Either returns (or resolves to) `None` or
/// `(output_tokens, items)`, each `None` or an int.
#[derive(Debug)]
pub(crate) struct PyCall {
    pub(crate) function: Py<PyAny>,
    pub(crate) coroutine: bool,
    /// Plain calls one at a time: made on the runtime's own thread (the thread that called
    /// `measure`, driving a current-thread runtime), so there is no hand-over between threads
    /// around a call — it costs what a plain timing loop costs, and Ctrl-C interrupts the call
    /// itself as it would interrupt that loop.
    pub(crate) inline: bool,
    /// Cancelled when a call raises `KeyboardInterrupt`.
    pub(crate) cancel: CancellationToken,
}

impl PyCall {
    /// Makes call `index` and reports what it did.
    pub(crate) async fn call(self: Arc<Self>, index: u64) -> Result<Completion, Failure> {
        if self.inline {
            return self.call_blocking(index);
        }
        let this = Arc::clone(&self);
        if !self.coroutine {
            return tokio::task::spawn_blocking(move || this.call_blocking(index))
                .await
                .unwrap_or_else(|error| Err(call_error(format!("the call panicked: {error}"))));
        }
        let (sender, receiver) = oneshot::channel();
        let submitted = tokio::task::spawn_blocking(move || this.submit(index, sender))
            .await
            .unwrap_or_else(|error| Err(call_error(format!("submitting panicked: {error}"))));
        let started = submitted?;
        match receiver.await {
            Ok(Ok(mut done)) => {
                done.started = Some(started);
                Ok(done)
            }
            Ok(Err(failure)) => Err(failure),
            Err(_) => Err(Failure::new(
                OutcomeKind::Cancelled,
                "the event loop dropped the call",
            )),
        }
    }

    fn call_blocking(&self, index: u64) -> Result<Completion, Failure> {
        Python::attach(|py| {
            let started = Instant::now();
            let result = self.function.bind(py).call1((index,));
            let finished = Instant::now();
            let mut done = match result {
                Ok(value) => completion(&value)?,
                Err(error) => return Err(failure(py, &error, &self.cancel)),
            };
            done.started = Some(started);
            done.finished = Some(finished);
            Ok(done)
        })
    }

    /// Submits coroutine `index`; returns when it was submitted.
    fn submit(&self, index: u64, sender: Sender) -> Result<Instant, Failure> {
        Python::attach(|py| {
            let done = Done {
                sender: Mutex::new(Some(sender)),
                cancel: self.cancel.clone(),
            };
            let started = Instant::now();
            match self.function.bind(py).call1((index, done)) {
                Ok(_) => Ok(started),
                Err(error) => Err(failure(py, &error, &self.cancel)),
            }
        })
    }
}

type Sender = oneshot::Sender<Result<Completion, Failure>>;

/// The done callback of a submitted coroutine (`concurrent.futures.Future.add_done_callback`):
/// stamps the end and hands the outcome back to the measurement.
#[pyclass]
struct Done {
    sender: Mutex<Option<Sender>>,
    cancel: CancellationToken,
}

#[pymethods]
impl Done {
    fn __call__(&self, py: Python<'_>, future: Bound<'_, PyAny>) {
        let finished = Instant::now();
        let outcome = match future.call_method0("result") {
            Ok(value) => completion(&value).map(|mut done| {
                done.finished = Some(finished);
                done
            }),
            Err(error) => Err(failure(py, &error, &self.cancel)),
        };
        let sender = self.sender.lock().ok().and_then(|mut slot| slot.take());
        if let Some(sender) = sender {
            // The measurement may have ended (Ctrl-C); then nobody waits for this call.
            let _ = sender.send(outcome);
        }
    }
}

/// What a call returned: `None` or `(output_tokens, items)`.
fn completion(value: &Bound<'_, PyAny>) -> Result<Completion, Failure> {
    if value.is_none() {
        return Ok(Completion::done());
    }
    let (tokens, items): (Option<u64>, Option<u32>) = value.extract().map_err(|error| {
        call_error(format!(
            "the measured call's counts are not (tokens, items) of non-negative ints: {error}"
        ))
    })?;
    Ok(Completion {
        output_tokens: tokens,
        items,
        ..Completion::done()
    })
}

/// The failure of a call that raised `error`: `TimeoutError` is a timeout, `ConnectionError`
/// a transport failure, a cancellation or `KeyboardInterrupt` a cancellation (the latter also
/// stops the measurement); anything else is an `error`, named by its exception type.
fn failure(py: Python<'_>, error: &PyErr, cancel: &CancellationToken) -> Failure {
    let type_name = error
        .get_type(py)
        .name()
        .map_or_else(|_| "Exception".to_string(), |name| name.to_string());
    let message = match error.value(py).str() {
        Ok(text) if !text.to_string().is_empty() => format!("{type_name}: {text}"),
        _ => type_name.clone(),
    };
    let kind = if error.is_instance_of::<PyKeyboardInterrupt>(py) {
        cancel.cancel();
        OutcomeKind::Cancelled
    } else if type_name == "CancelledError" {
        OutcomeKind::Cancelled
    } else if error.is_instance_of::<PyTimeoutError>(py) {
        OutcomeKind::Timeout
    } else if error.is_instance_of::<PyConnectionError>(py) {
        OutcomeKind::Transport
    } else {
        OutcomeKind::Error
    };
    Failure::new(kind, message)
}
