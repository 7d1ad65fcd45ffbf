//! Length distributions of prompts and answers, in tokens, and their command-line syntax:
//!
//! ```text
//! 512                                   fixed
//! uniform:128..1024                     uniform, both ends included
//! normal:mean=512,sd=128                normal (rounded, clamped to [min, max])
//! lognormal:median=512,sigma=0.8        log-normal (or mean=… instead of median=…)
//! pareto:scale=200,shape=1.5            Pareto type I (heavy tail; every draw ≥ scale)
//! mix:70%=128,25%=256..1024,5%=8000     a mixture of fixed lengths and uniform ranges
//! ```
//!
//! Continuous distributions take optional `min=` and `max=` bounds (default 1 and
//! [`MAX_LENGTH`]); draws are rounded to the nearest integer, then clamped. The canonical text
//! form ([`std::fmt::Display`]) parses back to the same distribution and is what reports show.

use std::fmt;
use std::str::FromStr;

use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;
use rand_distr::{Distribution, LogNormal, Normal, Pareto};

/// Longest length any distribution draws (2²⁰ tokens) unless `max=` says otherwise.
pub const MAX_LENGTH: u32 = 1 << 20;

/// Examples shown with every syntax error.
const EXAMPLES: &str = "expected e.g. 512, uniform:128..1024, normal:mean=512,sd=128, \
    lognormal:median=512,sigma=0.8, pareto:scale=200,shape=1.5 or mix:70%=128,25%=1024,5%=8000";

/// A length specification that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{spec}`: {problem}; {EXAMPLES}")]
pub struct LengthSpecError {
    /// The text as given.
    pub spec: String,
    /// What is wrong.
    pub problem: String,
}

/// Clamp applied to draws of a continuous distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    /// Smallest length drawn (at least 1).
    pub min: u32,
    /// Largest length drawn.
    pub max: u32,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            min: 1,
            max: MAX_LENGTH,
        }
    }
}

/// One part of a mixture: a share of the draws and the lengths it gives.
#[derive(Debug, Clone, PartialEq)]
pub struct MixComponent {
    /// Share of the draws, percent.
    pub percent: f64,
    /// Smallest length of the component.
    pub min: u32,
    /// Largest length of the component (= `min` for a fixed length).
    pub max: u32,
}

/// A distribution of lengths in tokens.
#[derive(Debug, Clone, PartialEq)]
pub enum LengthDistribution {
    /// Always the same length.
    Fixed(u32),
    /// Every integer in `[min, max]` equally likely.
    Uniform {
        /// Smallest length.
        min: u32,
        /// Largest length.
        max: u32,
    },
    /// Normal, rounded and clamped.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        sd: f64,
        /// Clamp.
        bounds: Bounds,
    },
    /// Log-normal: `ln(length)` is normal with mean `ln(median)` and deviation `sigma`.
    LogNormal {
        /// Median length.
        median: f64,
        /// Deviation of the logarithm.
        sigma: f64,
        /// Clamp.
        bounds: Bounds,
    },
    /// Pareto type I: `P(length > x) = (scale / x)^shape` for `x ≥ scale`.
    Pareto {
        /// Smallest length (the scale).
        scale: f64,
        /// Tail index; the mean is finite only above 1, the variance only above 2.
        shape: f64,
        /// Clamp.
        bounds: Bounds,
    },
    /// A mixture of fixed lengths and uniform ranges, e.g. 70 % short, 25 % medium, 5 % long.
    Mix(Vec<MixComponent>),
}

impl LengthDistribution {
    /// One draw.
    pub fn sample(&self, rng: &mut Xoshiro256PlusPlus) -> u32 {
        match self {
            LengthDistribution::Fixed(n) => *n,
            LengthDistribution::Uniform { min, max } => draw_between(rng, *min, *max),
            LengthDistribution::Normal { mean, sd, bounds } => {
                let draw = Normal::new(*mean, *sd).map_or(*mean, |d| d.sample(rng));
                clamp(draw, *bounds)
            }
            LengthDistribution::LogNormal {
                median,
                sigma,
                bounds,
            } => {
                let draw = LogNormal::new(median.ln(), *sigma).map_or(*median, |d| d.sample(rng));
                clamp(draw, *bounds)
            }
            LengthDistribution::Pareto {
                scale,
                shape,
                bounds,
            } => {
                let draw = Pareto::new(*scale, *shape).map_or(*scale, |d| d.sample(rng));
                clamp(draw, *bounds)
            }
            LengthDistribution::Mix(components) => {
                let mut point = rng.random::<f64>() * 100.0;
                for component in components {
                    if point < component.percent {
                        return draw_between(rng, component.min, component.max);
                    }
                    point -= component.percent;
                }
                components
                    .last()
                    .map_or(1, |c| draw_between(rng, c.min, c.max))
            }
        }
    }

