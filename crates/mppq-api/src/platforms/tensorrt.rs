//! `trt-int8`: TensorRT-style int8 (symmetric per-tensor activations, symmetric per-channel
//! weights).

use crate::error::Result;
use crate::platform::{Platform, QuantizerOption as O, QuantizerOptions};
use mppq_quant::quantizer::{Quantizer, TensorRtQuantizer};

/// `trt-int8`: TensorRT-style symmetric int8.
pub(crate) struct TensorRt;

impl Platform for TensorRt {
    fn name(&self) -> &str {
        "trt-int8"
    }
    fn description(&self) -> &str {
        "TensorRT-style: int8 symmetric per-tensor activations, int8 symmetric per-channel weights"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::Observer])?;
        let mut q = TensorRtQuantizer::default();
        if let Some(observer) = o.observer {
            q.observer = observer;
        }
        Ok(Box::new(q))
    }
}
