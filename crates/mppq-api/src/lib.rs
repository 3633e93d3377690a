//! The front door of mppq: the Rust API and the `mppq` command-line program.
//!
//! It owns what a user touches directly: model inspection ([`info`]), running a model on NumPy
//! data ([`run`], [`npy`]) and, as the lower crates
//! grow, the one-call quantization API, platform registration and reports. The CLI in
//! `src/bin/mppq.rs` is a thin layer over these functions.

pub mod analyse;
pub mod error;
pub mod info;
pub mod npy;
pub mod run;

pub use error::{ApiError, Result};
pub use info::ModelInfo;
