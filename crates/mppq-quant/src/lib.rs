//! Quantization core of mppq (being built). Done: calibration observers (`observer`: minmax,
//! percentile, kl, mse, isotone, constant, floating, hist) that turn observed tensor values into
//! scales and offsets. Planned: quantizers that give each quantable operation its configs, and
//! the platform registry that bundles dispatchers, quantizers, parsers and exporters.

pub mod error;
pub mod observer;

pub use error::{QuantError, Result};
pub use observer::{Observer, ObserverOptions, OBSERVER_NAMES, create_observer};
