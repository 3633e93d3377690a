//! Progress reporting for long passes: a small sink trait, a no-op sink and a recording one
//! (tests). Drawing is the front end's business: the `mppq` program draws a terminal bar.

/// Receives progress of one task at a time: `begin`, any number of `advance`, `finish`.
pub trait ProgressSink {
    fn begin(&mut self, task: &str, total: u64);
    fn advance(&mut self, n: u64);
    fn finish(&mut self);
    /// A short status shown with the running task (a training loss, say); ignored by default.
    fn note(&mut self, _text: &str) {}
}

/// Ignores progress (tests, libraries).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl ProgressSink for NoProgress {
    fn begin(&mut self, _task: &str, _total: u64) {}
    fn advance(&mut self, _n: u64) {}
    fn finish(&mut self) {}
}

/// Records every event (for tests of progress reporting).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordingProgress {
    pub events: Vec<String>,
}

impl ProgressSink for RecordingProgress {
    fn begin(&mut self, task: &str, total: u64) {
        self.events.push(format!("begin {task} {total}"));
    }
    fn advance(&mut self, n: u64) {
        self.events.push(format!("advance {n}"));
    }
    fn finish(&mut self) {
        self.events.push("finish".into());
    }
}
