//! End to end on the testdata models: fold BatchNormalization, dispatch (conservative), give
//! configs with the `default` (ONNX Runtime QDQ) quantizer, calibrate on the 8 calibration
//! batches, then compare fake-quant simulation with FP32: SNR = 10·log10(Σfp² / Σ(fp−q)²).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use mppq_dispatch::{DispatchContext, TargetPrecision, dispatcher_by_name};
use mppq_exec::{BurnFakeQuant, Device, Executor, OpRegistry, QuantSimulation, Tensor, Value};
use mppq_ir::quant::QuantizationState;
use mppq_quant::calibrate::{CalibrationSetting, calibrate};
use mppq_quant::metrics::snr_db;
use mppq_quant::quantizer::{OnnxRuntimeQuantizer, Quantizer, init_quantization};
use std::path::PathBuf;

fn testdata() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

fn batches(model: &str, device: &Device) -> Vec<Vec<(String, Value)>> {
    (0..8)
        .map(|i| {
            let path = testdata().join(format!("{model}_calib/batch_{i:03}.npz"));
            let mut archive = npyz::npz::NpzArchive::open(&path).unwrap();
            let names: Vec<String> = archive.array_names().map(str::to_string).collect();
            names
                .into_iter()
                .map(|name| {
                    let npy = archive.by_name(&name).unwrap().unwrap();
                    let shape: Vec<usize> = npy.shape().iter().map(|d| *d as usize).collect();
                    let values: Vec<f32> = npy.into_vec().unwrap();
                    (name, Value::Tensor(Tensor::from_f32(&shape, values, device)))
                })
                .collect()
        })
        .collect()
}

/// Quantizes `model` and returns (SNR of simulation vs FP32 in dB, number of quantized ops).
fn quantized_snr(model: &str, observer: &str) -> (f64, usize) {
    let device = Device::cpu();
    let mut loaded = mppq_onnx::load_model(testdata().join(format!("{model}.onnx"))).unwrap();
    let graph = &mut loaded.graph;
    mppq_ir::morph::fold_batchnorm(graph).unwrap();
    let quantizer = OnnxRuntimeQuantizer { observer: observer.parse().unwrap(), ..Default::default() };
    let ctx = DispatchContext::new(TargetPrecision::Int8, quantizer.quant_operation_types());
    dispatcher_by_name("conservative").unwrap().dispatch(graph, &ctx).unwrap().apply(graph).unwrap();
    let quantized = init_quantization(graph, &quantizer).unwrap();
    let exec = Executor::new(graph, &OpRegistry::builtin(), &device, &|_| 17).unwrap();
    let data = batches(model, &device);
    calibrate(graph, &exec, &data, &CalibrationSetting::default(), |_, _, _| {}).unwrap();
    for (_, op) in graph.operations() {
        for c in op.quant_config.iter().flat_map(|c| c.input_configs.iter().chain(&c.output_configs)).flatten() {
            assert!(
                matches!(c.state, QuantizationState::Activated | QuantizationState::Passive),
                "{}: {:?}",
                op.name,
                c.state
            );
            c.validate().unwrap();
        }
    }
    let (mut fp_all, mut q_all) = (Vec::new(), Vec::new());
    for batch in &data {
        let fp = exec.run(batch.clone(), &mut []).unwrap();
        let mut sim = QuantSimulation::new(graph, BurnFakeQuant);
        let q = exec.run(batch.clone(), &mut [&mut sim]).unwrap();
        assert!(sim.applied.0 > 0 && sim.applied.1 > 0);
        for ((_, a), (_, b)) in fp.iter().zip(&q) {
            fp_all.extend(a.as_tensor().unwrap().to_f32_vec());
            q_all.extend(b.as_tensor().unwrap().to_f32_vec());
        }
    }
    (snr_db(&fp_all, &q_all), quantized)
}

#[test]
fn tiny_cnn_int8_simulation_snr() {
    let (snr, ops) = quantized_snr("tiny_cnn", "minmax");
    println!("tiny_cnn: {ops} quantized operations, int8 simulation SNR {snr:.2} dB");
    assert!(ops >= 8, "{ops}");
    assert!(snr > 25.0 && snr.is_finite(), "SNR {snr:.2} dB");
}

#[test]
fn tiny_transformer_int8_simulation_snr() {
    let (snr, ops) = quantized_snr("tiny_transformer", "minmax");
    println!("tiny_transformer: {ops} quantized operations, int8 simulation SNR {snr:.2} dB");
    assert!(ops >= 16, "{ops}");
    assert!(snr > 20.0 && snr.is_finite(), "SNR {snr:.2} dB");
}

#[test]
fn histogram_observer_calibrates_too() {
    let (snr, _) = quantized_snr("tiny_cnn", "percentile");
    println!("tiny_cnn with percentile: SNR {snr:.2} dB");
    assert!(snr > 20.0 && snr.is_finite(), "SNR {snr:.2} dB");
}

