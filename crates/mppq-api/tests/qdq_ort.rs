//! QDQ export and quantization JSON on the testdata models (default platform: fold BN,
//! conservative dispatch, 8 calibration batches): the JSON round trip gives identical configs
//! and simulation; the exported model in our executor and (when the Python venv exists) in ONNX
//! Runtime matches the simulation within one output step. The full check is `cargo xtask
//! qdq-check`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_dispatch::{DispatchContext, TargetPrecision, dispatcher_by_name};
use mppq_exec::{BurnFakeQuant, Device, Executor, OpRegistry, QuantSimulation, Tensor, Value};
use mppq_export::formats::qdq::{QdqOptions, export_qdq};
use mppq_export::formats::quant_json::{FORMAT, apply_quant_json, read_quant_json, to_quant_json, write_quant_json};
use mppq_ir::{Graph, Model, VarId};
use mppq_quant::calibrate::{CalibrationSetting, calibrate};
use mppq_quant::metrics::snr_db;
use mppq_quant::quantizer::{OnnxRuntimeQuantizer, Quantizer, init_quantization};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn batch_files(model: &str) -> Vec<PathBuf> {
    (0..8).map(|i| root().join(format!("testdata/{model}_calib/batch_{i:03}.npz"))).collect()
}

fn feeds(path: &Path, device: &Device) -> Vec<(String, Value)> {
    mppq_api::data::npy::read_npz(path)
        .unwrap()
        .into_iter()
        .map(|(n, d)| (n, Value::Tensor(Tensor::from_data(&d, device).unwrap())))
        .collect()
}

fn float_model(name: &str) -> Model {
    let mut m = mppq_onnx::load_model(root().join(format!("testdata/{name}.onnx"))).unwrap();
    mppq_ir::morph::fold_batchnorm(&mut m.graph).unwrap();
    m
}

fn executor(m: &Model, device: &Device) -> Executor {
    let opsets = |d: &str| m.opset(d).unwrap_or(0);
    Executor::new(&m.graph, &OpRegistry::builtin(), device, &opsets).unwrap()
}

/// The weight bits ORT computes exactly on this CPU: 8 with VNNI, 7 (`reduce_range`) without.
fn weight_bits() -> u32 {
    if mppq_exec::cpu::has_vnni() { 8 } else { 7 }
}

fn quantized(name: &str, device: &Device) -> (Model, Vec<Vec<(String, Value)>>) {
    let mut m = float_model(name);
    let q = OnnxRuntimeQuantizer { weight_bits: weight_bits(), ..Default::default() };
    let ctx = DispatchContext::new(TargetPrecision::Int8, q.quant_operation_types());
    dispatcher_by_name("conservative").unwrap().dispatch(&m.graph, &ctx).unwrap().apply(&mut m.graph).unwrap();
    init_quantization(&mut m.graph, &q).unwrap();
    let data: Vec<_> = batch_files(name).iter().map(|f| feeds(f, device)).collect();
    let exec = executor(&m, device);
    calibrate(&mut m.graph, &exec, &data, &CalibrationSetting::default(), |_, _, _| {}).unwrap();
    (m, data)
}

fn run(exec: &Executor, graph: Option<&Graph>, batch: &[(String, Value)]) -> Vec<Vec<f32>> {
    let out = match graph {
        Some(g) => {
            let mut sim = QuantSimulation::new(g, BurnFakeQuant);
            exec.run(batch.to_vec(), &mut [&mut sim]).unwrap()
        }
        None => exec.run(batch.to_vec(), &mut []).unwrap(),
    };
    out.into_iter().map(|(_, v)| v.as_tensor().unwrap().to_f32_vec()).collect()
}

/// Scale of the output config that decides a graph output (through data-movement ops), or for
/// a float output the largest step among its producer's quantized inputs.
fn output_step(g: &Graph, var: VarId) -> f32 {
    fn config_step(g: &Graph, mut v: VarId) -> Option<f32> {
        loop {
            let op = g.operation(g.producer(v)?).ok()?;
            let slot = op.outputs().iter().position(|o| *o == Some(v))?;
            if let Some(c) = op.quant_config.as_ref().and_then(|q| q.output_configs[slot].clone()) {
                return Some(c.scale[0]);
            }
            if !matches!(op.op_type.as_str(), "Reshape" | "Flatten" | "Transpose") {
                return None;
            }
            v = op.inputs()[0]?;
        }
    }
    config_step(g, var)
        .or_else(|| {
            let op = g.operation(g.producer(var)?).ok()?;
            op.input_ids().filter_map(|v| config_step(g, v)).reduce(f32::max)
        })
        .unwrap()
}

