//! `qdq`: the float ONNX model with QuantizeLinear/DequantizeLinear pairs that ONNX Runtime (and
//! every QDQ-reading runtime) loads, as `model.qdq.onnx`. Options (`[export.qdq]`):
//! [`QdqOptions`]. The graph rewrite itself is [`export_qdq`] (in `graph.rs`); block-wise
//! (weight-only) weights as `MatMulNBits` or blocked `DequantizeLinear` in `blocked.rs`.

mod blocked;
mod graph;

pub use blocked::BlockedWeights;
pub use graph::{QdqOptions, export_qdq, preflight_qdq};

use crate::error::Result;
use crate::exporter::{Artifact, ExportOptions, Exporter, parse_options};
use mppq_ir::Model;
use std::path::Path;

pub struct Qdq;

/// The file name the `qdq` exporter writes.
pub const FILE: &str = "model.qdq.onnx";

impl Exporter for Qdq {
    fn name(&self) -> &str {
        "qdq"
    }
    fn description(&self) -> &str {
        "QDQ ONNX (model.qdq.onnx): QuantizeLinear/DequantizeLinear around every quantized tensor, integer weights"
    }
    fn default_options(&self) -> ExportOptions {
        serde_json::to_value(QdqOptions::default()).unwrap_or_default()
    }
    fn check_options(&self, options: &ExportOptions) -> Result<()> {
        parse_options::<QdqOptions>(self.name(), options).map(|_| ())
    }
    fn preflight(&self, graph: &mppq_ir::Graph, opset: i64, options: &ExportOptions) -> Result<()> {
        let options: QdqOptions = parse_options(self.name(), options)?;
        preflight_qdq(graph, opset, &options)
    }
    fn export(&self, model: &Model, options: &ExportOptions, dir: &Path) -> Result<Vec<Artifact>> {
        let options: QdqOptions = parse_options(self.name(), options)?;
        let path = dir.join(FILE);
        mppq_onnx::save_model(&export_qdq(model, &options)?, &path, &Default::default())?;
        Ok(vec![Artifact::new("quantized model", path)])
    }
}
