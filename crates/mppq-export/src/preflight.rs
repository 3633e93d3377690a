//! The export preflight: a pass that runs every exporter's [`Exporter::preflight`] right after
//! the configs are set, before calibration, so that what an exporter will refuse is refused
//! before minutes of work.

use crate::exporter::{ExportOptions, Exporter};
use std::sync::Arc;

/// A pass that runs every exporter's [`Exporter::preflight`] right after the configs are set,
/// before calibration.
pub struct ExportPreflight {
    pub exporters: Vec<(Arc<dyn Exporter>, ExportOptions)>,
}

impl mppq_passes::Pass for ExportPreflight {
    fn name(&self) -> &'static str {
        "export_preflight"
    }

    fn run(&mut self, ctx: &mut mppq_passes::PassContext<'_>) -> mppq_passes::Result<mppq_passes::PassReport> {
        let opset = (ctx.opsets)("");
        for (exporter, options) in &self.exporters {
            exporter.preflight(ctx.graph, opset, options).map_err(|e| mppq_passes::PassError::Invalid {
                pass: "export_preflight",
                message: format!("exporter `{}`: {e}", exporter.name()),
            })?;
        }
        let names: Vec<&str> = self.exporters.iter().map(|(e, _)| e.name()).collect();
        Ok(mppq_passes::PassReport::new("export_preflight", 0, format!("checked for {}", names.join(", "))))
    }
}
