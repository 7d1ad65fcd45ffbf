//! Precise open-loop pacing: a dedicated thread that sleeps until shortly before each arrival,
//! spins the rest of the way and then hands the request to the async runtime. Tokio's timer
//! rounds to about a millisecond, which alone would put ~1 ms of dispatch lag on every
//! request; the pacer keeps it to tens of microseconds.
//!
//! The pacer aims its sleep to end just before the arrival, allowing for how late this
//! machine's sleeps typically wake up (a running mean of their overshoot, each sample capped
//! at [`MAX_SPIN`] so a preempted sleep does not inflate it), and spins only what is left:
//! spinning costs CPU that the rest of the client needs at high rates (a fixed 200 µs margin
//! cost a quarter of a core at 2,000 req/s), so it is kept to the sleep's jitter.
//!
//! Only on a multi-threaded runtime (which has workers to take the hand-over). On a
//! current-thread runtime — the one `tokio::time::pause()` needs — the dispatcher keeps the
//! runtime's timer, so virtual time still drives the schedule in tests.

use std::time::Duration;

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::time::Instant;

/// Margin spun beyond the expected overshoot of a sleep.
pub(super) const MIN_SPIN: Duration = Duration::from_micros(20);
/// Largest overshoot sample counted (Linux thread sleeps overshoot by 50–100 µs; longer ones
/// are preemptions, which spinning cannot help).
pub(super) const MAX_SPIN: Duration = Duration::from_micros(200);

/// Longest single sleep, so a stop is noticed promptly.
const MAX_NAP: Duration = Duration::from_millis(5);

/// Whether the precise pacer can run here (a multi-threaded tokio runtime).
pub(super) fn available() -> bool {
    Handle::try_current().is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread)
}

/// Something due at an instant of this machine's clock.
pub(super) trait Deadline {
    /// When it is due.
    fn real_at(&self) -> Instant;
}

impl Deadline for Instant {
    fn real_at(&self) -> Instant {
        *self
    }
}

impl Deadline for super::request::Due {
    fn real_at(&self) -> Instant {
        self.at
    }
}

/// Calls `launch(index, due)` when each arrival is due (in order) from a thread of the
/// blocking pool; returns when the arrivals run out or `stopped()` says so (checked at least
/// every few milliseconds).
pub(super) async fn pace<D, A, L, S>(arrivals: A, mut launch: L, stopped: S)
where
    D: Deadline,
    A: Iterator<Item = (u64, D)> + Send + 'static,
    L: FnMut(u64, D) + Send + 'static,
    S: Fn() -> bool + Send + 'static,
{
    let pacing = tokio::task::spawn_blocking(move || {
        let mut sleeper = Sleeper::default();
        for (index, due) in arrivals {
            if !sleeper.wait_until(due.real_at().into_std(), &stopped) {
                return;
            }
            launch(index, due);
        }
    });
    // A panic in `launch` is a bug; the runner then ends with what it has.
    let _ = pacing.await;
}

/// Sleeps, then spins, until a deadline, learning how late sleeps wake up.
#[derive(Debug)]
struct Sleeper {
    /// Exponentially weighted mean overshoot of recent sleeps (samples capped at
    /// [`MAX_SPIN`]), µs.
    overshoot_us: f64,
}

impl Default for Sleeper {
    fn default() -> Self {
        Sleeper { overshoot_us: 80.0 }
    }
}

impl Sleeper {
    /// The stretch left to spin after a sleep: the expected overshoot plus a margin.
    fn spin(&self) -> Duration {
        Duration::from_secs_f64(self.overshoot_us / 1e6).min(MAX_SPIN) + MIN_SPIN
    }

    /// Sleeps, then spins, until `deadline`; `false` if `stopped()` first.
    fn wait_until(&mut self, deadline: std::time::Instant, stopped: &impl Fn() -> bool) -> bool {
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
            let spin = self.spin();
            if left > spin {
                let nap = (left - spin).min(MAX_NAP);
                std::thread::sleep(nap);
                let overshoot = now.elapsed().saturating_sub(nap).min(MAX_SPIN);
                self.overshoot_us += 0.05 * (overshoot.as_secs_f64() * 1e6 - self.overshoot_us);
            } else {
                std::hint::spin_loop();
            }
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
    fn the_spun_stretch_follows_the_sleep_overshoot_within_bounds() {
        let mut sleeper = Sleeper::default();
        assert_eq!(sleeper.spin(), Duration::from_micros(100));
        sleeper.overshoot_us = 0.0;
        assert_eq!(sleeper.spin(), MIN_SPIN);
        sleeper.overshoot_us = 10_000.0;
        assert_eq!(sleeper.spin(), MAX_SPIN + MIN_SPIN);
        let deadline = std::time::Instant::now() + Duration::from_millis(3);
        assert!(sleeper.wait_until(deadline, &|| false));
        assert!(std::time::Instant::now() >= deadline);
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
