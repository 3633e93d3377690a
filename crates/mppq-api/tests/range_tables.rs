//! Range tables (TensorRT's calibration cache and dynamic ranges, ONNX Runtime's calibration
//! cache, QNN encodings): golden files of `tiny_cnn` with fixed configs (its quant JSON in
//! `testdata/export_golden/`, for the default and the TensorRT platform), every table read back
//! onto the configs it was written from, QNN's negated offset, and `--import-ranges` end to end.
//! That ONNX Runtime's quantizer reproduces our parameters from the cache is checked by
//! `cargo xtask range-tables` (CI).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use mppq_api::export::import::{apply_imported, read_ranges};
use mppq_api::export::ranges::{ImportedValue, rows};
use mppq_api::exporter_by_name;
use mppq_api::ir::Model;
use std::path::{Path, PathBuf};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// `tiny_cnn` with the configs of a saved quant JSON.
fn configured(quant_json: &str) -> Model {
    let mut m = mppq_api::onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
    let path = testdata().join("export_golden").join(quant_json);
    mppq_api::quantize::apply_quant_config(&mut m, &path, &Default::default()).unwrap();
    m
}

const PLATFORMS: [(&str, &str); 2] = [("default", "tiny_cnn.quant.json"), ("trt", "tiny_cnn.trt.quant.json")];
const TABLES: [(&str, &str); 4] = [
    ("trt-calib-cache", "calibration.cache"),
    ("trt-dynamic-range", "dynamic_range.json"),
    ("ort-calib-cache", "calibration_cache.json"),
    ("qnn-encodings", "model.encodings"),
];

fn export(m: &Model, exporter: &str, dir: &Path) -> PathBuf {
    let artifacts = exporter_by_name(exporter).unwrap().export(m, &serde_json::Value::Null, dir).unwrap();
    artifacts[0].path.clone()
}

/// `MPPQ_BLESS=1` rewrites the golden files (after a deliberate format change).
#[test]
fn tables_match_their_golden_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut stale = Vec::new();
    for (platform, json) in PLATFORMS {
        let m = configured(json);
        for (exporter, _) in TABLES {
            let path = export(&m, exporter, dir.path());
            let golden = testdata()
                .join("export_golden")
                .join(format!("{platform}.{}", path.file_name().unwrap().to_string_lossy()));
            let got = std::fs::read(&path).unwrap();
            if std::env::var_os("MPPQ_BLESS").is_some() {
                std::fs::write(&golden, &got).unwrap();
            } else if std::fs::read(&golden).ok() != Some(got) {
                stale.push(golden.display().to_string());
            }
        }
    }
    assert!(stale.is_empty(), "tables differ from their golden files (MPPQ_BLESS=1 to rewrite): {stale:#?}");
}

/// Every table read back gives the configs it was written from: all of them for the formats
/// that carry a grid (QNN) or an exact range (ORT's cache), the symmetric ones for TensorRT's
/// symmetric formats.
#[test]
fn every_table_reads_back_onto_the_configs_it_was_written_from() {
    let dir = tempfile::tempdir().unwrap();
    for (platform, json) in PLATFORMS {
        let m = configured(json);
        let symmetric = platform == "trt";
        for (exporter, _) in TABLES {
            if exporter.starts_with("trt") && !symmetric {
                continue;
            }
            let path = export(&m, exporter, dir.path());
            let (format, values) = read_ranges(&path).unwrap();
            assert_eq!(format, exporter);
            let mut g = m.graph.clone();
            let report = apply_imported(&mut g, &values).unwrap();
            assert!(report.applied > 0, "{platform}/{exporter}: nothing applied");
            let fused: Vec<String> = rows(&m).unwrap().into_iter().filter(|r| r.is_fused()).map(|r| r.name).collect();
            assert!(report.unknown.iter().all(|n| fused.contains(n)), "{platform}/{exporter}: {:?}", report.unknown);
            for ((_, before), (_, after)) in m.graph.operations().zip(g.operations()) {
                let (Some(b), Some(a)) = (&before.quant_config, &after.quant_config) else { continue };
                for (cb, ca) in
                    b.input_configs.iter().chain(&b.output_configs).zip(a.input_configs.iter().chain(&a.output_configs))
                {
                    let (Some(cb), Some(ca)) = (cb, ca) else { continue };
                    for (sb, sa) in cb.scale.iter().zip(&ca.scale) {
                        assert!(
                            (sb - sa).abs() <= sb.abs() * 1e-6,
                            "{platform}/{exporter} `{}`: scale {sb} read back as {sa}",
                            before.name
                        );
                    }
                    assert_eq!(cb.offset, ca.offset, "{platform}/{exporter} `{}`: zero point", before.name);
                }
            }
        }
    }
}

