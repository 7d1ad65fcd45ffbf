//! Fault injection: which fault (if any) a request suffers, drawn once per request from its
//! seeded generator, and the point in the answer where a mid-answer fault strikes.

use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;

use crate::config::FaultConfig;

/// A fault to inject into one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Answer HTTP 500 with an error object.
    Http500,
    /// Answer HTTP 429 with `Retry-After`.
    Http429,
    /// Cut the connection after about half of the tokens.
    ResetMidStream,
    /// Send nothing more after about half of the tokens.
    StallMidStream,
    /// Send one line that is not JSON (streaming) or a truncated JSON body.
    MalformedSse,
    /// Send an error object after about half of the tokens.
    ErrorMidStream,
    /// Answer HTTP 400.
    Http400,
    /// Send nothing, not even the status line.
    StallBeforeResponse,
    /// Send one chunk whose JSON is cut off.
    InvalidJsonChunk,
    /// Send one line of bytes that are not UTF-8.
    SseGarbage,
    /// Send one line of many megabytes.
    OversizedLine,
    /// Never end the response (keep-alives only after about half of the tokens).
    EndlessResponse,
}

impl Fault {
    /// Draws the request's fault: one uniform number, matched against the cumulative rates in
    /// the order of [`FaultConfig::rates`].
    pub(crate) fn draw(config: &FaultConfig, rng: &mut Xoshiro256PlusPlus) -> Option<Fault> {
        let draw: f64 = rng.random();
        let mut cumulative = 0.0;
        for (name, rate) in config.rates() {
            cumulative += rate;
            if rate > 0.0 && draw < cumulative {
                return Fault::named(name);
            }
        }
        None
    }

    fn named(name: &str) -> Option<Fault> {
        match name {
            "http_500" => Some(Fault::Http500),
            "http_429" => Some(Fault::Http429),
            "reset_mid_stream" => Some(Fault::ResetMidStream),
            "stall_mid_stream" => Some(Fault::StallMidStream),
            "malformed_sse" => Some(Fault::MalformedSse),
            "error_mid_stream" => Some(Fault::ErrorMidStream),
            "http_400" => Some(Fault::Http400),
            "stall_before_response" => Some(Fault::StallBeforeResponse),
            "invalid_json_chunk" => Some(Fault::InvalidJsonChunk),
            "sse_garbage" => Some(Fault::SseGarbage),
            "oversized_line" => Some(Fault::OversizedLine),
            "endless_response" => Some(Fault::EndlessResponse),
            _ => None,
        }
    }

    /// The label under which an injected refusal is counted in
    /// `goodput_sim:requests_rejected_total`.
    pub(crate) fn rejection_reason(self) -> &'static str {
        match self {
            Fault::Http500 => "injected_http_500",
            Fault::Http429 => "injected_http_429",
            Fault::Http400 => "injected_http_400",
            _ => "injected_fault",
        }
    }
}

/// A fault that strikes once the answer has reached a number of tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PendingFault {
    /// The fault.
    pub(crate) fault: Fault,
    /// Tokens generated (over all choices) after which it strikes.
    pub(crate) after_tokens: u64,
}

impl PendingFault {
    /// `fault` striking after about half of `expected_tokens` (at least one token).
    pub(crate) fn halfway(fault: Fault, expected_tokens: u64) -> Self {
        PendingFault {
            fault,
            after_tokens: (expected_tokens / 2).max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn rates_select_faults_in_proportion() {
        let config = FaultConfig {
            http_500: 0.25,
            malformed_sse: 0.25,
            ..FaultConfig::default()
        };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let draws: Vec<Option<Fault>> = (0..10_000)
            .map(|_| Fault::draw(&config, &mut rng))
            .collect();
        let count = |fault| draws.iter().filter(|d| **d == fault).count();
        assert!((2300..2700).contains(&count(Some(Fault::Http500))));
        assert!((2300..2700).contains(&count(Some(Fault::MalformedSse))));
        assert!((4700..5300).contains(&count(None)));
    }

    #[test]
    fn rate_one_always_strikes_and_zero_never() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let always = FaultConfig {
            stall_mid_stream: 1.0,
            ..FaultConfig::default()
        };
        assert!((0..1000).all(|_| Fault::draw(&always, &mut rng) == Some(Fault::StallMidStream)));
        let never = FaultConfig::default();
        assert!((0..1000).all(|_| Fault::draw(&never, &mut rng).is_none()));
        assert_eq!(PendingFault::halfway(Fault::Http500, 1).after_tokens, 1);
        assert_eq!(PendingFault::halfway(Fault::Http500, 9).after_tokens, 4);
    }
}
