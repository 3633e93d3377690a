//! The jobs of the command line: `mppq quantize` ([`quantize_to_dir`]: quantize, export, report,
//! the files appearing together) and `mppq analyse` ([`analyse_model`]), with the summary they
//! print ([`JobSummary`]) and the analysis they share ([`run_analysis`]).

use super::setting::QuantizeSetting;
use super::{ModelQuantizer, load_quantizer, open_calibration};
use crate::data::calib::CalibrationSet;
use crate::error::{ApiError, Result};
use mppq_dispatch::Dispatch;
use mppq_passes::ProgressSink;
use std::path::{Path, PathBuf};

/// What a `quantize`/`analyse` run did, for printing.
pub struct JobSummary {
    pub model: String,
    pub platform: String,
    /// Operations quantized, out of all operations.
    pub quantized_ops: (usize, usize),
    pub dispatch: Option<Dispatch>,
    /// One line per pass.
    pub pass_reports: Vec<String>,
    pub analysis: Option<crate::report::AnalysisReport>,
    /// What the accuracy budget gave back, when one was set.
    pub budget: Option<crate::quantize::budget::BudgetReport>,
    /// (what, path) of every file written.
    pub files: Vec<(String, PathBuf)>,
    pub seconds: f64,
    /// The opset conversion done when the model was loaded, if any.
    pub opset_upgrade: Option<mppq_ir::morph::OpsetUpgrade>,
    /// Set when the model cannot reach opset 13: it is quantized below, per tensor.
    pub opset_cap: Option<crate::model::upgrade::OpsetCap>,
    /// What reading the calibration data decided (a partial batch dropped, batches streamed).
    pub data_notes: Vec<String>,
}

impl JobSummary {
    /// One line: what was quantized, for which platform, the graph outputs' SNR and the time.
    pub fn summary_line(&self) -> String {
        let snr = self
            .analysis
            .as_ref()
            .map(|a| a.outputs().map(|t| format!("{} {:.2} dB", t.tensor, t.snr_db)).collect::<Vec<_>>().join(", "))
            .filter(|s| !s.is_empty())
            .map(|s| format!("; output SNR vs float: {s}"))
            .unwrap_or_default();
        let padding = self.analysis.as_ref().and_then(|a| a.padding_mask.as_ref());
        let snr = match padding {
            Some(mask) if !snr.is_empty() => format!("{snr} (real tokens: the padding `{mask}` marks left out)"),
            _ => snr,
        };
        format!(
            "{}: {} of {} operations quantized for platform `{}`{snr}; {:.3} s",
            self.model, self.quantized_ops.0, self.quantized_ops.1, self.platform, self.seconds
        )
    }
}

/// Bridges the analysis' `(stage, done, total)` callback to a progress sink.
pub(crate) fn analysis_progress(progress: &mut dyn ProgressSink) -> impl FnMut(&str, usize, usize) + '_ {
    let (mut current, mut reported) = (String::new(), 0usize);
    move |stage, done, total| {
        if stage != current {
            if !current.is_empty() {
                progress.finish();
            }
            current = stage.to_string();
            reported = 0;
            progress.begin(&format!("analysis: {stage}"), total as u64);
        }
        progress.advance(done.saturating_sub(reported) as u64);
        reported = done;
        if done == total {
            progress.finish();
            current.clear();
        }
    }
}

/// The graph-wise (and, on request, layer-wise) analysis of a quantized model on the first
/// `analysis.batches` batches of `calib`: what `quantize_to_dir` writes as the report.
pub fn run_analysis(
    q: &ModelQuantizer,
    calib: &CalibrationSet,
    progress: &mut dyn ProgressSink,
) -> Result<crate::report::AnalysisReport> {
    let exec = q.executor()?;
    let reference = q.reference_executor()?;
    let batches = calib.first_values(q.setting.analysis.batches, &q.device)?;
    let name = q.model.graph.name.clone();
    let mut report = crate::report::analyse(
        &name,
        &q.model.graph,
        &exec,
        reference.as_ref(),
        &batches,
        &q.setting.analysis,
        analysis_progress(progress),
    )?;
    report.passes = q
        .reports
        .iter()
        .map(|r| crate::report::PassTime {
            pass: r.pass.to_string(),
            summary: r.summary.clone(),
            seconds: r.seconds,
            guard: r.guard.map(|g| g.to_string()),
        })
        .collect();
    report.integer_arithmetic = q
        .platform
        .target_cpu(&q.setting.quantizer)
        .map(|target| mppq_quant::quantizer::IntegerArithmetic::of(&q.model.graph, target));
    Ok(report)
}

