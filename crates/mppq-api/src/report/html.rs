//! The HTML report: one self-contained, well-formed (XHTML-style) page with summary numbers, an
//! inline-SVG bar chart of SNR per layer, a float-vs-quantized histogram of one tensor and the
//! graph-wise table. No scripts, no external resources.

use super::table::damage;
use super::{AnalysisReport, TensorStat, write_atomic};
use crate::error::{ApiError, Result};
use std::fmt::Write;
use std::path::Path;

const CHART_WIDTH: f64 = 960.0;
const LABEL_WIDTH: f64 = 260.0;
const ROW_HEIGHT: f64 = 22.0;
const HIST_BINS: usize = 60;

const STYLE: &str = "body{font-family:sans-serif;margin:24px;color:#222;max-width:1000px}\
h1{font-size:22px}h2{font-size:18px;margin-top:28px}\
table{border-collapse:collapse;font-size:13px}td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:right}\
td:first-child,th:first-child,td.l,th.l{text-align:left}\
.summary td{border:none;padding:2px 12px 2px 0}\
svg text{font-family:sans-serif;font-size:12px}\
.note{color:#666;font-size:12px}";

/// Escapes text for HTML content and attribute values.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

fn fmt_snr(snr: f64) -> String {
    if snr.is_infinite() && snr > 0.0 { "∞".into() } else { format!("{snr:.2}") }
}

/// Red when the SNR is poor, amber when middling, green when fine.
fn color(snr: f64) -> &'static str {
    if snr < 20.0 {
        "#d9534f"
    } else if snr < 30.0 {
        "#f0ad4e"
    } else {
        "#5cb85c"
    }
}

/// Horizontal bars, one `<rect class="bar">` per row, length ∝ SNR (capped at the largest finite one).
fn bar_chart(out: &mut String, rows: &[(String, String, f64)]) {
    let finite_max = rows.iter().map(|r| r.2).filter(|s| s.is_finite()).fold(0.0f64, f64::max);
    let top = (finite_max * 1.1).max(10.0);
    let plot = CHART_WIDTH - LABEL_WIDTH - 70.0;
    let height = ROW_HEIGHT * rows.len() as f64 + 30.0;
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{CHART_WIDTH}" height="{height}" role="img" aria-label="SNR per layer">"#
    );
    for (i, (label, op_type, snr)) in rows.iter().enumerate() {
        let y = i as f64 * ROW_HEIGHT;
        let w = if snr.is_finite() { (snr.max(0.0) / top * plot).max(1.0) } else { plot };
        let name: String = if label.chars().count() > 34 {
            format!("…{}", label.chars().skip(label.chars().count() - 33).collect::<String>())
        } else {
            label.clone()
        };
        let _ = write!(
            out,
            r#"<text x="{lx}" y="{ty}" text-anchor="end">{name}</text><rect class="bar" x="{LABEL_WIDTH}" y="{ry}" width="{w:.1}" height="{bh}" fill="{fill}"><title>{title}</title></rect><text x="{vx:.1}" y="{ty}">{value}</text>"#,
            lx = LABEL_WIDTH - 6.0,
            ty = y + 15.0,
            name = esc(&name),
            ry = y + 3.0,
            bh = ROW_HEIGHT - 6.0,
            fill = color(*snr),
            title = esc(&format!("{label} ({op_type}): {} dB", fmt_snr(*snr))),
            vx = LABEL_WIDTH + w + 4.0,
            value = fmt_snr(*snr),
        );
    }
    // Axis with ticks every 10 dB.
    let axis_y = ROW_HEIGHT * rows.len() as f64 + 4.0;
    let _ = write!(
        out,
        r##"<line x1="{LABEL_WIDTH}" y1="{axis_y}" x2="{x2}" y2="{axis_y}" stroke="#888"/>"##,
        x2 = LABEL_WIDTH + plot
    );
    let mut tick = 0.0;
    while tick <= top {
        let x = LABEL_WIDTH + tick / top * plot;
        let _ = write!(
            out,
            r##"<text x="{x:.1}" y="{y}" text-anchor="middle" fill="#666">{tick}</text>"##,
            y = axis_y + 16.0
        );
        tick += 10.0;
    }
    let _ = write!(
        out,
        r##"<text x="{x}" y="{y}" fill="#666">dB</text></svg>"##,
        x = LABEL_WIDTH + plot + 10.0,
        y = axis_y + 16.0
    );
}

