//! `goodput run`'s `Load`, `Duration` and `Measurement` flags turned into core's validated
//! [`RunConfig`]: the load (closed loop, open loop, phase profile), when scheduling stops,
//! the warm-up, the timeouts, the SLO and the window.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use goodput_core::config::{Arrival, LoadSpec, RunConfig, Warmup};
use goodput_core::metrics::Slo;
use goodput_core::profile::{ProfileFile, parse_phases, total_duration};
use goodput_core::units::parse_duration;

use crate::args::run::{ArrivalArg, RunArgs};
use crate::args::slo::parse_slo;

impl RunArgs {
    /// The validated run configuration with `seed`; `slo` is `--slo` when the caller parsed
    /// it already (a capacity search's criteria), else `None` and it is parsed here.
    pub(super) fn run_config(&self, seed: u64, slo: Option<Option<Slo>>) -> Result<RunConfig> {
        let load = self.load()?;
        let duration = match (&load, self.requests, self.duration) {
            (LoadSpec::Profile { .. }, _, Some(_)) => {
                bail!("--duration: a phase profile lasts as long as its phases; drop --duration")
            }
            (LoadSpec::Profile { phases, .. }, _, None) => Some(total_duration(phases)),
            (_, None, None) => Some(Duration::from_secs(30)),
            (_, _, duration) => duration,
        };
        let warmup = parse_warmup(&self.warmup)?;
        let slo = match slo {
            Some(slo) => slo,
            None => parse_slo(self.slo_text())?,
        };
        let config = RunConfig {
            load,
            max_requests: self.requests,
            duration,
            warmup,
            request_timeout: self.request_timeout,
            no_progress_timeout: self.no_progress_timeout,
            slo,
            seed,
            window: self.window,
            time_scale: self.time_scale.unwrap_or(1.0),
        };
        config.validate()?;
        if let Some(rate) = self.max_error_rate
            && !(0.0..=1.0).contains(&rate)
        {
            bail!("--max-error-rate: must be a fraction in [0, 1], e.g. 0.01");
        }
        Ok(config)
    }

    /// Whether the load is a phase profile.
    pub(crate) fn has_phases(&self) -> bool {
        self.phases.is_some() || self.profile.is_some()
    }

    /// The load: closed loop with --concurrency, else open loop (default 10/s).
    fn load(&self) -> Result<LoadSpec> {
        if let Some(concurrency) = self.concurrency {
            if self.arrival != ArrivalArg::Poisson || self.burstiness.is_some() {
                bail!(
                    "--arrival and --burstiness shape open-loop arrivals (--rate); a closed loop \
                     (--concurrency) sends each request when the previous one ends"
                );
            }
            if self.max_concurrency.is_some() {
                bail!(
                    "--max-concurrency applies to open loop (--rate); closed loop already caps at --concurrency"
                );
            }
            return Ok(LoadSpec::Closed { concurrency });
        }
        let arrival = self.arrival()?;
        if let Some(load) = self.phased_load(arrival)? {
            return Ok(load);
        }
        Ok(LoadSpec::Open {
            rate_per_sec: self.rate.unwrap_or(10.0),
            arrival,
            max_concurrency: self.max_concurrency,
        })
    }

    /// The arrival process from --arrival and --burstiness.
    fn arrival(&self) -> Result<Arrival> {
        Ok(match (self.arrival, self.burstiness) {
            (ArrivalArg::Poisson, None) => Arrival::Poisson,
            (ArrivalArg::Constant, None) => Arrival::Constant,
            (ArrivalArg::Gamma, Some(burstiness)) => Arrival::Gamma { burstiness },
            (ArrivalArg::Gamma, None) => bail!("--arrival gamma needs --burstiness (e.g. 0.5)"),
            (_, Some(_)) => bail!("--burstiness applies to --arrival gamma"),
        })
    }

    /// The phase profile of --phases or --profile (a file's arrival process wins).
    fn phased_load(&self, arrival: Arrival) -> Result<Option<LoadSpec>> {
        let (phases, arrival) = match (&self.phases, &self.profile) {
            (Some(text), _) => (parse_phases(text).context("--phases")?, arrival),
            (None, Some(path)) => {
                let (phases, from_file) = ProfileFile::read(path)
                    .with_context(|| format!("--profile {}", path.display()))?;
                (phases, from_file)
            }
            (None, None) => return Ok(None),
        };
        Ok(Some(LoadSpec::Profile {
            phases,
            arrival,
            max_concurrency: self.max_concurrency,
        }))
    }
}

/// A `--warmup` value.
pub(crate) fn parse_warmup(text: &str) -> Result<Warmup> {
    let text = text.trim();
    if text == "0" || text.eq_ignore_ascii_case("none") {
        return Ok(Warmup::None);
    }
    if let Some(percent) = text.strip_suffix('%') {
        let percent: f64 = percent
            .trim()
            .parse()
            .with_context(|| format!("--warmup {text}: not a percentage"))?;
        return Ok(if percent == 0.0 {
            Warmup::None
        } else {
            Warmup::Fraction(percent / 100.0)
        });
    }
    if let Ok(count) = text.parse::<u64>() {
        return Ok(Warmup::Requests(count));
    }
    parse_duration(text).map(Warmup::Duration).with_context(|| {
        format!(
            "--warmup {text}: expected a percentage (10%), a request count (50) or a duration (5s)"
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn warmup_forms() {
        assert_eq!(parse_warmup("10%").unwrap(), Warmup::Fraction(0.1));
        assert_eq!(parse_warmup("50").unwrap(), Warmup::Requests(50));
        assert_eq!(
            parse_warmup("5s").unwrap(),
            Warmup::Duration(Duration::from_secs(5))
        );
        assert_eq!(parse_warmup("0").unwrap(), Warmup::None);
        assert!(parse_warmup("lots").is_err());
    }
}
