//! Built-in platforms beyond the default: each configures what its target defines. (That its
//! QDQ export runs in ONNX Runtime with the simulated numbers is `cargo xtask qdq-check
//! --setting` with the platform; docs/platforms.md.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use mppq_api::QuantizeSetting;
use mppq_api::ir::quant::{ObserverKind, QuantizationState};
use std::path::Path;

fn testdata() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// `testdata/tiny_cnn.onnx` quantized for `platform` on its calibration batches.
fn quantized_tiny_cnn(platform: &str) -> mppq_api::ModelQuantizer {
    let setting = QuantizeSetting { platform: platform.into(), ..Default::default() };
    mppq_api::quantize_onnx_model(&testdata().join("tiny_cnn.onnx"), &testdata().join("tiny_cnn_calib"), setting)
        .unwrap()
        .quantizer
}

/// ACADEMIC_INT8 as PPQ's platform tutorial defines it: only the inputs of Conv/Gemm/ConvTranspose,
/// uint8 asymmetric percentile data, int8 symmetric per-tensor weights, 30-bit biases, FP32 outputs.
#[test]
fn academic_int8_quantizes_only_computing_inputs() {
    let q = quantized_tiny_cnn("academic-int8");
    let mut convs = 0;
    for (_, op) in q.model.graph.operations() {
        let Some(qc) = &op.quant_config else { continue };
        assert!(["Conv", "Gemm", "ConvTranspose"].contains(&op.op_type.as_str()), "{} {}", op.op_type, op.name);
        convs += usize::from(op.op_type == "Conv");
        assert!(qc.output_configs.iter().all(Option::is_none), "{}: outputs stay FP32", op.name);
        let [x, w, rest @ ..] = qc.input_configs.as_slice() else { panic!("{}", op.name) };
        let (x, w) = (x.as_ref().unwrap(), w.as_ref().unwrap());
        assert_eq!(
            (x.quant_min, x.quant_max, x.observer, x.policy.is_symmetric()),
            (0, 255, ObserverKind::Percentile, false)
        );
        assert_eq!((w.quant_min, w.quant_max, w.scale.len(), w.policy.is_symmetric()), (-128, 127, 1, true));
        if let [Some(b)] = rest {
            assert_eq!((b.num_of_bits, b.quant_min, b.quant_max), (30, -(1 << 29), (1 << 29) - 1));
            assert_ne!(b.state, QuantizationState::PassiveInit, "{}: the bias scale is derived", op.name);
            assert!((b.scale[0] - x.scale[0] * w.scale[0]).abs() <= b.scale[0] * 1e-6);
        }
    }
    assert_eq!(convs, 3);
    let dir = tempfile::tempdir().unwrap();
    for artifact in q.export_to(dir.path()).unwrap() {
        if artifact.path.extension().is_some_and(|e| e == "onnx") {
            mppq_api::onnx::load_model(&artifact.path).unwrap();
        }
    }
}

/// `pow2-int8`: every scale a power of two (biases too, as products of two), symmetric int8 per
/// tensor, the largest calibrated value never clipped (the scale rounds up).
#[test]
fn pow2_int8_scales_are_powers_of_two() {
    let q = quantized_tiny_cnn("pow2-int8");
    let mut checked = 0;
    for (_, op) in q.model.graph.operations() {
        let Some(qc) = &op.quant_config else { continue };
        for c in qc.input_configs.iter().chain(&qc.output_configs).flatten() {
            if !c.state.is_active() {
                continue;
            }
            for s in &c.scale {
                assert_eq!(s.log2().fract(), 0.0, "{} ({}): scale {s}", op.name, op.op_type);
            }
            assert!(c.offset.iter().all(|o| *o == 0.0) && c.scale.len() == 1, "{}", op.name);
            checked += 1;
        }
    }
    assert!(checked >= 15, "{checked}");
}

/// `openvino-int8`: the default scheme with narrow-range [−127, 127] weights.
#[test]
fn openvino_int8_weights_are_narrow_range() {
    let q = quantized_tiny_cnn("openvino-int8");
    let mut weights = 0;
    for (_, op) in q.model.graph.operations() {
        let Some(qc) = &op.quant_config else { continue };
        if let Some(Some(w)) = qc.input_configs.get(1).filter(|_| op.op_type == "Conv") {
            assert_eq!((w.quant_min, w.quant_max, w.scale.len() > 1), (-127, 127, true), "{}", op.name);
            weights += 1;
        }
        if let Some(Some(x)) = qc.input_configs.first() {
            assert_eq!((x.quant_min, x.quant_max), (0, 255), "{}", op.name);
        }
    }
    assert_eq!(weights, 3);
}
