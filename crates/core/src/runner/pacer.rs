//! Precise open-loop pacing: a dedicated thread that sleeps until shortly before each arrival,
//! spins the last [`SPIN`] and then hands the request to the async runtime. Tokio's timer
//! rounds to about a millisecond, which alone would put ~1 ms of dispatch lag on every
//! request; the pacer keeps it to tens of microseconds.
//!
//! Only on a multi-threaded runtime (which has workers to take the hand-over). On a
//! current-thread runtime — the one `tokio::time::pause()` needs — the dispatcher keeps the
//! runtime's timer, so virtual time still drives the schedule in tests.

use std::time::Duration;

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::time::Instant;

/// The last stretch before an arrival is spun rather than slept (thread sleeps overshoot by
/// 50–100 µs on Linux).
pub(super) const SPIN: Duration = Duration::from_micros(200);

/// Longest single sleep, so a stop is noticed promptly.
const MAX_NAP: Duration = Duration::from_millis(5);

/// Whether the precise pacer can run here (a multi-threaded tokio runtime).
pub(super) fn available() -> bool {
    Handle::try_current().is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread)
}

/// Calls `launch(index, at)` at each arrival `at` (in order) from a thread of the blocking
/// pool; returns when the arrivals run out or `stopped()` says so (checked at least every
/// few milliseconds).
pub(super) async fn pace<A, L, S>(arrivals: A, mut launch: L, stopped: S)
where
    A: Iterator<Item = (u64, Instant)> + Send + 'static,
    L: FnMut(u64, Instant) + Send + 'static,
    S: Fn() -> bool + Send + 'static,
{
    let pacing = tokio::task::spawn_blocking(move || {
        for (index, at) in arrivals {
            if !wait_until(at.into_std(), &stopped) {
                return;
            }
            launch(index, at);
        }
    });
    // A panic in `launch` is a bug; the runner then ends with what it has.
    let _ = pacing.await;
}

/// Sleeps, then spins, until `deadline`; `false` if `stopped()` first.
fn wait_until(deadline: std::time::Instant, stopped: &impl Fn() -> bool) -> bool {
    loop {
        if stopped() {
            return false;
        }
        let now = std::time::Instant::now();
        let Some(left) = deadline
            .checked_duration_since(now)
            .filter(|d| !d.is_zero())
        else {
            return true;
        };
        if left > SPIN {
            std::thread::sleep((left - SPIN).min(MAX_NAP));
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::{Arc, Mutex};

    use tokio_util::sync::CancellationToken;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn arrivals_are_launched_in_order_and_never_early() {
        assert!(available());
        let start = Instant::now() + Duration::from_millis(5);
        let arrivals = (0..20u64).map(move |i| (i, start + Duration::from_micros(700 * i)));
        let launched = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&launched);
        let launch = move |index, at: Instant| {
            sink.lock().unwrap().push((index, at, Instant::now()));
        };
        pace(arrivals, launch, || false).await;
        let launched = launched.lock().unwrap();
        assert_eq!(launched.len(), 20);
        for (n, (index, at, now)) in launched.iter().enumerate() {
            assert_eq!(*index, n as u64);
            assert!(now >= at, "never early");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stop_ends_pacing_promptly() {
        let stop = CancellationToken::new();
        let far = Instant::now() + Duration::from_secs(3600);
        let arrivals = (0..2u64).map(move |i| (i, far));
        let stopper = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            stopper.cancel();
        });
        let started = std::time::Instant::now();
        pace(
            arrivals,
            |_, _| panic!("nothing is due"),
            move || stop.is_cancelled(),
        )
        .await;
        assert!(started.elapsed() < Duration::from_secs(60));
    }

    #[test]
    fn a_current_thread_runtime_keeps_the_async_timer() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert!(!runtime.block_on(async { available() }));
        assert!(!available(), "outside any runtime");
    }
}
