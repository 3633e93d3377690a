//! `weight-only`: block-wise INT4/INT8 weights of MatMul and Gemm for ONNX Runtime's
//! `MatMulNBits`, activations float — how transformers and LLMs are compressed. Options:
//! `weight_bits` (2, 4 or 8; default 4), `block_size` (a power of two ≥ 16; default 128),
//! `symmetric` (default false: a zero point per block), `observer` (how the weights are
//! calibrated: `minmax`, ONNX Runtime's round to nearest, or `hqq`). The defaults are ONNX
//! Runtime's `matmul_nbits_quantizer`'s; GPTQ then runs on the calibration data (guarded).

use crate::error::{ApiError, Result};
use crate::platform::{Platform, QuantizerOption as O, QuantizerOptions};
use mppq_quant::quantizer::{Quantizer, WeightOnlyQuantizer};

/// `weight-only`: see the module documentation.
pub(crate) struct WeightOnly;

impl Platform for WeightOnly {
    fn name(&self) -> &str {
        "weight-only"
    }
    fn description(&self) -> &str {
        "weight-only block-wise INT4/INT8 MatMul/Gemm weights (ONNX Runtime MatMulNBits), float activations, GPTQ; --weight-bits, --block-size, --symmetric, --observer minmax|hqq"
    }
    fn quantizer(&self, o: &QuantizerOptions) -> Result<Box<dyn Quantizer>> {
        o.honour_only(self.name(), &[O::WeightBits, O::BlockSize, O::Symmetric, O::Observer])?;
        let mut q = WeightOnlyQuantizer::default();
        if let Some(bits) = o.weight_bits {
            q.bits = bits;
        }
        if let Some(size) = o.block_size {
            q.block_size = size;
        }
        if let Some(symmetric) = o.symmetric {
            q.symmetric = symmetric;
        }
        if let Some(observer) = o.observer {
            q.observer = observer;
        }
        q.validate().map_err(|e| ApiError::Setting(format!("platform `weight-only`: {e}")))?;
        Ok(Box::new(q))
    }
}
