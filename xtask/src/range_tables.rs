//! `cargo xtask range-tables`: the proof that ONNX Runtime's own quantizer consumes our
//! calibration cache. For each testdata model: `mppq quantize` (default platform) with the
//! `ort-calib-cache` exporter, then ORT's `quantize_static` from that cache alone (no data,
//! `python/ort_calib_cache.py`), and every activation ORT quantized compared with our
//! `quant.json`: the same scale (1e-6 relative) and zero point. Non-zero exit on any difference.

use anyhow::{Context, Result, bail};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::proto::workspace_root;

/// Relative scale difference allowed (float32 rounding of ORT's `(max − min) / 255`).
const MAX_SCALE_REL: f64 = 1e-6;

#[derive(serde::Deserialize)]
struct OrtReport {
    ort: String,
    tensors: BTreeMap<String, (f64, i64)>,
}

pub fn run() -> Result<bool> {
    let python = crate::pyenv::python()?;
    let root = workspace_root();
    let out_root = root.join("target/range-tables");
    println!("{:<18} {:>10} {:>8} {:>12} {:>10}  result", "model", "ORT quant", "ours", "max Δs/s", "zp diff");
    let mut all_ok = true;
    for name in crate::qdq_check::testdata_models()? {
        let model = root.join(format!("testdata/{name}.onnx"));
        let calib = root.join(format!("testdata/{name}_calib"));
        let out = out_root.join(&name);
        let setting = mppq_api::QuantizeSetting {
            exporters: Some(vec!["float-onnx".into(), "quant-json".into(), "ort-calib-cache".into()]),
            ..Default::default()
        };
        let mut progress = mppq_api::passes::NoProgress;
        mppq_api::quantize::quantize_to_dir(&model, &calib, setting, &out, &mut progress)
            .with_context(|| format!("quantizing {name}"))?;
        let report = ort_quantize(&python, &out).with_context(|| format!("ORT on the cache of {name}"))?;
        let ours = our_tensors(&out.join("quant.json"))?;
        let (mut matched, mut worst, mut zp_diff) = (0, 0.0f64, Vec::new());
        for (tensor, (scale, zero_point)) in &report.tensors {
            let Some((s, z)) = ours.get(tensor) else { continue };
            matched += 1;
            worst = worst.max((scale - s).abs() / s.abs());
            if zero_point != z {
                zp_diff.push(format!("{tensor}: ORT {zero_point}, ours {z}"));
            }
        }
        let ok = matched > 0 && worst <= MAX_SCALE_REL && zp_diff.is_empty();
        all_ok &= ok;
        println!(
            "{:<18} {:>10} {:>8} {:>12.2e} {:>10}  {} (ORT {})",
            name,
            report.tensors.len(),
            matched,
            worst,
            zp_diff.len(),
            if ok { "ok" } else { "MISS" },
            report.ort
        );
        for d in zp_diff {
            println!("    {d}");
        }
    }
    Ok(all_ok)
}

fn ort_quantize(python: &Path, out: &Path) -> Result<OrtReport> {
    let script = workspace_root().join("xtask/python/ort_calib_cache.py");
    let output = Command::new(python)
        .arg(script)
        .arg(out.join("model.float.onnx"))
        .arg(out.join("calibration_cache.json"))
        .arg(out.join("quant.json"))
        .arg(out.join("ort.qdq.onnx"))
        .output()?;
    if !output.status.success() {
        bail!("{}", String::from_utf8_lossy(&output.stderr));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).with_context(|| format!("reading the script's report: {line}"))
}

/// Per-tensor (scale, zero point) of every tensor in our quant.json.
fn our_tensors(path: &Path) -> Result<BTreeMap<String, (f64, i64)>> {
    let json = mppq_api::export::formats::quant_json::read_quant_json(path)?;
    Ok(json
        .tensors
        .into_iter()
        .filter_map(|(name, e)| match (e.scale.as_slice(), e.zero_point.as_slice()) {
            ([s], [z]) => Some((name, (f64::from(*s), *z as i64))),
            _ => None,
        })
        .collect())
}
