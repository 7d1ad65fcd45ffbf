//! Terminal colours: only when the stream is a terminal and `NO_COLOR` is unset or empty
//! (<https://no-color.org>). Colouring is applied to finished text, so every renderer stays
//! plain and testable.

use std::io::IsTerminal;

const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const YELLOW: &str = "\x1b[33m";
const BOLD: &str = "\x1b[1m";
const RESET: &str = "\x1b[0m";

/// Whether to colour output written to stdout.
pub(crate) fn stdout_enabled() -> bool {
    std::io::stdout().is_terminal() && no_color_unset()
}

fn no_color_unset() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Colours the verdict words of a rendered summary or gate: PASS green, FAIL / UNSTABLE /
/// regression red, warning lines yellow, section headings bold.
pub(crate) fn paint(text: &str, enabled: bool) -> String {
    if !enabled {
        return text.to_string();
    }
    text.lines()
        .map(|line| {
            let trimmed = line.trim_start();
            if trimmed.starts_with("! ") || trimmed.starts_with("warning:") {
                return format!("{YELLOW}{line}{RESET}");
            }
            if !line.starts_with(' ') && !line.is_empty() && !line.contains("  ") {
                return format!("{BOLD}{line}{RESET}");
            }
            line.replace("PASS", &format!("{GREEN}PASS{RESET}"))
                .replace("FAIL", &format!("{RED}FAIL{RESET}"))
                .replace("UNSTABLE", &format!("{RED}UNSTABLE{RESET}"))
                .replace("regression", &format!("{RED}regression{RESET}"))
                .replace("improvement", &format!("{GREEN}improvement{RESET}"))
        })
        .collect::<Vec<_>>()
        .join("\n")
        + if text.ends_with('\n') { "\n" } else { "" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_unless_enabled() {
        let text = "Goodput\n  ttft_p99 ≤ 10 ms: 12 ms → FAIL\n  ! few samples\n";
        assert_eq!(paint(text, false), text);
        let painted = paint(text, true);
        assert!(painted.contains("\x1b[31mFAIL\x1b[0m"));
        assert!(painted.contains("\x1b[33m  ! few samples\x1b[0m"));
        assert!(painted.ends_with('\n'));
    }
}