    /// The mean before rounding and clamping (`None` for a Pareto tail without one).
    pub fn mean(&self) -> Option<f64> {
        match self {
            LengthDistribution::Fixed(n) => Some(f64::from(*n)),
            LengthDistribution::Uniform { min, max } => {
                Some((f64::from(*min) + f64::from(*max)) / 2.0)
            }
            LengthDistribution::Normal { mean, .. } => Some(*mean),
            LengthDistribution::LogNormal { median, sigma, .. } => {
                Some(median * (sigma * sigma / 2.0).exp())
            }
            LengthDistribution::Pareto { scale, shape, .. } => {
                (*shape > 1.0).then(|| shape * scale / (shape - 1.0))
            }
            LengthDistribution::Mix(components) => Some(
                components
                    .iter()
                    .map(|c| c.percent / 100.0 * (f64::from(c.min) + f64::from(c.max)) / 2.0)
                    .sum(),
            ),
        }
    }

    /// Whether every draw is the same length.
    pub fn is_fixed(&self) -> bool {
        matches!(self, LengthDistribution::Fixed(_))
    }
}

/// A uniform draw from `[a, b]` (either order).
fn draw_between(rng: &mut Xoshiro256PlusPlus, a: u32, b: u32) -> u32 {
    rng.random_range(a.min(b)..=a.max(b))
}

fn clamp(draw: f64, bounds: Bounds) -> u32 {
    if draw.is_nan() {
        return bounds.min;
    }
    let (low, high) = (bounds.min.min(bounds.max), bounds.max.max(bounds.min));
    let rounded = draw.round().clamp(f64::from(low), f64::from(high));
    rounded as u32
}

impl fmt::Display for LengthDistribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LengthDistribution::Fixed(n) => write!(f, "{n}"),
            LengthDistribution::Uniform { min, max } => write!(f, "uniform:{min}..{max}"),
            LengthDistribution::Normal { mean, sd, bounds } => {
                write!(f, "normal:mean={mean},sd={sd}{}", BoundsText(*bounds))
            }
            LengthDistribution::LogNormal {
                median,
                sigma,
                bounds,
            } => write!(
                f,
                "lognormal:median={median},sigma={sigma}{}",
                BoundsText(*bounds)
            ),
            LengthDistribution::Pareto {
                scale,
                shape,
                bounds,
            } => write!(
                f,
                "pareto:scale={scale},shape={shape}{}",
                BoundsText(*bounds)
            ),
            LengthDistribution::Mix(components) => {
                f.write_str("mix:")?;
                for (i, c) in components.iter().enumerate() {
                    let separator = if i > 0 { "," } else { "" };
                    if c.min == c.max {
                        write!(f, "{separator}{}%={}", c.percent, c.min)?;
                    } else {
                        write!(f, "{separator}{}%={}..{}", c.percent, c.min, c.max)?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// `,min=…,max=…` for bounds that differ from the defaults.
struct BoundsText(Bounds);

impl fmt::Display for BoundsText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let defaults = Bounds::default();
        if self.0.min != defaults.min {
            write!(f, ",min={}", self.0.min)?;
        }
        if self.0.max != defaults.max {
            write!(f, ",max={}", self.0.max)?;
        }
        Ok(())
    }
}

impl FromStr for LengthDistribution {
    type Err = LengthSpecError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let fail = |problem: String| LengthSpecError {
            spec: spec.to_string(),
            problem,
        };
        let text = spec.trim();
        let (kind, rest) = match text.split_once(':') {
            Some((kind, rest)) => (kind.trim().to_ascii_lowercase(), rest.trim()),
            None => return parse_count(text, "length").map(Self::Fixed).map_err(fail),
        };
        let parsed = match kind.as_str() {
            "fixed" => parse_count(rest, "length").map(Self::Fixed),
            "uniform" => parse_range(rest).map(|(min, max)| Self::Uniform { min, max }),
            "normal" => parse_normal(rest),
            "lognormal" | "log-normal" => parse_lognormal(rest),
            "pareto" => parse_pareto(rest),
            "mix" => parse_mix(rest),
            other => Err(format!("unknown distribution `{other}`")),
        };
        parsed.map_err(fail)
    }
}

/// A positive whole number of tokens.
fn parse_count(text: &str, what: &str) -> Result<u32, String> {
    let text = text.trim();
    if text.starts_with('-') {
        return Err(format!(
            "the {what} `{text}` is negative; lengths are at least 1"
        ));
    }
    let value: u32 = text
        .parse()
        .map_err(|_| format!("the {what} `{text}` is not a whole number of tokens"))?;
    if value == 0 {
        return Err(format!("the {what} must be at least 1"));
    }
    if value > MAX_LENGTH {
        return Err(format!(
            "the {what} {value} is above the limit of {MAX_LENGTH}"
        ));
    }
    Ok(value)
}