/// Overlaid histograms of the float and quantized samples of one tensor on shared bins.
fn histogram(out: &mut String, t: &TensorStat) {
    let all = t.sample.fp.iter().chain(&t.sample.q).copied().filter(|v| v.is_finite());
    let (lo, hi) = all.fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    let (lo, hi) = if lo < hi { (f64::from(lo), f64::from(hi)) } else { (f64::from(lo) - 0.5, f64::from(lo) + 0.5) };
    let bin = |v: f32| (((f64::from(v) - lo) / (hi - lo) * HIST_BINS as f64) as usize).min(HIST_BINS - 1);
    let (mut fp, mut q) = (vec![0usize; HIST_BINS], vec![0usize; HIST_BINS]);
    t.sample.fp.iter().filter(|v| v.is_finite()).for_each(|v| fp[bin(*v)] += 1);
    t.sample.q.iter().filter(|v| v.is_finite()).for_each(|v| q[bin(*v)] += 1);
    let peak = fp.iter().chain(&q).copied().max().unwrap_or(1).max(1) as f64;
    let (w, h, left, bottom) = (CHART_WIDTH, 320.0, 50.0, 40.0);
    let plot_w = w - left - 20.0;
    let plot_h = h - bottom - 30.0;
    let bw = plot_w / HIST_BINS as f64;
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" role="img" aria-label="histogram of {name}">"#,
        name = esc(&t.tensor)
    );
    for (counts, fill, class) in [(&fp, "#1f77b4", "hist-fp"), (&q, "#ff7f0e", "hist-q")] {
        for (i, c) in counts.iter().enumerate().filter(|(_, c)| **c > 0) {
            let bh = *c as f64 / peak * plot_h;
            let _ = write!(
                out,
                r#"<rect class="{class}" x="{x:.1}" y="{y:.1}" width="{bw:.1}" height="{bh:.1}" fill="{fill}" fill-opacity="0.5"/>"#,
                x = left + i as f64 * bw,
                y = 30.0 + plot_h - bh,
            );
        }
    }
    let base = 30.0 + plot_h;
    let _ = write!(
        out,
        r##"<line x1="{left}" y1="{base}" x2="{x2}" y2="{base}" stroke="#888"/><text x="{left}" y="{ly}" fill="#444">{lo:.4}</text><text x="{x2}" y="{ly}" text-anchor="end" fill="#444">{hi:.4}</text><text x="{mx}" y="{vy}" text-anchor="middle" fill="#444">value</text>"##,
        x2 = left + plot_w,
        ly = base + 18.0,
        mx = left + plot_w / 2.0,
        vy = base + 34.0,
    );
    if lo < 0.0 && hi > 0.0 {
        // Zero, where asymmetric ranges and clipping show.
        let x = left + -lo / (hi - lo) * plot_w;
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="30" x2="{x:.1}" y2="{y2}" stroke="#999" stroke-dasharray="3,3"/><text x="{x:.1}" y="{ly}" text-anchor="middle" fill="#444">0</text>"##,
            y2 = base + 4.0,
            ly = base + 18.0
        );
    }
    let _ = write!(
        out,
        r##"<rect x="{left}" y="6" width="12" height="12" fill="#1f77b4" fill-opacity="0.5"/><text x="{t1}" y="16">float</text><rect x="{r2}" y="6" width="12" height="12" fill="#ff7f0e" fill-opacity="0.5"/><text x="{t2}" y="16">quantized</text><text x="{t3}" y="16" fill="#666">{n} sampled values each, peak bin {peak}</text></svg>"##,
        t1 = left + 16.0,
        r2 = left + 70.0,
        t2 = left + 86.0,
        t3 = left + 170.0,
        n = t.sample.len(),
    );
}

