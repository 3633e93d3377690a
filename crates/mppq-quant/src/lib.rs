//! Quantization core of mppq: quantizers that give each dispatched operation its configs
//! ([`quantizer`]), calibration observers that turn observed values into scales and offsets
//! ([`observer`]: minmax, percentile, kl, mse, isotone, constant, floating, hist), the calibration
//! run over batches ([`calibrate`]) read from a stream of calibration data ([`data`]), and error
//! metrics ([`metrics`]) and the padding tokens they leave out ([`padding`]); block-wise weight
//! quantization for weight-only INT4/INT8 ([`blockwise`]).

pub mod blockwise;
pub mod calibrate;
pub mod data;
pub mod error;
pub mod metrics;
pub mod observer;
pub mod padding;
pub mod quantizer;

pub use data::{CalibrationData, Feeds};
pub use error::{QuantError, Result};
pub use observer::{Observer, ObserverOptions, create_observer};
