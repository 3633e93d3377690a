//! `float-onnx`: the float graph the quantization refers to, after the structural fusions (BN
//! folding), as `model.float.onnx`: `quant.json` names its tensors, and the analysis compares
//! against it. No options.

use crate::error::Result;
use crate::exporter::{Artifact, ExportOptions, Exporter, NoOptions, parse_options};
use mppq_ir::Model;
use std::path::Path;

pub struct FloatOnnx;

/// The file name the `float-onnx` exporter writes.
pub const FILE: &str = "model.float.onnx";

impl Exporter for FloatOnnx {
    fn name(&self) -> &str {
        "float-onnx"
    }
    fn description(&self) -> &str {
        "the float model after fusions such as BN folding (model.float.onnx), which quant.json refers to"
    }
    fn check_options(&self, options: &ExportOptions) -> Result<()> {
        parse_options::<NoOptions>(self.name(), options).map(|_| ())
    }
    fn export(&self, model: &Model, options: &ExportOptions, dir: &Path) -> Result<Vec<Artifact>> {
        self.check_options(options)?;
        let path = dir.join(FILE);
        mppq_onnx::save_model(model, &path, &Default::default())?;
        Ok(vec![Artifact::new("float model (fused)", path)])
    }
}
