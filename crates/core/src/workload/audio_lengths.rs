//! How long each request's audio is (`--audio-seconds`): a number of seconds (fractions
//! allowed, e.g. `0.4`), or a distribution in the syntax of token lengths
//! ([`LengthDistribution`]) read in seconds — `uniform:1..10`, `normal:mean=5,sd=1`,
//! `lognormal:median=4,sigma=0.5`, `pareto:scale=2,shape=1.5`, `mix:80%=2,20%=10..30` — whose
//! whole-second values (ranges, mixes, `min=`/`max=` bounds) and fractional parameters are
//! drawn to the millisecond. Continuous draws are clamped to [0.1 s, 3600 s] unless `min=` or
//! `max=` say otherwise. Request `i`'s length is drawn from the seed and `i` alone, so every
//! load, shard and repeat with the same seed sends the same audio.

use std::fmt;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;

use super::lengths::{Bounds, LengthDistribution, MixComponent};
use super::mix_seed;

/// Longest audio a request may send, in seconds.
pub const MAX_AUDIO_SECONDS: u32 = 3600;
/// Shortest continuous draw when no `min=` is given, in milliseconds.
const DEFAULT_MIN_MS: u32 = 100;
/// Purpose tag mixed into the seed (independent of the prompts' draws).
const AUDIO_TAG: u64 = 0xa0d1_05ec;

/// Why an `--audio-seconds` value cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{spec}`: {problem}")]
pub struct AudioLengthsError {
    /// The text as given.
    pub spec: String,
    /// What is wrong.
    pub problem: String,
}

/// The length of each request's audio.
#[derive(Debug, Clone, PartialEq)]
pub struct AudioLengths {
    /// The distribution in milliseconds.
    millis: LengthDistribution,
    /// The run's seed.
    seed: u64,
    /// The text as given (trimmed), what reports show.
    text: String,
}

impl AudioLengths {
    /// Parses `spec` (see the module's syntax) for a run seeded with `seed`.
    pub fn parse(spec: &str, seed: u64) -> Result<AudioLengths, AudioLengthsError> {
        let fail = |problem: String| AudioLengthsError {
            spec: spec.to_string(),
            problem,
        };
        let text = spec.trim();
        let millis = match text.parse::<f64>() {
            Ok(seconds) => {
                if !(seconds.is_finite()
                    && seconds > 0.0
                    && seconds <= f64::from(MAX_AUDIO_SECONDS))
                {
                    return Err(fail(format!("must be in (0, {MAX_AUDIO_SECONDS}] seconds")));
                }
                LengthDistribution::Fixed(((seconds * 1000.0).round() as u32).max(1))
            }
            Err(_) => {
                let seconds: LengthDistribution =
                    text.parse().map_err(|e: super::lengths::LengthSpecError| {
                        fail(format!("{}; or a number of seconds such as 2.5", e.problem))
                    })?;
                to_millis(&seconds).map_err(fail)?
            }
        };
        Ok(AudioLengths {
            millis,
            seed,
            text: text.to_string(),
        })
    }

    /// The one length every request sends, when the value is a number.
    pub fn fixed(&self) -> Option<Duration> {
        match self.millis {
            LengthDistribution::Fixed(ms) => Some(Duration::from_millis(u64::from(ms))),
            _ => None,
        }
    }

    /// The audio request `index` sends.
    pub fn draw(&self, index: u64) -> Duration {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix_seed(self.seed ^ AUDIO_TAG, index));
        Duration::from_millis(u64::from(self.millis.sample(&mut rng).max(1)))
    }

    /// The mean length in seconds (`None` for a Pareto tail without one).
    pub fn mean_seconds(&self) -> Option<f64> {
        self.millis.mean().map(|ms| ms / 1000.0)
    }
}

