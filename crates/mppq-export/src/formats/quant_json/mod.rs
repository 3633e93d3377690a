//! `quant-json`: every operation's precision and every quantized tensor's parameters as
//! `quant.json` (schema in `docs/export.md`), which `--quant-config` applies back to the float
//! model without recalibrating. No options.

mod schema;

use crate::error::Result;
use crate::exporter::{Artifact, ExportOptions, Exporter, NoOptions, parse_options};
use mppq_ir::Model;
pub use schema::{
    FORMAT, OpEntry, QuantJson, SlotRef, TensorEntry, apply_quant_json, read_quant_json, to_quant_json,
    write_quant_json,
};
use std::path::Path;

pub struct QuantJsonExporter;

/// The file name the `quant-json` exporter writes.
pub const FILE: &str = "quant.json";

impl Exporter for QuantJsonExporter {
    fn name(&self) -> &str {
        "quant-json"
    }
    fn description(&self) -> &str {
        "quantization parameters as JSON (quant.json): every op's precision, every tensor's scale/offset"
    }
    fn check_options(&self, options: &ExportOptions) -> Result<()> {
        parse_options::<NoOptions>(self.name(), options).map(|_| ())
    }
    fn export(&self, model: &Model, options: &ExportOptions, dir: &Path) -> Result<Vec<Artifact>> {
        self.check_options(options)?;
        let path = dir.join(FILE);
        write_quant_json(model, &path)?;
        Ok(vec![Artifact::new("quantization parameters", path)])
    }
}
