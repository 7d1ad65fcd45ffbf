//! What the live view draws: a header (target, load), progress (elapsed, remaining, on its own
//! line above the bar, never over it), rates (offered vs completed, in flight, tokens/s),
//! latency percentiles so far, failures, and a sparkline of output tokens per second. A
//! terminal smaller than the boxes need gets the same figures as plain lines.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use goodput_core::observe::live::{LivePercentiles, LiveSnapshot};
use goodput_core::runner::Progress;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Sparkline, Table};

use super::{MIN_COLUMNS, MIN_ROWS};

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

/// The title and load lines above the boxes.
fn header(plan: &Plan) -> Paragraph<'static> {
    Paragraph::new(vec![
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
    )
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
        let area = frame.area();
        let footer = if stopping {
            Line::from(Span::styled(
                "stopping: cancelling in-flight requests…",
                Style::default().fg(Color::Yellow),
            ))
        } else {
            Line::from("q / Ctrl-C: stop the run (results are kept)")
        };
        if area.width < MIN_COLUMNS || area.height < MIN_ROWS {
            let mut lines = self.plain_lines(plan, &progress, live);
            lines.push(footer);
            frame.render_widget(Paragraph::new(lines), area);
            return;
        }
        let areas = Layout::vertical([
            Constraint::Length(3),
            Constraint::Length(4),
            Constraint::Length(6),
            Constraint::Length(10),
            Constraint::Length(1),
            Constraint::Min(0),
        ])
        .split(area);
        frame.render_widget(header(plan), areas[0]);
        let bar_width = usize::from(areas[1].width.saturating_sub(2));
        frame.render_widget(self.progress_box(plan, &progress, bar_width), areas[1]);
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
        frame.render_widget(Paragraph::new(footer), areas[4]);
    }

    /// How far the run is (0–1) and the words for it.
    fn progress_text(&self, plan: &Plan, progress: &Progress) -> (f64, String) {
        let elapsed = self.started.elapsed();
        let (ratio, remaining) = match (plan.duration, plan.max_requests) {
            (Some(total), _) => (
                elapsed.as_secs_f64() / total.as_secs_f64().max(1e-9),
                format!(
                    " · {:.0} s left",
                    total.saturating_sub(elapsed).as_secs_f64()
                ),
            ),
            (None, Some(total)) => (
                progress.scheduled as f64 / total.max(1) as f64,
                format!(
                    " · {} requests left",
                    total.saturating_sub(progress.scheduled)
                ),
            ),
            (None, None) => (0.0, String::new()),
        };
        let ratio = ratio.clamp(0.0, 1.0);
        let percent = if plan.duration.is_some() || plan.max_requests.is_some() {
            format!(" · {:.0} %", ratio * 100.0)
        } else {
            String::new()
        };
        (
            ratio,
            format!("elapsed {:.0} s{remaining}{percent}", elapsed.as_secs_f64()),
        )
    }

    /// The progress text on its own line, the bar on the next: the text never covers the bar.
    fn progress_box(&self, plan: &Plan, progress: &Progress, width: usize) -> Paragraph<'static> {
        let (ratio, label) = self.progress_text(plan, progress);
        let filled = ((ratio * width as f64).round() as usize).min(width);
        Paragraph::new(vec![
            Line::from(label),
            Line::from(vec![
                Span::styled("█".repeat(filled), Style::default().fg(Color::Green)),
                Span::styled(
                    "░".repeat(width - filled),
                    Style::default().fg(Color::DarkGray),
                ),
            ]),
        ])
        .block(Block::default().borders(Borders::ALL).title(" progress "))
    }

    /// Every figure of the view as plain lines, for a small terminal.
    fn plain_lines(
        &self,
        plan: &Plan,
        progress: &Progress,
        live: &LiveSnapshot,
    ) -> Vec<Line<'static>> {
        let ms = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.0}"));
        let latency = |name: &str, p: &LivePercentiles| {
            format!("{name} p50 {} · p99 {} ms", ms(p.p50), ms(p.p99))
        };
        let (_, label) = self.progress_text(plan, progress);
        [
            format!("goodput run · {}", plan.title),
            plan.load.clone(),
            label,
            self.rates(progress),
            self.counts(progress, live),
            latency("TTFT", &live.ttft),
            latency("TPOT", &live.tpot),
            latency("E2E", &live.e2e),
        ]
        .into_iter()
        .map(Line::from)
        .collect()
    }

    fn rates(&self, progress: &Progress) -> String {
        format!(
            "offered {:.1} req/s · completed {:.1} req/s · in flight {} · {:.0} output tok/s",
            self.rate(|p| p.scheduled),
            self.rate(|p| p.completed),
            progress.in_flight,
            self.rate(|p| p.output_tokens)
        )
    }

    fn counts(&self, progress: &Progress, live: &LiveSnapshot) -> String {
        let failed: Vec<String> = live
            .failed_by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        format!(
            "scheduled {} · completed {} · failed {}{}",
            progress.scheduled,
            progress.completed,
            progress.failed,
            if failed.is_empty() {
                String::new()
            } else {
                format!(" ({})", failed.join(", "))
            }
        )
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
        let rates = self.rates(progress);
        let counts = self.counts(progress, live);
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::*;

    fn screen_text(width: u16, height: u16) -> Vec<String> {
        let plan = Plan {
            title: "http://127.0.0.1:1 · model m".into(),
            load: "open loop, poisson arrivals at 10 req/s".into(),
            duration: Some(Duration::from_secs(3600)),
            max_requests: None,
        };
        let mut screen = Screen::new(Instant::now());
        screen.sample(Progress::default());
        let mut terminal = Terminal::new(TestBackend::new(width, height)).unwrap();
        terminal
            .draw(|frame| screen.draw(frame, &plan, &LiveSnapshot::default(), false))
            .unwrap();
        let buffer = terminal.backend().buffer().clone();
        (0..height)
            .map(|y| {
                (0..width)
                    .map(|x| buffer[(x, y)].symbol().to_string())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn the_progress_text_is_on_its_own_line_above_the_bar() {
        let lines = screen_text(100, 30);
        let text = lines.iter().position(|l| l.contains("elapsed")).unwrap();
        assert!(
            lines[text].contains("s left") && lines[text].contains("%"),
            "{lines:#?}"
        );
        assert!(
            !lines[text].contains('█') && !lines[text].contains('░'),
            "text over the bar"
        );
        let bar = &lines[text + 1];
        assert!(bar.contains('░'), "the bar follows the text: {lines:#?}");
        assert!(
            bar.chars().all(|c| matches!(c, '█' | '░' | '│' | ' ')),
            "nothing written over the bar: {bar}"
        );
    }

    #[test]
    fn a_small_terminal_gets_plain_lines() {
        let lines = screen_text(50, 14);
        assert!(lines[0].starts_with("goodput run · "), "{lines:#?}");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("elapsed 0 s · 3600 s left"))
        );
        assert!(lines.iter().any(|l| l.starts_with("TTFT p50 – · p99 – ms")));
        assert!(
            lines.iter().all(|l| !l.contains('│') && !l.contains('─')),
            "no boxes: {lines:#?}"
        );
    }
}