/// `A..B` with `1 ≤ A ≤ B`.
fn parse_range(text: &str) -> Result<(u32, u32), String> {
    let (min, max) = text
        .split_once("..")
        .ok_or_else(|| format!("`{text}` is not a range like 128..1024"))?;
    let (min, max) = (
        parse_count(min, "lower end")?,
        parse_count(max, "upper end")?,
    );
    if min > max {
        return Err(format!("the range {min}..{max} is empty"));
    }
    Ok((min, max))
}

/// `key=value` pairs, each key allowed once and among `allowed`.
fn parse_params<'a>(text: &'a str, allowed: &[&str]) -> Result<Vec<(&'a str, &'a str)>, String> {
    let mut params: Vec<(&str, &str)> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| format!("`{part}` is not key=value"))?;
        let key = key.trim();
        if !allowed.contains(&key) {
            return Err(format!(
                "unknown parameter `{key}` (allowed: {})",
                allowed.join(", ")
            ));
        }
        if params.iter().any(|(k, _)| *k == key) {
            return Err(format!("`{key}` is given twice"));
        }
        params.push((key, value.trim()));
    }
    Ok(params)
}

fn get<'a>(params: &[(&'a str, &'a str)], key: &str) -> Option<&'a str> {
    params.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

/// A required positive finite number.
fn positive(params: &[(&str, &str)], key: &str) -> Result<f64, String> {
    let text = get(params, key).ok_or_else(|| format!("`{key}=` is missing"))?;
    let value: f64 = text
        .parse()
        .map_err(|_| format!("`{key}={text}` is not a number"))?;
    if !(value.is_finite() && value > 0.0) {
        return Err(format!("`{key}` must be a positive number, got {text}"));
    }
    Ok(value)
}

fn bounds(params: &[(&str, &str)]) -> Result<Bounds, String> {
    let mut bounds = Bounds::default();
    if let Some(min) = get(params, "min") {
        bounds.min = parse_count(min, "min")?;
    }
    if let Some(max) = get(params, "max") {
        bounds.max = parse_count(max, "max")?;
    }
    if bounds.min > bounds.max {
        return Err(format!("min={} is above max={}", bounds.min, bounds.max));
    }
    Ok(bounds)
}

fn parse_normal(text: &str) -> Result<LengthDistribution, String> {
    let params = parse_params(text, &["mean", "sd", "min", "max"])?;
    Ok(LengthDistribution::Normal {
        mean: positive(&params, "mean")?,
        sd: positive(&params, "sd")?,
        bounds: bounds(&params)?,
    })
}

fn parse_lognormal(text: &str) -> Result<LengthDistribution, String> {
    let params = parse_params(text, &["median", "mean", "sigma", "min", "max"])?;
    let sigma = positive(&params, "sigma")?;
    let median = match (get(&params, "median"), get(&params, "mean")) {
        (Some(_), None) => positive(&params, "median")?,
        (None, Some(_)) => positive(&params, "mean")? / (sigma * sigma / 2.0).exp(),
        _ => return Err("give exactly one of `median=` and `mean=`".into()),
    };
    Ok(LengthDistribution::LogNormal {
        median,
        sigma,
        bounds: bounds(&params)?,
    })
}

fn parse_pareto(text: &str) -> Result<LengthDistribution, String> {
    let params = parse_params(text, &["scale", "shape", "min", "max"])?;
    Ok(LengthDistribution::Pareto {
        scale: positive(&params, "scale")?,
        shape: positive(&params, "shape")?,
        bounds: bounds(&params)?,
    })
}

fn parse_mix(text: &str) -> Result<LengthDistribution, String> {
    let mut components = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (share, lengths) = part
            .split_once('=')
            .ok_or_else(|| format!("`{part}` is not SHARE%=LENGTH"))?;
        let percent: f64 = share
            .trim()
            .strip_suffix('%')
            .ok_or_else(|| format!("the share `{share}` needs a % sign, e.g. 70%"))?
            .trim()
            .parse()
            .map_err(|_| format!("the share `{share}` is not a percentage"))?;
        if !(percent.is_finite() && percent > 0.0) {
            return Err(format!("the share `{share}` must be above 0 %"));
        }
        let (min, max) = if lengths.contains("..") {
            parse_range(lengths)?
        } else {
            let n = parse_count(lengths, "length")?;
            (n, n)
        };
        components.push(MixComponent { percent, min, max });
    }
    if components.is_empty() {
        return Err("a mixture needs at least one SHARE%=LENGTH part".into());
    }
    let total: f64 = components.iter().map(|c| c.percent).sum();
    if (total - 100.0).abs() > 0.01 {
        return Err(format!("the shares add up to {total} %, not 100 %"));
    }
    Ok(LengthDistribution::Mix(components))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use rand::SeedableRng;

    use super::*;

    fn draws(spec: &str, n: usize) -> Vec<u32> {
        let distribution: LengthDistribution = spec.parse().unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut values: Vec<u32> = (0..n).map(|_| distribution.sample(&mut rng)).collect();
        values.sort_unstable();
        values
    }

    fn mean(values: &[u32]) -> f64 {
        values.iter().map(|&v| f64::from(v)).sum::<f64>() / values.len() as f64
    }

    /// Nearest-rank percentile of sorted values.
    fn percentile(sorted: &[u32], p: f64) -> f64 {
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        f64::from(sorted[rank.max(1) - 1])
    }

    #[test]
    fn every_form_parses_and_prints_back() {
        for spec in [
            "512",
            "uniform:128..1024",
            "normal:mean=512,sd=128",
            "normal:mean=512,sd=128,min=64,max=900",
            "lognormal:median=512,sigma=0.8",
            "pareto:scale=200,shape=1.5,max=32768",
            "mix:70%=128,25%=256..1024,5%=8000",
        ] {
            let parsed: LengthDistribution = spec.parse().unwrap();
            assert_eq!(parsed.to_string(), spec);
            assert_eq!(
                parsed.to_string().parse::<LengthDistribution>().unwrap(),
                parsed
            );
        }
        let by_mean: LengthDistribution = "lognormal:mean=100,sigma=1".parse().unwrap();
        assert!((by_mean.mean().unwrap() - 100.0).abs() < 1e-9);
    }

    #[test]
    fn errors_say_what_is_wrong_and_show_an_example() {
        for (spec, problem) in [
            ("-5", "negative"),
            ("0", "at least 1"),
            ("lots", "not a whole number"),
            ("lognorm:median=5,sigma=1", "unknown distribution `lognorm`"),
            ("uniform:900..100", "empty"),
            ("normal:mean=5", "`sd=` is missing"),
            ("lognormal:median=5,sigma=1,mu=3", "unknown parameter `mu`"),
            ("pareto:scale=-2,shape=1", "positive"),
            ("mix:70%=128,20%=1024", "add up to 90 %"),
            ("mix:70=128,30%=5", "needs a % sign"),
        ] {
            let error = spec.parse::<LengthDistribution>().unwrap_err().to_string();
            assert!(error.contains(problem), "{spec}: {error}");
            assert!(error.contains("lognormal:median=512,sigma=0.8"), "{error}");
        }
    }

    #[test]
    fn draws_follow_each_distribution() {
        let fixed = draws("300", 100);
        assert!(fixed.iter().all(|&v| v == 300));
        let uniform = draws("uniform:100..200", 50_000);
        assert_eq!((uniform[0], uniform[uniform.len() - 1]), (100, 200));
        assert!((mean(&uniform) - 150.0).abs() < 1.0);
        let normal = draws("normal:mean=500,sd=50", 50_000);
        assert!((mean(&normal) - 500.0).abs() < 1.5);
        assert!((percentile(&normal, 50.0) - 500.0).abs() <= 2.0);
        // Log-normal: mean = median·e^(σ²/2), p99 = median·e^(2.326σ).
        let lognormal = draws("lognormal:median=512,sigma=0.5", 100_000);
        let expected_mean = 512.0 * (0.125f64).exp();
        assert!((mean(&lognormal) / expected_mean - 1.0).abs() < 0.01);
        let expected_p99 = 512.0 * (2.326_348 * 0.5f64).exp();
        assert!((percentile(&lognormal, 99.0) / expected_p99 - 1.0).abs() < 0.02);
        // Pareto: p50 = scale·2^(1/shape); nothing below the scale.
        let pareto = draws("pareto:scale=200,shape=1.5", 100_000);
        assert!(pareto[0] >= 200);
        let expected_p50 = 200.0 * 2f64.powf(1.0 / 1.5);
        assert!((percentile(&pareto, 50.0) / expected_p50 - 1.0).abs() < 0.02);
        let mix = draws("mix:70%=128,25%=1024,5%=8000", 100_000);
        let share = |v: u32| mix.iter().filter(|&&x| x == v).count() as f64 / mix.len() as f64;
        assert!((share(128) - 0.70).abs() < 0.01);
        assert!((share(1024) - 0.25).abs() < 0.01);
        assert!((share(8000) - 0.05).abs() < 0.005);
    }

    #[test]
    fn bounds_clamp_heavy_tails() {
        let clamped = draws("pareto:scale=100,shape=0.5,max=5000", 10_000);
        assert!(clamped.iter().all(|&v| (100..=5000).contains(&v)));
        assert!(clamped.contains(&5000));
        let floor = draws("normal:mean=10,sd=50,min=5", 10_000);
        assert!(floor.iter().all(|&v| v >= 5));
    }
}
