//! The Python binding of mppq: the native module `mppq_rs._native`, a thin layer over
//! [`mppq_api`]. The pure-Python package beside it (`python/mppq_rs`) turns what a Python user
//! holds (paths, bytes, `onnx.ModelProto`, `DataLoader`s, torch tensors, setting dicts) into what
//! these functions take; this crate owns the crossing itself, one room each:
//! - [`arrays`]: NumPy arrays in and out (one copy each way, no per-dtype code);
//! - [`errors`]: `mppq_api` errors as the package's exception classes, panics as `InternalError`;
//! - [`progress`]: progress reported to a Python object, Ctrl-C noticed between batches;
//! - [`session`]: a model being quantized (`Session`) and its result (`Quantized`);
//! - [`functions`]: the one-call functions (`info`, `run_model`, `platforms`, `exporters`).
//!
//! Long work runs with the GIL released.

mod arrays;
mod errors;
mod functions;
mod progress;
mod session;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<session::Session>()?;
    m.add_class::<session::Quantized>()?;
    functions::register(m)
}
