//! The terminal report: plain-text tables sorted by damage (lowest SNR first) with `#` bars,
//! fitted to a given width and deterministic (ties sorted by name).

use super::AnalysisReport;
use std::fmt::Write;

/// SNR at or above this many dB draws an empty bar; 0 dB (noise as strong as the signal) or
/// worse draws a full one. Linear in dB in between.
pub const BAR_CEILING_DB: f64 = 60.0;

/// Fraction of a full bar for an SNR.
pub fn damage(snr_db: f64) -> f64 {
    if snr_db.is_nan() { 1.0 } else { ((BAR_CEILING_DB - snr_db) / BAR_CEILING_DB).clamp(0.0, 1.0) }
}

fn fmt_snr(snr: f64) -> String {
    if snr.is_infinite() && snr > 0.0 { "inf".into() } else { format!("{snr:.2}") }
}

/// Cuts `s` to `width` characters, marking the cut with `~` at the start (names differ at the end).
fn fit(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n <= width {
        return s.to_string();
    }
    let tail: String = s.chars().skip(n + 1 - width).collect();
    format!("~{tail}")
}

struct Row<'a> {
    name: &'a str,
    op_type: &'a str,
    snr: f64,
    cosine: f64,
    mse: f64,
}

fn table(out: &mut String, title: &str, mut rows: Vec<Row<'_>>, width: usize) {
    rows.sort_by(|a, b| a.snr.total_cmp(&b.snr).then_with(|| a.name.cmp(b.name)));
    // Fixed columns: rank 4, type 17, SNR 8, cosine 9, MSE 10, six separators and the bar's two
    // `|`; the rest is split between the name and the bar.
    let fixed = 4 + 17 + 8 + 9 + 10 + 6 + 2;
    let free = width.saturating_sub(fixed).max(16);
    let bar = (free / 3).clamp(4, 30);
    let name_w = free - bar;
    let _ = writeln!(out, "{title}");
    let _ = writeln!(
        out,
        "{:>4} {:<name_w$} {:<17} {:>8} {:>9} {:>10} damage",
        "#", "name", "op type", "SNR dB", "cosine", "MSE"
    );
    for (i, r) in rows.iter().enumerate() {
        let filled = (damage(r.snr) * bar as f64).round() as usize;
        let _ = writeln!(
            out,
            "{:>4} {:<name_w$} {:<17} {:>8} {:>9.6} {:>10.3e} |{}{}|",
            i + 1,
            fit(r.name, name_w),
            fit(r.op_type, 17),
            fmt_snr(r.snr),
            r.cosine,
            r.mse,
            "#".repeat(filled),
            " ".repeat(bar - filled)
        );
    }
}

/// The whole report as text no wider than `width` columns (at least about 70 are used).
pub fn render_table(report: &AnalysisReport, width: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "quantization error of `{}` on {} batch(es) ({:.3} s)",
        report.model, report.batches, report.seconds
    );
    for o in report.outputs() {
        let _ = writeln!(
            out,
            "  output {}: SNR {} dB, cosine {:.6}, MSE {:.3e}",
            o.tensor,
            fmt_snr(o.snr_db),
            o.cosine,
            o.mse
        );
    }
    out.push('\n');
    let rows = report
        .graphwise
        .iter()
        .map(|t| Row { name: &t.tensor, op_type: &t.op_type, snr: t.snr_db, cosine: t.cosine, mse: t.mse })
        .collect();
    table(&mut out, "graph-wise (per tensor, float vs full simulation):", rows, width);
    if let Some(layers) = &report.layerwise {
        out.push('\n');
        let rows = layers
            .iter()
            .map(|l| Row { name: &l.op, op_type: &l.op_type, snr: l.snr_db, cosine: l.cosine, mse: l.mse })
            .collect();
        table(&mut out, "layer-wise (graph outputs, only this op quantized):", rows, width);
    }
    // Rows are sized to fit; headers with long names are cut so that no line is wider.
    out.lines().map(|l| fit_end(l, width) + "\n").collect()
}

/// Cuts a line to `width` characters at its end.
fn fit_end(line: &str, width: usize) -> String {
    line.chars().take(width).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_and_names_fit() {
        assert_eq!(damage(60.0), 0.0);
        assert_eq!(damage(0.0), 1.0);
        assert!((damage(30.0) - 0.5).abs() < 1e-12);
        assert_eq!(fit("abcdef", 4), "~def");
        assert_eq!(fit("abc", 4), "abc");
    }
}
