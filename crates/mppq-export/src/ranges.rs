//! Range tables: the per-tensor formats other toolchains read (TensorRT's calibration cache and
//! dynamic ranges, ONNX Runtime's calibration cache, QNN/AIMET encodings) are all views of one
//! list, [`rows`]: every quantized tensor by name with the config that decides its quantized
//! value (the `tensors` of `quant.json`). The same formats come back in as [`ImportedValue`]s
//! ([`crate::import`]).

use crate::error::Result;
use crate::formats::quant_json::{TensorEntry, to_quant_json};
use mppq_ir::Model;
use mppq_ir::quant::QuantizationState;

/// One quantized tensor of a table.
#[derive(Clone, Debug)]
pub struct Row {
    pub name: String,
    /// A weight or bias (an initializer), not an activation.
    pub is_param: bool,
    pub entry: TensorEntry,
}

impl Row {
    /// The output of an operation fused with the activation after it: never quantized on its
    /// own, it carries the activation's parameters (ONNX Runtime's quantizer asks for it).
    pub fn is_fused(&self) -> bool {
        self.entry.state == QuantizationState::Overlapped
    }

    /// A linear integer config (not FP8).
    pub fn is_integer(&self) -> bool {
        self.entry.exponent_bits == 0
    }

    /// `(min, max)` per scale: what an asymmetric grid covers, `(qmin − zp)·s` and
    /// `(qmax − zp)·s`; for a symmetric grid `±s·quant_max`, the range its scale is calibrated
    /// from (int8's extra code −128 is only reached by clipping), so the range maps back to the
    /// same scale.
    pub fn ranges(&self) -> Vec<(f32, f32)> {
        let e = &self.entry;
        let symmetric = e.policy.is_symmetric();
        e.scale
            .iter()
            .zip(&e.zero_point)
            .map(|(s, z)| {
                if symmetric {
                    let amax = (f64::from(*s) * (e.quant_max as f64 - f64::from(*z))) as f32;
                    (-amax, amax)
                } else {
                    ((e.quant_min as f32 - z) * s, (e.quant_max as f32 - z) * s)
                }
            })
            .collect()
    }

    /// The symmetric range TensorRT calls the dynamic range (`setDynamicRange(-amax, amax)`,
    /// cache scale `amax / 127`): `scale · (quant_max − zp)` for a symmetric grid (our observers' own
    /// convention, so int8 gives back the scale exactly), the larger magnitude the grid covers for
    /// an asymmetric one; `None` for per-channel configs.
    pub fn amax(&self) -> Option<f64> {
        let [scale] = self.entry.scale.as_slice() else { return None };
        if self.entry.policy.is_symmetric() {
            let zero_point = self.entry.zero_point.first().copied().unwrap_or(0.0);
            return Some(f64::from(*scale) * (self.entry.quant_max as f64 - f64::from(zero_point)));
        }
        self.ranges().first().map(|(lo, hi)| f64::from(lo.abs().max(hi.abs())))
    }
}

/// The quantized tensors of the main graph, in graph order (sub-graphs of If/Loop are not in
/// these flat, name-keyed formats; `quant.json` carries them), then the outputs fused into a
/// following activation (Conv → Relu), with the activation's parameters.
pub fn rows(model: &Model) -> Result<Vec<Row>> {
    let json = to_quant_json(model)?;
    let g = &model.graph;
    let row = |name: String, entry: TensorEntry| {
        let is_param = g.var_id(&name).and_then(|id| g.variable(id).ok()).is_some_and(|v| v.value.is_some());
        Row { name, is_param, entry }
    };
    let mut out: Vec<Row> = Vec::new();
    let mut fused = Vec::new();
    for op in json.operations.values() {
        for e in op.outputs.iter().flatten().flatten() {
            if e.state == QuantizationState::Overlapped && !json.tensors.contains_key(&e.tensor) {
                fused.push(e.clone());
            }
        }
    }
    out.extend(json.tensors.into_iter().map(|(name, entry)| row(name, entry)));
    out.extend(fused.into_iter().map(|entry| row(entry.tensor.clone(), entry)));
    Ok(out)
}

/// Ranges read from another tool's file: one tensor's scale(s) and zero point(s) in ONNX's
/// convention (`x = (q − zero_point) · scale`), with what the file says of bits and signedness.
#[derive(Clone, Debug, PartialEq)]
pub struct Imported {
    pub name: String,
    pub scale: Vec<f32>,
    pub zero_point: Vec<f32>,
    /// Bit width, when the file gives one.
    pub bits: Option<u32>,
    /// Whether `zero_point` is on a signed grid (int8) or an unsigned one (uint8, and QNN's
    /// codes); `None`: on the model's own. Applying shifts it by `2^(bits-1)` to the config's grid.
    pub signed: Option<bool>,
}

/// Ranges of a file given as `(min, max)` per tensor (ORT's cache): fitted to a config's own
/// grid when applied.
#[derive(Clone, Debug, PartialEq)]
pub enum ImportedValue {
    Grid(Imported),
    Range {
        name: String,
        min: f32,
        max: f32,
    },
    /// A tensor the file keeps in floating point (QNN/AIMET `dtype: float`).
    Float {
        name: String,
    },
}

impl ImportedValue {
    pub fn name(&self) -> &str {
        match self {
            Self::Grid(g) => &g.name,
            Self::Range { name, .. } | Self::Float { name } => name,
        }
    }
}