/// QNN dequantizes an unsigned code as `(q + offset) · scale`: offset = −zero point on uint8,
/// and −128 for a symmetric int8 grid (codes shifted by 128).
#[test]
fn qnn_offsets_are_negated_unsigned_zero_points() {
    let dir = tempfile::tempdir().unwrap();
    for (platform, json) in PLATFORMS {
        let m = configured(json);
        let path = export(&m, "qnn-encodings", dir.path());
        let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(file["version"], "1.0.0");
        let by_name = |section: &str, name: &str| {
            file[section].as_array().unwrap().iter().find(|e| e["name"] == name).cloned().unwrap()
        };
        for row in rows(&m).unwrap().into_iter().filter(|r| !r.is_fused() && r.entry.bits == 8) {
            let section = if row.is_param { "param_encodings" } else { "activation_encodings" };
            let e = by_name(section, &row.name);
            let shift = if row.entry.quant_min < 0 { 128.0 } else { 0.0 };
            let expected: Vec<i64> = row.entry.zero_point.iter().map(|z| -(z + shift) as i64).collect();
            let offsets: Vec<i64> = e["offset"].as_array().unwrap().iter().map(|o| o.as_i64().unwrap()).collect();
            assert_eq!(offsets, expected, "{platform} `{}`", row.name);
        }
    }
}

/// The older and newer QNN/AIMET schemas read into the same ranges.
#[test]
fn qnn_schemas_0_6_1_and_2_0_0_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let v0 = r#"{"version": "0.6.1", "activation_encodings": {"x": [{"bitwidth": 8, "dtype": "int", "is_symmetric": "False",
        "max": 2.55, "min": -1.28, "offset": -128, "scale": 0.015}]}, "param_encodings": {"w": [
        {"bitwidth": 8, "dtype": "int", "is_symmetric": "True", "offset": -128, "scale": 0.1},
        {"bitwidth": 8, "dtype": "int", "is_symmetric": "True", "offset": -128, "scale": 0.2}]}}"#;
    let v2 = r#"{"version": "2.0.0", "encodings": [{"name": "x", "output_dtype": "uint8", "y_scale": 0.015, "y_zero_point": 128},
        {"name": "w", "output_dtype": "int8", "y_scale": [0.1, 0.2], "axis": 0}]}"#;
    let grid = |values: &[ImportedValue], name: &str| match values.iter().find(|v| v.name() == name).unwrap() {
        ImportedValue::Grid(g) => g.clone(),
        other => panic!("{other:?}"),
    };
    let mut read = Vec::new();
    for (i, text) in [v0, v2].into_iter().enumerate() {
        let path = dir.path().join(format!("{i}.encodings"));
        std::fs::write(&path, text).unwrap();
        let (format, values) = read_ranges(&path).unwrap();
        assert_eq!(format, "qnn-encodings");
        read.push(values);
    }
    // Both say: x on uint8 with zero point 128; w per channel, symmetric int8.
    let (x0, x2) = (grid(&read[0], "x"), grid(&read[1], "x"));
    assert_eq!((x0.scale.clone(), x0.zero_point.clone(), x0.signed), (vec![0.015], vec![128.0], Some(false)));
    assert_eq!((x2.scale, x2.zero_point, x2.signed), (vec![0.015], vec![128.0], Some(false)));
    let (w0, w2) = (grid(&read[0], "w"), grid(&read[1], "w"));
    assert_eq!((w0.scale.clone(), w0.zero_point.clone(), w0.signed), (vec![0.1, 0.2], vec![128.0, 128.0], Some(false)));
    assert_eq!((w2.scale, w2.zero_point, w2.signed), (vec![0.1, 0.2], vec![0.0, 0.0], Some(true)));
}

