//! What the live view draws: a header (target, load), progress (elapsed, remaining), rates
//! (offered vs completed, in flight, tokens/s), latency percentiles so far, failures, and a
//! sparkline of output tokens per second.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use goodput_core::observe::live::{LivePercentiles, LiveSnapshot};
use goodput_core::runner::Progress;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Gauge, Paragraph, Row, Sparkline, Table};

/// What the run is meant to do, for the header and the remaining time.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// Target and model, one line.
    pub(crate) title: String,
    /// The load, one line.
    pub(crate) load: String,
    /// Scheduling stops after this long.
    pub(crate) duration: Option<Duration>,
    /// Scheduling stops after this many requests.
    pub(crate) max_requests: Option<u64>,
}

/// Seconds over which rates are averaged.
const RATE_WINDOW: Duration = Duration::from_secs(5);

/// Rolling state of the screen: counter samples for rates.
#[derive(Debug)]
pub(crate) struct Screen {
    started: Instant,
    samples: VecDeque<(Instant, Progress)>,
}

impl Screen {
    pub(crate) fn new(started: Instant) -> Self {
        Screen {
            started,
            samples: VecDeque::new(),
        }
    }

    /// Records the counters now.
    pub(crate) fn sample(&mut self, progress: Progress) {
        let now = Instant::now();
        self.samples.push_back((now, progress));
        while self
            .samples
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > RATE_WINDOW)
            && self.samples.len() > 2
        {
            self.samples.pop_front();
        }
    }

    /// Per-second change of a counter over the rate window.
    fn rate(&self, counter: impl Fn(&Progress) -> u64) -> f64 {
        match (self.samples.front(), self.samples.back()) {
            (Some((t0, p0)), Some((t1, p1))) if t1 > t0 => {
                (counter(p1).saturating_sub(counter(p0))) as f64 / (*t1 - *t0).as_secs_f64()
            }
            _ => 0.0,
        }
    }

    pub(crate) fn draw(
        &self,
        frame: &mut Frame<'_>,
        plan: &Plan,
        live: &LiveSnapshot,
        stopping: bool,
    ) {
        let progress = self.samples.back().map(|(_, p)| *p).unwrap_or_default();
        let areas = Layout::vertical([
            Constraint::Length(3),
            Constraint::Length(4),
            Constraint::Length(6),
            Constraint::Length(10),
            Constraint::Length(1),
            Constraint::Min(0),
        ])
        .split(frame.area());
        let header = Paragraph::new(vec![
            Line::from(Span::styled(
                plan.title.clone(),
                Style::default().add_modifier(Modifier::BOLD),
            )),
            Line::from(plan.load.clone()),
        ])
        .block(
            Block::default()
                .borders(Borders::BOTTOM)
                .title(" goodput run "),
        );
        frame.render_widget(header, areas[0]);
        frame.render_widget(self.progress_gauge(plan, &progress), areas[1]);
        frame.render_widget(self.figures(&progress, live), areas[2]);
        let history: Vec<u64> = live.per_second.iter().map(|s| s.output_tokens).collect();
        let width = usize::from(areas[3].width.saturating_sub(2));
        let shown = &history[history.len().saturating_sub(width)..];
        frame.render_widget(
            Sparkline::default()
                .block(
                    Block::default()
                        .borders(Borders::ALL)
                        .title(" output tokens per second "),
                )
                .data(shown)
                .style(Style::default().fg(Color::Cyan)),
            areas[3],
        );
        let footer = if stopping {
            Line::from(Span::styled(
                "stopping: cancelling in-flight requests…",
                Style::default().fg(Color::Yellow),
            ))
        } else {
            Line::from("q / Ctrl-C: stop the run (results are kept)")
        };
        frame.render_widget(Paragraph::new(footer), areas[4]);
    }

    fn progress_gauge(&self, plan: &Plan, progress: &Progress) -> Gauge<'static> {
        let elapsed = self.started.elapsed();
        let (ratio, remaining) = match (plan.duration, plan.max_requests) {
            (Some(total), _) => (
                elapsed.as_secs_f64() / total.as_secs_f64().max(1e-9),
                format!("{:.0} s left", total.saturating_sub(elapsed).as_secs_f64()),
            ),
            (None, Some(total)) => (
                progress.scheduled as f64 / total.max(1) as f64,
                format!("{} requests left", total.saturating_sub(progress.scheduled)),
            ),
            (None, None) => (0.0, String::new()),
        };
        let label = format!("elapsed {:.0} s · {remaining}", elapsed.as_secs_f64());
        Gauge::default()
            .block(Block::default().borders(Borders::ALL).title(" progress "))
            .gauge_style(Style::default().fg(Color::Green))
            .ratio(ratio.clamp(0.0, 1.0))
            .label(label)
    }

    fn figures(&self, progress: &Progress, live: &LiveSnapshot) -> Table<'static> {
        let ms = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.1}"));
        let latency = |name: &str, p: &LivePercentiles| {
            Row::new(vec![
                name.to_string(),
                ms(p.p50),
                ms(p.p90),
                ms(p.p99),
                p.count.to_string(),
            ])
        };
        let failed: Vec<String> = live
            .failed_by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let rates = format!(
            "offered {:.1} req/s · completed {:.1} req/s · in flight {} · {:.0} output tok/s",
            self.rate(|p| p.scheduled),
            self.rate(|p| p.completed),
            progress.in_flight,
            self.rate(|p| p.output_tokens)
        );
        let counts = format!(
            "scheduled {} · completed {} · failed {}{}",
            progress.scheduled,
            progress.completed,
            progress.failed,
            if failed.is_empty() {
                String::new()
            } else {
                format!(" ({})", failed.join(", "))
            }
        );
        Table::new(
            vec![
                latency("TTFT", &live.ttft),
                latency("TPOT", &live.tpot),
                latency("E2E", &live.e2e),
            ],
            [
                Constraint::Length(8),
                Constraint::Length(10),
                Constraint::Length(10),
                Constraint::Length(10),
                Constraint::Length(8),
            ],
        )
        .header(
            Row::new(vec!["ms", "p50", "p90", "p99", "n"])
                .style(Style::default().add_modifier(Modifier::BOLD)),
        )
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(format!(" {rates} "))
                .title_bottom(format!(" {counts} ")),
        )
    }
}
