//! The `default` platform's CPU classes (`target_cpu`): what the export asks of ONNX Runtime's
//! integer kernels. Checked here on the exported files with an independent reading of the rule
//! (MLAS on x86 without VNNI adds reduction positions 2j and 2j+1 in a saturating int16; Conv's
//! K is (kh, kw, ic), channels fastest); that ORT computes the simulation on each class is
//! `cargo xtask qdq-check --cpu host,x86-avx2` (CI).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use mppq_api::QuantizeSetting;
use mppq_api::ir::{DataType, Graph};
use mppq_api::quant::quantizer::TargetCpu;
use std::path::Path;

fn testdata() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// Exports `model` quantized by the `default` platform for `target`; returns the QDQ graph and
/// the quantizer.
fn export(model: &str, target: Option<TargetCpu>) -> (Graph, mppq_api::ModelQuantizer) {
    let mut setting = QuantizeSetting::default();
    setting.quantizer.target_cpu = target;
    setting.exporters = Some(vec!["qdq".into()]);
    let out = mppq_api::quantize_onnx_model(
        &testdata().join(format!("{model}.onnx")),
        &testdata().join(format!("{model}_calib")),
        setting,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let artifacts = out.quantizer.export_to(dir.path()).unwrap();
    let graph = mppq_api::onnx::load_model(&artifacts[0].path).unwrap().graph;
    (graph, out.quantizer)
}

/// Per weight read by a Conv/Gemm/MatMul through a DequantizeLinear: (consumer type, dtype, the
/// number of same-sign int8 pairs whose magnitudes add up to more than 128 in MLAS's K order).
fn weight_pairs(g: &Graph) -> Vec<(String, DataType, usize)> {
    let mut out = Vec::new();
    for (_, dq) in g.operations().filter(|(_, op)| op.op_type == "DequantizeLinear") {
        let Some(var) = dq.inputs()[0] else { continue };
        let Some(codes) = g.variable(var).unwrap().value.clone() else { continue };
        let Some(y) = dq.outputs()[0] else { continue };
        let Some(&reader) = g.consumers(y).first() else { continue };
        let reader = g.operation(reader).unwrap();
        if !["Conv", "Gemm", "MatMul"].contains(&reader.op_type.as_str()) || reader.inputs()[1] != Some(y) {
            continue;
        }
        let shape = codes.shape().to_vec();
        let q: Vec<i64> = match codes.dtype() {
            DataType::Int8 => codes.to_vec::<i8>().unwrap().into_iter().map(i64::from).collect(),
            DataType::Uint8 => codes.to_vec::<u8>().unwrap().into_iter().map(i64::from).collect(),
            other => panic!("{other:?} weight codes"),
        };
        // Each output's reduction, in K order: Conv [OC, IC, KH, KW] → (kh, kw, ic); MatMul B
        // [K, N] → column n; Gemm (transB = 1 here) B [N, K] → row n.
        let rows: Vec<Vec<i64>> = match reader.op_type.as_str() {
            "Conv" => (0..shape[0])
                .map(|oc| {
                    let (ic, kh, kw) = (shape[1], shape[2], shape[3]);
                    let mut k = Vec::new();
                    for h in 0..kh {
                        for w in 0..kw {
                            for c in 0..ic {
                                k.push(q[((oc * ic + c) * kh + h) * kw + w]);
                            }
                        }
                    }
                    k
                })
                .collect(),
            "Gemm" if reader.attr_int("transB", 0).unwrap() == 1 => q.chunks(shape[1]).map(<[i64]>::to_vec).collect(),
            _ => (0..shape[1]).map(|n| (0..shape[0]).map(|k| q[k * shape[1] + n]).collect()).collect(),
        };
        let over = rows
            .iter()
            .flat_map(|k| k.chunks_exact(2))
            .filter(|p| p[0].signum() * p[1].signum() > 0 && p[0].abs() + p[1].abs() > 128)
            .count();
        out.push((reader.op_type.clone(), codes.dtype(), over));
    }
    out
}

/// `x86-avx2`: every 8-bit weight is int8 within the pair limit; the simulation reports that.
#[test]
fn x86_avx2_weights_never_overflow_a_pair() {
    for model in ["tiny_cnn", "tiny_transformer"] {
        let (g, q) = export(model, Some(TargetCpu::X86Avx2));
        let weights = weight_pairs(&g);
        assert!(weights.len() >= 4, "{model}: {weights:?}");
        for (op, dtype, over) in &weights {
            assert_eq!((dtype, over), (&DataType::Int8, &0), "{model}: a {op} weight");
        }
        let a = mppq_api::quant::quantizer::IntegerArithmetic::of(&q.model.graph, TargetCpu::X86Avx2);
        assert_eq!((a.limited_weights, a.unsigned_weights, a.full_int8_weights), (weights.len(), 0, 0), "{model}");
    }
}

/// `any` (the default): int8 within the limit, or uint8 with zero point 128 where the limit
/// would cost much; neither can overflow on any CPU.
#[test]
fn default_target_is_exact_on_every_class() {
    let (g, q) = export("tiny_cnn", None);
    for (op, dtype, over) in weight_pairs(&g) {
        assert!(dtype == DataType::Uint8 || over == 0, "a {op} int8 weight with {over} pairs over the limit");
    }
    let zero_points: Vec<u8> = (g.variables())
        .filter(|(_, v)| v.name.ends_with("weight_zero_point"))
        .filter_map(|(_, v)| v.value.as_ref().filter(|t| t.dtype() == DataType::Uint8)?.to_vec::<u8>().ok())
        .flatten()
        .collect();
    assert!(zero_points.iter().all(|z| *z == 128), "{zero_points:?}");
    let a = mppq_api::quant::quantizer::IntegerArithmetic::of(&q.model.graph, TargetCpu::Any);
    assert_eq!(a.target, "any");
    assert!(a.saturating_on_x86_avx2.is_empty() && a.full_int8_weights == 0, "{a:?}");
}

/// `x86-vnni`: full-range int8 weights, which overflow a pair on tiny_cnn; the report names them.
#[test]
fn vnni_target_keeps_the_full_range_and_warns() {
    let (g, q) = export("tiny_cnn", Some(TargetCpu::X86Vnni));
    let over: usize = weight_pairs(&g).iter().map(|w| w.2).sum();
    assert!(over > 0, "tiny_cnn's full-range weights have pairs over the limit");
    let a = mppq_api::quant::quantizer::IntegerArithmetic::of(&q.model.graph, TargetCpu::X86Vnni);
    assert!(a.saturating_on_x86_avx2.contains(&"conv1".to_string()), "{a:?}");
    assert!(a.summary().contains("warning:"), "{}", a.summary());
}

/// A CPU class by name, as `--target-cpu` and `[quantizer] target_cpu` take it.
#[test]
fn target_cpu_names() {
    for c in TargetCpu::ALL {
        assert_eq!(TargetCpu::from_name(c.name()), Some(c));
    }
    let setting: QuantizeSetting = toml::from_str("[quantizer]\ntarget_cpu = \"arm64\"\n").unwrap();
    assert_eq!(setting.quantizer.target_cpu, Some(TargetCpu::Arm64));
    assert!(toml::from_str::<QuantizeSetting>("[quantizer]\ntarget_cpu = \"avx3\"\n").is_err());
}