fn within_one_step(a: &[f32], b: &[f32], step: f32) -> usize {
    a.iter().zip(b).filter(|(x, y)| (*x - *y).abs() <= step * 1.0001).count()
}

#[test]
fn quant_json_round_trip_gives_identical_configs_and_simulation() {
    let device = Device::cpu();
    let (m, data) = quantized("tiny_cnn", &device);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("quant.json");
    write_quant_json(&m, &path).unwrap();
    let json = read_quant_json(&path).unwrap();
    assert_eq!(json.format, FORMAT);
    assert_eq!(json, to_quant_json(&m).unwrap());
    // Every quantized tensor is listed once, with its scale; the Conv weights per channel.
    let w = &json.tensors["conv1.weight"];
    let b = weight_bits();
    assert_eq!((w.bits, w.quant_min, w.quant_max, w.axis), (b, -(1 << (b - 1)), (1 << (b - 1)) - 1, Some(0)));
    assert_eq!(w.scale.len(), 16);
    assert!(json.tensors.contains_key("input"));

    let mut fresh = float_model("tiny_cnn");
    apply_quant_json(&mut fresh.graph, &json).unwrap();
    for ((_, a), (_, b)) in m.graph.operations().zip(fresh.graph.operations()) {
        assert_eq!((a.precision, &a.quant_config), (b.precision, &b.quant_config), "{}", a.name);
    }
    let (ea, eb) = (executor(&m, &device), executor(&fresh, &device));
    for batch in &data[..2] {
        assert_eq!(run(&ea, Some(&m.graph), batch), run(&eb, Some(&fresh.graph), batch));
    }
}

