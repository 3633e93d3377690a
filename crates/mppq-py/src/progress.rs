//! Progress of long work, reported to a Python object while the GIL is released, and Ctrl-C.
//!
//! Every progress event (a batch done, a pass begun) takes the GIL for a moment: it calls the
//! Python reporter's `begin(task, total)`, `advance(n)`, `finish()` or `note(text)` and checks
//! for signals. On Ctrl-C (or an exception raised by the reporter) it asks every executor to stop
//! ([`mppq_api::exec::cancel`]): the run ends at its next graph run, between batches, and the
//! caller re-raises the `KeyboardInterrupt`. Signals reach Python's main thread only, which is
//! where a notebook or script calls us.

use mppq_api::exec::cancel;
use mppq_api::passes::ProgressSink;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// A [`ProgressSink`] that calls a Python reporter (or none) and watches for Ctrl-C.
pub struct PythonProgress {
    reporter: Option<Py<PyAny>>,
    /// The exception that stopped the work (KeyboardInterrupt, or the reporter's own).
    stopped_by: Option<PyErr>,
}

impl PythonProgress {
    /// Starts watching: clears a stop left from earlier work.
    pub fn new(reporter: Option<Py<PyAny>>) -> Self {
        cancel::clear_stop();
        Self { reporter, stopped_by: None }
    }

    fn event(&mut self, method: &str, args: impl for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyTuple>>) {
        if self.stopped_by.is_some() {
            return;
        }
        let result = Python::attach(|py| {
            py.check_signals()?;
            match &self.reporter {
                Some(reporter) => reporter.call_method1(py, method, args(py)?).map(drop),
                None => Ok(()),
            }
        });
        if let Err(e) = result {
            self.stopped_by = Some(e);
            cancel::request_stop();
        }
    }

    /// The work's outcome as Python sees it: the exception that stopped it wins over the
    /// work's own result (an error the stop caused, or a run a pass cut short and carried on
    /// from).
    pub fn outcome<T>(self, result: PyResult<T>) -> PyResult<T> {
        cancel::clear_stop();
        match self.stopped_by {
            Some(e) => Err(e),
            None => result,
        }
    }
}

impl ProgressSink for PythonProgress {
    fn begin(&mut self, task: &str, total: u64) {
        self.event("begin", |py| (task, total).into_pyobject(py));
    }
    fn advance(&mut self, n: u64) {
        self.event("advance", |py| (n,).into_pyobject(py));
    }
    fn finish(&mut self) {
        self.event("finish", |py| Ok(PyTuple::empty(py)));
    }
    fn note(&mut self, text: &str) {
        self.event("note", |py| (text,).into_pyobject(py));
    }
}