fn summary(
    q: &ModelQuantizer,
    calib: &CalibrationSet,
    analysis: Option<crate::report::AnalysisReport>,
    files: Vec<(String, PathBuf)>,
    started: std::time::Instant,
) -> JobSummary {
    let graph = &q.model.graph;
    JobSummary {
        model: graph.name.clone(),
        platform: q.platform.name().to_string(),
        quantized_ops: crate::quantize::control_flow::count_quantized(graph),
        dispatch: q.dispatch.clone(),
        pass_reports: q.reports.iter().map(|r| r.to_string()).collect(),
        analysis,
        budget: q.budget.clone(),
        files,
        seconds: started.elapsed().as_secs_f64(),
        opset_upgrade: q.opset_upgrade.clone(),
        opset_cap: q.opset_cap.clone(),
        data_notes: calib.notes().to_vec(),
    }
}

/// Writes `dir/report.html` and `dir/report.json` (creating `dir`); returns them for listing.
fn write_reports(analysis: &crate::report::AnalysisReport, dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    std::fs::create_dir_all(dir).map_err(|source| ApiError::Io { path: dir.display().to_string(), source })?;
    let (html, json) = (dir.join("report.html"), dir.join("report.json"));
    crate::report::write_html(analysis, None, &html)?;
    analysis.write_json(&json)?;
    Ok(vec![("report".into(), html), ("report data".into(), json)])
}

/// `mppq quantize`: quantize `model_path` on the batches in `calib_dir`, run the exporters into
/// `out_dir` (by default `model.qdq.onnx`, `quant.json` and `model.float.onnx`, the float graph
/// after fusions), and write the graph-wise analysis as `out_dir/report.html` and
/// `out_dir/report.json`. The files appear together once all is done, and never replace an
/// input ([`crate::staging`]).
pub fn quantize_to_dir(
    model_path: &Path,
    calib_dir: &Path,
    setting: QuantizeSetting,
    out_dir: &Path,
    progress: &mut dyn ProgressSink,
) -> Result<JobSummary> {
    let started = std::time::Instant::now();
    let (imported, weights) = (setting.import_ranges.clone(), setting.weights.clone());
    let inputs: Vec<&Path> =
        [model_path, calib_dir].into_iter().chain(imported.as_deref()).chain(weights.as_deref()).collect();
    let staging = crate::staging::Staging::new(out_dir, &inputs)?;
    let mut q = load_quantizer(model_path, setting)?;
    let calib = open_calibration(&q, calib_dir, progress)?;
    let mut job = quantize_into(&mut q, &calib, staging.path(), progress, started)?;
    job.files = staging.commit(std::mem::take(&mut job.files))?;
    Ok(job)
}

/// The work of [`quantize_to_dir`] once the model and the data are read: quantize `q` on
/// `calib`, run the exporters into `dir`, write the report there. The files are listed in the
/// summary; `started` times the job. Used as it is by callers that read their data otherwise
/// (the Python binding).
pub fn quantize_into(
    q: &mut ModelQuantizer,
    calib: &CalibrationSet,
    dir: &Path,
    progress: &mut dyn ProgressSink,
    started: std::time::Instant,
) -> Result<JobSummary> {
    q.quantize(calib, progress)?;
    let mut files: Vec<(String, PathBuf)> = q.export_to(dir)?.into_iter().map(|a| (a.what, a.path)).collect();
    let analysis = run_analysis(q, calib, progress)?;
    files.extend(write_reports(&analysis, dir)?);
    Ok(summary(q, calib, Some(analysis), files, started))
}

/// `mppq analyse`: quantize in memory (or apply `quant_config`), then analyse; with `out_dir`,
/// write `report.html` and `report.json` there.
pub fn analyse_model(
    model_path: &Path,
    calib_dir: &Path,
    setting: QuantizeSetting,
    quant_config: Option<&Path>,
    out_dir: Option<&Path>,
    progress: &mut dyn ProgressSink,
) -> Result<JobSummary> {
    let started = std::time::Instant::now();
    let staging = out_dir.map(|dir| crate::staging::Staging::new(dir, &[model_path, calib_dir])).transpose()?;
    let mut q = load_quantizer(model_path, setting)?;
    let calib = open_calibration(&q, calib_dir, progress)?;
    match quant_config {
        Some(path) => crate::quantize::apply_quant_config(&mut q.model, path, &q.setting.pipeline)?,
        None => q.quantize(&calib, progress)?,
    }
    let analysis = run_analysis(&q, &calib, progress)?;
    let files = match staging {
        Some(staging) => {
            let files = write_reports(&analysis, staging.path())?;
            staging.commit(files)?
        }
        None => Vec::new(),
    };
    Ok(summary(&q, &calib, Some(analysis), files, started))
}
