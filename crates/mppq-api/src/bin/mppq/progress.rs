//! The terminal progress bar of the `mppq` program (indicatif): one bar per pass or stage, drawn
//! on stderr, and nothing at all when stderr is not a terminal (logs and CI stay clean).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mppq_api::passes::ProgressSink;
use std::io::IsTerminal;

/// A progress bar on stderr; hidden (draws nothing) when stderr is not a terminal, so logs
/// and CI output stay clean.
#[derive(Debug, Default)]
pub struct TerminalProgress {
    bar: Option<ProgressBar>,
    task: String,
}

impl TerminalProgress {
    pub fn new() -> Self {
        Self { bar: None, task: String::new() }
    }

    /// Whether bars are drawn (stderr is a terminal).
    pub fn draws(&self) -> bool {
        std::io::stderr().is_terminal()
    }
}

impl ProgressSink for TerminalProgress {
    fn begin(&mut self, task: &str, total: u64) {
        self.finish();
        let target = if self.draws() { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let bar = ProgressBar::with_draw_target(Some(total), target);
        // The template is a constant; if indicatif ever rejects it, fall back to its default.
        if let Ok(style) = ProgressStyle::with_template("{msg:32} [{bar:30}] {pos}/{len} {elapsed}") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(task.to_string());
        self.bar = Some(bar);
        self.task = task.to_string();
    }

    fn note(&mut self, text: &str) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{} · {text}", self.task));
        }
    }

    fn advance(&mut self, n: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(n);
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_progress_survives_any_call_order() {
        let mut p = TerminalProgress::new();
        p.advance(3);
        p.finish();
        p.begin("task", 4);
        p.advance(2);
        assert_eq!(p.bar.as_ref().map(|b| b.position()), Some(2));
        p.begin("next", 1);
        assert_eq!(p.bar.as_ref().map(|b| b.position()), Some(0));
        p.finish();
        assert!(p.bar.is_none());
    }
}