/// `mppq quantize --import-ranges`: TensorRT-platform ranges from a calibration cache replace
/// the calibrated ones; a file naming no tensor of the model, or with other bit widths, is refused.
#[test]
fn imported_ranges_replace_the_calibrated_ones() {
    use mppq_api::QuantizeSetting;
    let dir = tempfile::tempdir().unwrap();
    let source = configured("tiny_cnn.trt.quant.json");
    let cache = export(&source, "trt-calib-cache", dir.path());
    // Calibrated on one batch only, the ranges differ from the source's eight; imported, they match.
    let run = |import: Option<&Path>, out: &str| {
        let mut setting = QuantizeSetting { platform: "trt-implicit-int8".into(), ..QuantizeSetting::default() };
        setting.pipeline.calibration.steps = Some(1);
        setting.import_ranges = import.map(Path::to_path_buf);
        let out = dir.path().join(out);
        let mut progress = mppq_api::passes::NoProgress;
        mppq_api::quantize::quantize_to_dir(
            &testdata().join("tiny_cnn.onnx"),
            &testdata().join("tiny_cnn_calib"),
            setting,
            &out,
            &mut progress,
        )
        .map(|_| configured_from(&out.join("quant.json")))
    };
    let expected: Vec<(String, Vec<f32>)> = rows(&source)
        .unwrap()
        .into_iter()
        .filter(|r| !r.is_param && !r.is_fused())
        .map(|r| (r.name, r.entry.scale))
        .collect();
    let plain = run(None, "plain").unwrap();
    let imported = run(Some(&cache), "imported").unwrap();
    let scales = |m: &Model| -> Vec<(String, Vec<f32>)> {
        rows(m).unwrap().into_iter().filter(|r| !r.is_param && !r.is_fused()).map(|r| (r.name, r.entry.scale)).collect()
    };
    assert_ne!(scales(&plain), expected, "one batch should calibrate differently from eight");
    assert_eq!(scales(&imported), expected);

    // Refusals: names of another model; 8-bit ranges on 4-bit activations.
    let other = dir.path().join("other.json");
    std::fs::write(&other, r#"{"act_quant_info": {"no_such_tensor": 1.0}}"#).unwrap();
    let err = run(Some(&other), "other").err().unwrap().to_string();
    assert!(err.contains("no_such_tensor") && err.contains("none of its 1 tensor names"), "{err}");
    let encodings = export(&source, "qnn-encodings", dir.path());
    let mut setting = QuantizeSetting { platform: "lowbit".into(), ..QuantizeSetting::default() };
    setting.quantizer.bits = Some(4);
    setting.import_ranges = Some(encodings);
    let mut progress = mppq_api::passes::NoProgress;
    let err = mppq_api::quantize::quantize_to_dir(
        &testdata().join("tiny_cnn.onnx"),
        &testdata().join("tiny_cnn_calib"),
        setting,
        &dir.path().join("lowbit"),
        &mut progress,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("the file has 8 bits, the model's config 4"), "{err}");
}

/// Range files no grid can come from, or that would quantize a tensor to a constant, are refused
/// naming the file and the tensor (they panicked, or gave 1.5 dB without a word); so are
/// duplicate entries (last won) and tensors the file keeps in float (ignored).
#[test]
fn implausible_range_files_are_refused_naming_the_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let quantize = |name: &str, text: &str| {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        let setting = mppq_api::QuantizeSetting { import_ranges: Some(file), ..Default::default() };
        let mut progress = mppq_api::passes::NoProgress;
        mppq_api::quantize::quantize_to_dir(
            &testdata().join("tiny_cnn.onnx"),
            &testdata().join("tiny_cnn_calib"),
            setting,
            &dir.path().join(format!("out-{name}")),
            &mut progress,
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_else(|| panic!("{name} was accepted"))
    };
    let ort = |lowest: f64, highest: f64| {
        format!(
            r#"{{"CLS": "TensorsData", "data": {{"relu1": {{"lowest": {lowest}, "highest": {highest}}}, "relu2": {{"lowest": 0.0, "highest": 5.6}}}}}}"#
        )
    };
    let cases = [
        ("zero.cache", "TRT-8601-EntropyCalibration2\nrelu1: 00000000\n".to_string(), "has no width"),
        ("negzero.cache", "TRT-8601-EntropyCalibration2\nrelu1: 80000000\n".to_string(), "has no width"),
        ("zero_dr.json", r#"{"act_quant_info": {"relu1": 0}}"#.to_string(), "has no width"),
        ("zero_ort.json", ort(0.0, 0.0), "has no width"),
        ("huge.json", ort(0.0, 1e38), "quantized to a constant"),
        ("negative.json", ort(-10.0, -5.0), "quantized to a constant"),
        ("dup_key.json", r#"{"act_quant_info": {"relu1": 4.4, "relu1": 3.0}}"#.to_string(), "appears twice"),
        ("dup.cache", "TRT-8601-EntropyCalibration2\nrelu1: 3d0f606a\nrelu1: 3d0f606a\n".to_string(), "listed twice"),
        (
            "float.encodings",
            r#"{"version": "1.0.0", "activation_encodings": [{"name": "relu1", "dtype": "FLOAT", "enc_type": "PER_TENSOR", "bw": 16}], "param_encodings": []}"#
                .to_string(),
            "keeps 1 tensor(s) in floating point",
        ),
    ];
    for (name, text, expected) in cases {
        let err = quantize(name, &text);
        assert!(err.contains(expected) && err.contains(name) && err.contains("relu1"), "{name}: {err}");
    }
}

fn configured_from(quant_json: &Path) -> Model {
    let mut m = mppq_api::onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
    mppq_api::quantize::apply_quant_config(&mut m, quant_json, &Default::default()).unwrap();
    m
}

/// The per-layer and parameter files (ncnn's table, OpenPPL's JSON) of `tiny_cnn`'s fixed
/// configs against their golden files; the ncnn table read back gives the reciprocals of the
/// configs' scales, and asymmetric configs (the default platform's) are refused by it, naming the
/// operation. `MPPQ_BLESS=1` rewrites the golden files.
#[test]
fn layer_files_match_their_golden_files() {
    use mppq_api::export::formats::ncnn_table;
    let dir = tempfile::tempdir().unwrap();
    let mut stale = Vec::new();
    let mut check = |platform: &str, path: &Path| {
        let golden = testdata()
            .join("export_golden")
            .join(format!("{platform}.{}", path.file_name().unwrap().to_string_lossy()));
        let got = std::fs::read(path).unwrap();
        if std::env::var_os("MPPQ_BLESS").is_some() {
            std::fs::write(&golden, &got).unwrap();
        } else if std::fs::read(&golden).ok() != Some(got) {
            stale.push(golden.display().to_string());
        }
    };
    let trt = configured("tiny_cnn.trt.quant.json");
    let table = export(&trt, "ncnn-table", dir.path());
    check("trt", &table);
    check("trt", &export(&trt, "ppl-cuda-json", dir.path()));
    check("default", &export(&configured("tiny_cnn.quant.json"), "ppl-cuda-json", dir.path()));
    assert!(stale.is_empty(), "files differ from their golden files (MPPQ_BLESS=1 to rewrite): {stale:#?}");

    let read = ncnn_table::read(&std::fs::read_to_string(&table).unwrap()).unwrap();
    let g = &trt.graph;
    let mut layers = 0;
    for (_, op) in g.operations().filter(|(_, op)| ["Conv", "Gemm"].contains(&op.op_type.as_str())) {
        let qc = op.quant_config.as_ref().unwrap();
        let (x, w) = (qc.input_configs[0].as_ref().unwrap(), qc.input_configs[1].as_ref().unwrap());
        let (_, input) = read.inputs.iter().find(|(n, _)| *n == op.name).unwrap();
        assert!((input * x.scale[0] - 1.0).abs() < 1e-6, "{}", op.name);
        let (_, weights) = read.weights.iter().find(|(n, _)| *n == op.name).unwrap();
        assert_eq!(weights.len(), w.scale.len(), "{}", op.name);
        for (s, ours) in weights.iter().zip(&w.scale) {
            assert!((s * ours - 1.0).abs() < 1e-6, "{}", op.name);
        }
        layers += 1;
    }
    assert_eq!((layers, read.weights.len()), (4, 4));
    let err = exporter_by_name("ncnn-table")
        .unwrap()
        .export(&configured("tiny_cnn.quant.json"), &serde_json::Value::Null, dir.path())
        .unwrap_err()
        .to_string();
    assert!(err.contains("symmetric") && err.contains("conv1"), "{err}");
}