#[test]
fn quant_json_errors_name_the_problem() {
    let device = Device::cpu();
    let (m, _) = quantized("detect_branch", &device);
    let mut json = to_quant_json(&m).unwrap();
    let mut other = float_model("tiny_cnn");
    let err = apply_quant_json(&mut other.graph, &json).unwrap_err().to_string();
    assert!(err.contains("is not in the graph"), "{err}");

    let mut fresh = float_model("detect_branch");
    let before = fresh.clone();
    let (_, conv) = json.operations.iter_mut().find(|(_, o)| o.op_type == "Conv").unwrap();
    conv.inputs.as_mut().unwrap()[0].as_mut().unwrap().tensor = "nope".into();
    let err = apply_quant_json(&mut fresh.graph, &json).unwrap_err().to_string();
    assert!(err.contains("`nope`"), "{err}");
    assert_eq!(fresh, before, "a failed apply changes nothing");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(&path, r#"{"format":"other","graph":"","operations":{},"tensors":{}}"#).unwrap();
    let err = read_quant_json(&path).unwrap_err().to_string();
    assert!(err.contains("bad.json") && err.contains(FORMAT), "{err}");
}

/// (model, % of ORT outputs within one step, SNR ORT, SNR sim) when the venv exists.
fn check(name: &str, retarget: Option<Target>) -> Option<(f64, f64, f64)> {
    let device = Device::cpu();
    let (mut m, data) = quantized(name, &device);
    match retarget {
        Some(Target::FusedRelu) => fuse_relu(&mut m.graph),
        Some(t) => retarget_activations(&mut m.graph, t),
        None => {}
    }
    let fp8 = matches!(retarget, Some(Target::Fp8E4M3));
    let exported = export_qdq(&m, &QdqOptions { allow_fp8: fp8, ..Default::default() }).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.qdq.onnx");
    mppq_onnx::save_model(&exported, &path, &Default::default()).unwrap();
    if let Some(keep) = std::env::var_os("MPPQ_QDQ_KEEP") {
        std::fs::copy(&path, Path::new(&keep).join(format!("{name}-{retarget:?}.qdq.onnx"))).unwrap();
    }
    let reloaded = mppq_onnx::load_model(&path).unwrap();
    let sim_exec = executor(&m, &device);
    let ours = if matches!(retarget, Some(Target::Uint4 | Target::Fp8E4M3)) {
        executor(&m, &device)
    } else {
        executor(&reloaded, &device)
    };
    let steps: Vec<f32> = m.graph.outputs().iter().map(|v| output_step(&m.graph, *v)).collect();

    let venv = std::env::var_os("MPPQ_VENV").map(PathBuf::from).unwrap_or_else(|| root().join("target/mppq-venv"));
    let python = venv.join("bin/python");
    let ort_ran = python.exists()
        && std::process::Command::new(&python)
            .arg(root().join("xtask/python/ort_qdq.py"))
            .arg(&path)
            .arg(dir.path())
            .args(batch_files(name))
            .args(["--opt", if fp8 { "basic" } else { "all" }])
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
    if !ort_ran {
        assert!(!python.exists(), "{name} {retarget:?}: ONNX Runtime failed on the export");
        assert!(std::env::var_os("MPPQ_REQUIRE_ORT").is_none(), "ONNX Runtime venv {} is missing", venv.display());
    }
    let (mut fp, mut sim, mut ort) = (vec![], vec![], vec![]);
    let (mut ok, mut total) = (0, 0);
    for (i, batch) in data.iter().enumerate() {
        let s = run(&sim_exec, Some(&m.graph), batch);
        let o =
            if matches!(retarget, Some(Target::Uint4 | Target::Fp8E4M3)) { vec![] } else { run(&ours, None, batch) };
        // Our QuantizeLinear holds no 4-bit or FP8 tensors.
        let ours_can = !matches!(retarget, Some(Target::Uint4 | Target::Fp8E4M3));
        for (k, (a, b)) in o.iter().zip(&s).enumerate().filter(|_| ours_can) {
            assert_eq!(
                within_one_step(a, b, steps[k]),
                b.len(),
                "{name}: our executor on the export vs the simulation"
            );
        }
        if ort_ran {
            let out = mppq_api::data::npy::read_npz(&dir.path().join(format!("ort_{i:03}.npz"))).unwrap();
            for (k, name) in m.graph.outputs().iter().map(|v| m.graph.var_name(*v)).enumerate() {
                let r = out.iter().find(|(n, _)| n == name).unwrap().1.to_f32_vec().unwrap();
                ok += within_one_step(&r, &s[k], steps[k]);
                total += r.len();
                ort.extend(r);
            }
        }
        fp.extend(run(&sim_exec, None, batch).concat());
        sim.extend(s.concat());
    }
    ort_ran.then(|| (100.0 * ok as f64 / total as f64, snr_db(&fp, &ort), snr_db(&fp, &sim)))
}

#[derive(Clone, Copy, Debug)]
enum Target {
    Uint4,
    Uint6,
    Uint16,
    Fp8E4M3,
    /// Conv output and Relu input configs `Overlapped` by the Relu output (what the quant
    /// fusion pass produces), parameters copied from the dominator.
    FusedRelu,
}

fn fuse_relu(g: &mut Graph) {
    use mppq_ir::quant::{ConfigLocation, ConfigSide, QuantizationState};
    let relus: Vec<_> =
        g.operations().filter(|(_, o)| o.op_type == "Relu" && o.quant_config.is_some()).map(|(id, _)| id).collect();
    let mut fused = 0;
    for relu in relus {
        let x = g.operation(relu).unwrap().inputs()[0].unwrap();
        let Some(conv) =
            g.producer(x).filter(|p| g.operation(*p).unwrap().op_type == "Conv" && g.consumers(x).len() == 1)
        else {
            continue;
        };
        let mut dom = g.operation(relu).unwrap().quant_config.as_ref().unwrap().output_configs[0].clone().unwrap();
        dom.state = QuantizationState::Overlapped;
        dom.dominated_by = Some(ConfigLocation { op: relu, side: ConfigSide::Output, index: 0 });
        g.operation_mut(conv).unwrap().quant_config.as_mut().unwrap().output_configs[0] = Some(dom.clone());
        g.operation_mut(relu).unwrap().quant_config.as_mut().unwrap().input_configs[0] = Some(dom);
        fused += 1;
    }
    assert!(fused >= 1, "no Conv → Relu to fuse");
}

/// Rewrites every calibrated 8-bit activation config to another format over the same float
/// range (weights and biases keep theirs), to exercise the low-bit, 16-bit and FP8 exports.
fn retarget_activations(g: &mut Graph, t: Target) {
    use mppq_ir::quant::{QuantizationPolicy, QuantizationProperty as P};
    let ids: Vec<_> = g.operations().map(|(id, _)| id).collect();
    for id in ids {
        let Some(qc) = g.operation_mut(id).unwrap().quant_config.as_mut() else { continue };
        for c in qc.input_configs.iter_mut().chain(qc.output_configs.iter_mut()).flatten() {
            if c.num_of_bits != 8 || c.quant_min != 0 {
                continue;
            }
            let (lo, hi) = ((0.0 - c.offset[0]) * c.scale[0], (255.0 - c.offset[0]) * c.scale[0]);
            match t {
                Target::Fp8E4M3 => {
                    c.policy = QuantizationPolicy::new(&[P::PerTensor, P::Floating, P::Symmetric]).unwrap();
                    (c.exponent_bits, c.mantissa_bits, c.quant_min, c.quant_max) = (4, 3, -448, 448);
                    c.scale = vec![lo.abs().max(hi) / 448.0];
                    c.offset = vec![0.0];
                }
                _ => {
                    let bits = match t {
                        Target::Uint4 => 4,
                        Target::Uint6 => 6,
                        _ => 16,
                    };
                    let qmax = (1i64 << bits) - 1;
                    (c.num_of_bits, c.quant_max) = (bits, qmax);
                    c.scale = vec![(hi - lo) / qmax as f32];
                    c.offset = vec![(-lo / c.scale[0]).round().clamp(0.0, qmax as f32)];
                }
            }
        }
    }
}

#[test]
fn low_bit_sixteen_bit_fp8_and_fused_relu_exports_match_in_onnx_runtime() {
    for (name, t) in [
        ("tiny_cnn", Target::Uint4),
        ("tiny_cnn", Target::Uint6),
        ("tiny_cnn", Target::Uint16),
        ("detect_branch", Target::Fp8E4M3),
        ("tiny_transformer", Target::Fp8E4M3),
        ("tiny_cnn", Target::FusedRelu),
        ("detect_branch", Target::FusedRelu),
    ] {
        match check(name, Some(t)) {
            Some((pct, snr_ort, snr_sim)) => {
                println!("{name} {t:?}: {pct:.3} % within one step, SNR ORT {snr_ort:.2} dB, sim {snr_sim:.2} dB");
                // ORT has no 16-bit integer kernels: it runs these ops in float, and its
                // summation order differs from ours by more than a 16-bit step on 1 or 2 of the
                // 80 logits (which ones depends on our convolution's summation order; ORT with and
                // without graph optimisations agree exactly). The SNR check below still holds.
                let min = if matches!(t, Target::Uint16) { 97.0 } else { 99.9 };
                assert!(pct >= min, "{t:?}: {pct:.3} %");
                assert!((snr_ort - snr_sim).abs() <= 0.1, "{t:?}: ORT {snr_ort:.2} dB vs sim {snr_sim:.2} dB");
            }
            None => println!("{name} {t:?}: no ONNX Runtime venv"),
        }
    }
}

#[test]
fn export_matches_simulation_in_our_executor_and_onnx_runtime() {
    for name in ["tiny_cnn", "detect_branch", "tiny_transformer"] {
        match check(name, None) {
            Some((pct, snr_ort, snr_sim)) => {
                println!("{name}: {pct:.3} % within one step, SNR ORT {snr_ort:.2} dB, sim {snr_sim:.2} dB");
                assert!(pct >= 99.9, "{name}: {pct:.3} %");
                assert!((snr_ort - snr_sim).abs() <= 0.1, "{name}: ORT {snr_ort:.2} dB vs sim {snr_sim:.2} dB");
                assert!(snr_sim > 30.0, "{name}: {snr_sim:.2} dB");
            }
            None => println!("{name}: no ONNX Runtime venv; compared our executor only"),
        }
    }
}
