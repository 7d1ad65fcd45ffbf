//! Agentic sessions: some turns of a multi-turn session feed a tool's result back instead of a
//! user message — after the tool's latency rather than the user's think time — so the context
//! grows with tool output as it does for coding and browsing agents.
//! `--agent tool-prob=0.5,tool-latency=200ms,result-tokens=500`.

use std::fmt;

use rand::RngExt;
use serde_json::{Value, json};

use super::generated::stream;
use super::lengths::LengthDistribution;
use super::session::ThinkTime;

const TOOL_DRAW: u64 = 0x7001;

/// How a synthetic session's turns become tool results.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentTurns {
    /// Probability that a turn after the first is a tool result.
    pub tool_probability: f64,
    /// Time the tool takes: from the reply's end to the tool result being sent.
    pub tool_latency: ThinkTime,
    /// Length of each tool result.
    pub result_tokens: LengthDistribution,
}

impl AgentTurns {
    /// Parses `tool-prob=P,tool-latency=D,result-tokens=N|DIST` (every key required; the
    /// latency takes `exp:` like `--think-time`).
    pub fn parse(text: &str) -> Result<AgentTurns, String> {
        let (mut probability, mut latency, mut result) = (None, None, None);
        let mut rest = text.trim();
        while !rest.is_empty() {
            let (key, tail) = rest
                .split_once('=')
                .ok_or_else(|| format!("`{rest}`: expected key=value"))?;
            // A value runs to the next `,key=` (distributions contain commas).
            let end = ["tool-prob=", "tool-latency=", "result-tokens="]
                .iter()
                .filter_map(|next| tail.find(&format!(",{next}")))
                .min()
                .unwrap_or(tail.len());
            let value = &tail[..end];
            rest = tail[end..].trim_start_matches(',');
            match key.trim() {
                "tool-prob" => {
                    let p: f64 = value
                        .parse()
                        .map_err(|_| format!("tool-prob: `{value}` is not a number"))?;
                    if !(0.0..=1.0).contains(&p) {
                        return Err(format!("tool-prob: {p} is not between 0 and 1"));
                    }
                    probability = Some(p);
                }
                "tool-latency" => latency = Some(ThinkTime::parse(value)?),
                "result-tokens" => {
                    result = Some(value.parse().map_err(|e| format!("result-tokens: {e}"))?);
                }
                other => {
                    return Err(format!(
                        "unknown key `{other}`; expected tool-prob, tool-latency, result-tokens"
                    ));
                }
            }
        }
        let missing = |key: &str| {
            format!("missing {key}= (e.g. tool-prob=0.5,tool-latency=200ms,result-tokens=500)")
        };
        Ok(AgentTurns {
            tool_probability: probability.ok_or_else(|| missing("tool-prob"))?,
            tool_latency: latency.ok_or_else(|| missing("tool-latency"))?,
            result_tokens: result.ok_or_else(|| missing("result-tokens"))?,
        })
    }

    /// Whether turn `turn` (> 0) of `session` is a tool result.
    pub fn is_tool_result(&self, seed: u64, session: u64, turn: u64) -> bool {
        if turn == 0 || self.tool_probability <= 0.0 {
            return false;
        }
        let mut rng = stream(seed, TOOL_DRAW, session.wrapping_mul(1 << 20) ^ turn);
        rng.random::<f64>() < self.tool_probability
    }

    /// The description recorded in `run.workload`.
    pub fn describe(&self) -> Value {
        json!({
            "tool_probability": self.tool_probability,
            "tool_latency": self.tool_latency.to_string(),
            "result_tokens": self.result_tokens.to_string(),
        })
    }
}

impl fmt::Display for AgentTurns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "tool-prob={},tool-latency={},result-tokens={}",
            self.tool_probability, self.tool_latency, self.result_tokens
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_and_rejects_with_reasons() {
        let agent =
            AgentTurns::parse("tool-prob=0.5,tool-latency=exp:200ms,result-tokens=uniform:10..20")
                .unwrap();
        assert_eq!(agent.tool_probability, 0.5);
        assert_eq!(
            agent.to_string(),
            "tool-prob=0.5,tool-latency=exp:200ms,result-tokens=uniform:10..20"
        );
        for (text, needle) in [
            (
                "tool-prob=2,tool-latency=1s,result-tokens=5",
                "between 0 and 1",
            ),
            ("tool-prob=0.5,result-tokens=5", "missing tool-latency"),
            ("speed=1", "unknown key"),
            ("tool-prob", "key=value"),
        ] {
            let error = AgentTurns::parse(text).unwrap_err();
            assert!(error.contains(needle), "{text}: {error}");
        }
    }

    #[test]
    fn the_share_of_tool_turns_follows_the_probability() {
        let agent = AgentTurns::parse("tool-prob=0.3,tool-latency=0s,result-tokens=5").unwrap();
        let tools = (0..4000).filter(|&s| agent.is_tool_result(1, s, 1)).count();
        assert!((tools as f64 / 4000.0 - 0.3).abs() < 0.03, "{tools}");
        assert!(
            !agent.is_tool_result(1, 5, 0),
            "the first turn is the user's"
        );
    }
}