/// The report as one HTML page. `histogram_tensor` picks the tensor whose float and quantized
/// values are drawn (default: [`AnalysisReport::default_histogram_tensor`]).
pub fn render_html(report: &AnalysisReport, histogram_tensor: Option<&str>) -> Result<String> {
    let hist = match histogram_tensor {
        Some(name) => {
            let t = report.graphwise.iter().find(|t| t.tensor == name).ok_or_else(|| ApiError::Analysis {
                tensor: name.into(),
                message: format!(
                    "not among the analysed tensors; choose one of: {}",
                    report.graphwise.iter().map(|t| t.tensor.as_str()).collect::<Vec<_>>().join(", ")
                ),
            })?;
            if t.sample.is_empty() {
                return Err(ApiError::Analysis {
                    tensor: name.into(),
                    message: "has no sampled values (analysis ran with sample_cap 0?)".into(),
                });
            }
            Some(t)
        }
        None => report.default_histogram_tensor(),
    };
    let mut out = String::new();
    let title = format!("mppq quantization report: {}", report.model);
    let _ = write!(
        out,
        r#"<!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml" lang="en"><head><meta charset="utf-8"/><title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1>"#,
        t = esc(&title)
    );

    // Summary numbers.
    out.push_str(r#"<table class="summary"><tbody>"#);
    let mut summary = |k: &str, v: String| {
        let _ = write!(out, "<tr><td>{}</td><td class=\"l\"><b>{}</b></td></tr>", esc(k), esc(&v));
    };
    summary("batches analysed", report.batches.to_string());
    summary("tensors watched (graph-wise)", report.graphwise.len().to_string());
    for o in report.outputs() {
        summary(
            &format!("output {}", o.tensor),
            format!("SNR {} dB, cosine {:.6}, MSE {:.3e}", fmt_snr(o.snr_db), o.cosine, o.mse),
        );
    }
    if let Some(worst) = report.graphwise.iter().min_by(|a, b| a.snr_db.total_cmp(&b.snr_db)) {
        summary(
            "worst tensor (graph-wise)",
            format!("{} ({}): {} dB", worst.tensor, worst.op_type, fmt_snr(worst.snr_db)),
        );
    }
    if let Some(layers) = &report.layerwise {
        summary("layers analysed one at a time", layers.len().to_string());
        if let Some(l) = layers.first() {
            summary(
                "worst layer (layer-wise)",
                format!("{} ({}): outputs at {} dB", l.op, l.op_type, fmt_snr(l.snr_db)),
            );
        }
    }
    out.push_str("</tbody></table>");

    // Bar chart: layer-wise when it ran, else graph-wise per tensor; worst first.
    let (heading, note, mut rows): (&str, &str, Vec<(String, String, f64)>) = match &report.layerwise {
        Some(layers) => (
            "SNR of the graph outputs with one layer quantized",
            "Each bar: only that operation's quantization applied, everything else in float. Shorter = more damage.",
            layers.iter().map(|l| (l.op.clone(), l.op_type.clone(), l.snr_db)).collect(),
        ),
        None => (
            "SNR per tensor, full quantized simulation",
            "Each bar: float run vs the whole quantized graph at that tensor (errors accumulate along the graph). Shorter = more damage.",
            report.graphwise.iter().map(|t| (t.tensor.clone(), t.op_type.clone(), t.snr_db)).collect(),
        ),
    };
    rows.sort_by(|a, b| a.2.total_cmp(&b.2).then_with(|| a.0.cmp(&b.0)));
    let _ = write!(out, r#"<h2>{}</h2><p class="note">{}</p>"#, esc(heading), esc(note));
    bar_chart(&mut out, &rows);

    if let Some(t) = hist {
        let _ = write!(
            out,
            r#"<h2>Values of {name} ({op_type} <i>{op}</i>): float vs quantized</h2><p class="note">SNR {snr} dB, cosine {cos:.6}, over {n} elements; histogram of a {k}-value sample.</p>"#,
            name = esc(&t.tensor),
            op_type = esc(&t.op_type),
            op = esc(&t.op),
            snr = fmt_snr(t.snr_db),
            cos = t.cosine,
            n = t.elements,
            k = t.sample.len(),
        );
        histogram(&mut out, t);
    }

    // Graph-wise table in execution order.
    out.push_str(r#"<h2>Graph-wise error per tensor (execution order)</h2><table><thead><tr><th>tensor</th><th class="l">op</th><th class="l">type</th><th>SNR dB</th><th>cosine</th><th>MSE</th><th class="l">damage</th></tr></thead><tbody>"#);
    for t in &report.graphwise {
        let _ = write!(
            out,
            r##"<tr><td>{tensor}{mark}</td><td class="l">{op}</td><td class="l">{ty}</td><td>{snr}</td><td>{cos:.6}</td><td>{mse:.3e}</td><td class="l"><svg xmlns="http://www.w3.org/2000/svg" width="100" height="10"><rect width="100" height="10" fill="#eee"/><rect width="{w:.0}" height="10" fill="{fill}"/></svg></td></tr>"##,
            tensor = esc(&t.tensor),
            mark = if t.graph_output { " (output)" } else { "" },
            op = esc(&t.op),
            ty = esc(&t.op_type),
            snr = fmt_snr(t.snr_db),
            cos = t.cosine,
            mse = t.mse,
            w = damage(t.snr_db) * 100.0,
            fill = color(t.snr_db),
        );
    }
    out.push_str("</tbody></table>");
    // Which CPU's integer arithmetic was simulated, and where another would differ.
    if let Some(a) = &report.integer_arithmetic {
        out.push_str("<h2>Integer arithmetic</h2>");
        for line in a.summary().lines() {
            let _ = write!(out, r#"<p class="l">{}</p>"#, esc(line));
        }
    }
    // Where the time went: each pass of the run, then this analysis.
    if !report.passes.is_empty() {
        out.push_str(r#"<h2>Wall time</h2><table><thead><tr><th class="l">pass</th><th class="l">what it did</th><th>seconds</th></tr></thead><tbody>"#);
        for p in &report.passes {
            let _ = write!(
                out,
                r#"<tr><td class="l">{}</td><td class="l">{}{}</td><td>{:.3}</td></tr>"#,
                esc(&p.pass),
                esc(&p.summary),
                p.guard.as_ref().map(|g| format!("; {}", esc(g))).unwrap_or_default(),
                p.seconds
            );
        }
        let _ = write!(
            out,
            r#"<tr><td class="l">analysis</td><td class="l">this report</td><td>{:.3}</td></tr></tbody></table>"#,
            report.seconds
        );
    }
    out.push_str(r#"<p class="note">Generated by mppq. SNR = 10·log10(Σfp² / Σ(fp−q)²) over all elements of all batches.</p></body></html>"#);
    Ok(out)
}

/// Renders and writes the HTML report atomically.
pub fn write_html(report: &AnalysisReport, histogram_tensor: Option<&str>, path: &Path) -> Result<()> {
    write_atomic(path, render_html(report, histogram_tensor)?.as_bytes())
}