impl fmt::Display for AudioLengths {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Whole seconds as milliseconds, checked: more than 0, at most [`MAX_AUDIO_SECONDS`].
fn ms(seconds: u32) -> Result<u32, String> {
    match seconds {
        0 => Err("every length must be more than 0 s".into()),
        s if s > MAX_AUDIO_SECONDS => Err(format!("{s} s is longer than {MAX_AUDIO_SECONDS} s")),
        s => Ok(s * 1000),
    }
}

/// Bounds in seconds as milliseconds; the defaults become [0.1 s, 3600 s].
fn bounds(given: Bounds) -> Result<Bounds, String> {
    let defaults = Bounds::default();
    Ok(Bounds {
        min: if given.min == defaults.min {
            DEFAULT_MIN_MS
        } else {
            ms(given.min)?
        },
        max: if given.max == defaults.max {
            MAX_AUDIO_SECONDS * 1000
        } else {
            ms(given.max)?
        },
    })
}

/// A distribution of seconds as one of milliseconds, checked against the limits.
fn to_millis(seconds: &LengthDistribution) -> Result<LengthDistribution, String> {
    Ok(match seconds {
        LengthDistribution::Fixed(s) => LengthDistribution::Fixed(ms(*s)?),
        LengthDistribution::Uniform { min, max } => LengthDistribution::Uniform {
            min: ms(*min)?,
            max: ms(*max)?,
        },
        LengthDistribution::Normal {
            mean,
            sd,
            bounds: b,
        } => LengthDistribution::Normal {
            mean: mean * 1000.0,
            sd: sd * 1000.0,
            bounds: bounds(*b)?,
        },
        LengthDistribution::LogNormal {
            median,
            sigma,
            bounds: b,
        } => LengthDistribution::LogNormal {
            median: median * 1000.0,
            sigma: *sigma,
            bounds: bounds(*b)?,
        },
        LengthDistribution::Pareto {
            scale,
            shape,
            bounds: b,
        } => LengthDistribution::Pareto {
            scale: scale * 1000.0,
            shape: *shape,
            bounds: bounds(*b)?,
        },
        LengthDistribution::Mix(components) => LengthDistribution::Mix(
            components
                .iter()
                .map(|c| {
                    Ok(MixComponent {
                        percent: c.percent,
                        min: ms(c.min)?,
                        max: ms(c.max)?,
                    })
                })
                .collect::<Result<_, String>>()?,
        ),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn numbers_are_fixed_and_distributions_draw_per_index() {
        let fixed = AudioLengths::parse("0.4", 1).unwrap();
        assert_eq!(fixed.fixed(), Some(Duration::from_millis(400)));
        assert_eq!(fixed.draw(7), Duration::from_millis(400));
        let uniform = AudioLengths::parse("uniform:1..10", 5).unwrap();
        assert_eq!(uniform.fixed(), None);
        let draws: Vec<Duration> = (0..200).map(|i| uniform.draw(i)).collect();
        assert!(
            draws
                .iter()
                .all(|d| (1000..=10_000).contains(&d.as_millis()))
        );
        assert!(draws.iter().any(|d| *d != draws[0]), "{draws:?}");
        // Deterministic per seed and index, different for another seed.
        let again = AudioLengths::parse("uniform:1..10", 5).unwrap();
        assert_eq!(draws[17], again.draw(17));
        let other = AudioLengths::parse("uniform:1..10", 6).unwrap();
        assert!((0..20).any(|i| other.draw(i) != uniform.draw(i)));
        let normal = AudioLengths::parse("normal:mean=5,sd=1", 2).unwrap();
        let mean = (0..2000).map(|i| normal.draw(i).as_secs_f64()).sum::<f64>() / 2000.0;
        assert!((mean - 5.0).abs() < 0.1, "{mean}");
        assert_eq!(normal.mean_seconds(), Some(5.0));
        assert_eq!(uniform.to_string(), "uniform:1..10");
    }

    #[test]
    fn bad_values_name_the_problem() {
        for (bad, problem) in [
            ("0", "(0, 3600]"),
            ("-1", "(0, 3600]"),
            ("4000", "(0, 3600]"),
            ("uniform:0..3", "at least 1"),
            ("uniform:1..4000", "longer than 3600"),
            ("gauss:1", "unknown distribution"),
            ("abc", "number of seconds"),
        ] {
            let error = AudioLengths::parse(bad, 0).unwrap_err();
            assert!(error.to_string().contains(problem), "{bad}: {error}");
        }
    }
}