#[test]
fn empty_calibration_set_is_an_error() {
    let device = Device::cpu();
    let mut loaded = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap();
    let graph = &mut loaded.graph;
    let quantizer = OnnxRuntimeQuantizer::default();
    let ctx = DispatchContext::new(TargetPrecision::Int8, quantizer.quant_operation_types());
    dispatcher_by_name("allin").unwrap().dispatch(graph, &ctx).unwrap().apply(graph).unwrap();
    init_quantization(graph, &quantizer).unwrap();
    let exec = Executor::new(graph, &OpRegistry::builtin(), &device, &|_| 17).unwrap();
    let err = calibrate(graph, &exec, &Vec::new(), &CalibrationSetting::default(), |_, _, _| {}).unwrap_err();
    assert!(err.to_string().contains("calibration set is empty"), "{err}");
}

/// `tiny_cnn` dispatched and configured with the `default` quantizer, with its executor.
fn configured(observer: &str) -> (mppq_ir::Graph, Executor, Vec<Vec<(String, Value)>>) {
    let device = Device::cpu();
    let mut graph = mppq_onnx::load_model(testdata().join("tiny_cnn.onnx")).unwrap().graph;
    mppq_ir::morph::fold_batchnorm(&mut graph).unwrap();
    let quantizer = OnnxRuntimeQuantizer { observer: observer.parse().unwrap(), ..Default::default() };
    let ctx = DispatchContext::new(TargetPrecision::Int8, quantizer.quant_operation_types());
    dispatcher_by_name("conservative").unwrap().dispatch(&graph, &ctx).unwrap().apply(&mut graph).unwrap();
    init_quantization(&mut graph, &quantizer).unwrap();
    let exec = Executor::new(&graph, &OpRegistry::builtin(), &device, &|_| 17).unwrap();
    let data = batches("tiny_cnn", &device);
    (graph, exec, data)
}

fn scales(graph: &mppq_ir::Graph) -> Vec<(Vec<f32>, Vec<f32>)> {
    let mut out = Vec::new();
    for (_, op) in graph.operations() {
        for c in op.quant_config.iter().flat_map(|c| c.input_configs.iter().chain(&c.output_configs)).flatten() {
            out.push((c.scale.clone(), c.offset.clone()));
        }
    }
    out
}

#[test]
fn observers_of_one_graph_share_a_histogram_collection() {
    use mppq_quant::calibrate::{ObservationCache, calibrate_activations, calibrate_activations_cached};
    let setting = CalibrationSetting::default();
    let mut cache = ObservationCache::default();
    cache.prefetch_histograms = true;
    // Min/max with prefetched histograms: the same parameters as min/max alone.
    let (mut minmax, exec, data) = configured("minmax");
    let mut plain = minmax.clone();
    let n = calibrate_activations_cached(&mut minmax, &exec, &data, &setting, &mut cache, |_, _, _| {}).unwrap();
    calibrate_activations(&mut plain, &exec, &data, &setting, |_, _, _| {}).unwrap();
    assert_eq!(scales(&minmax), scales(&plain));
    assert_eq!((cache.observed, cache.served), (n, 0));
    // The first pass's graph outputs are kept: what a float run of each batch gives.
    use mppq_quant::data::CalibrationData;
    let fingerprint = minmax.float_fingerprint();
    for b in 0..data.batch_count() {
        let run = mppq_exec::value::float_outputs(exec.run(data.batch(b, &Device::cpu()).unwrap(), &mut []).unwrap());
        assert_eq!(cache.float_outputs(fingerprint, b), Some(&run), "batch {b}");
    }
    assert_eq!(cache.float_outputs(fingerprint, data.batch_count()), None);
    // Percentile on the same float graph: served from those histograms without running the
    // model, with exactly the parameters of its own two passes.
    let (mut served, _, _) = configured("percentile");
    let mut alone = served.clone();
    let batches_run = std::cell::Cell::new(0);
    calibrate_activations_cached(&mut served, &exec, &data, &setting, &mut cache, |_, _, _| {
        batches_run.set(batches_run.get() + 1)
    })
    .unwrap();
    assert_eq!((batches_run.get(), cache.served), (0, n), "every observer served, no batch run");
    calibrate_activations(&mut alone, &exec, &data, &setting, |_, _, _| {}).unwrap();
    assert_eq!(scales(&served), scales(&alone));
    // Another float graph (a weight changed) is not served.
    let (mut changed, _, _) = configured("percentile");
    let (_, var) = changed.initializers().next().map(|(id, v)| (id, v.clone())).unwrap();
    let id = changed.var_id(&var.name).unwrap();
    let value = var.value.unwrap();
    let mut w = value.to_f32_vec().unwrap();
    w[0] += 1.0;
    changed.variable_mut(id).unwrap().value = Some(mppq_ir::TensorData::from_vec(value.shape().to_vec(), &w).unwrap());
    let exec = Executor::new(&changed, &OpRegistry::builtin(), &Device::cpu(), &|_| 17).unwrap();
    calibrate_activations_cached(&mut changed, &exec, &data, &setting, &mut cache, |_, _, _| {}).unwrap();
    assert_eq!(cache.served, n, "nothing served for another graph");
    assert_eq!(cache.float_outputs(fingerprint, 0), None, "outputs of another graph are not served");
    assert!(cache.float_outputs(changed.float_fingerprint(), 0).is_some());
}
