//! Quantization-aware training from a user's own code: a small CNN trained on scikit-learn's
//! digits (`testdata/digits`, made by `testdata/digits/make.py`) is quantized to 4-bit weights
//! and activations, loses accuracy, and gets it back by fine-tuning the quantized graph with
//! [`mppq_api::qat`]; the result is exported as QDQ ONNX.
//!
//! ```text
//! cargo run --release -p mppq-api --example digits_qat [-- OUT_DIR [EPOCHS [WEIGHT_BITS]]]
//! ```

use mppq_api::data::npy;
use mppq_api::exec::{Tensor, Value};
use mppq_api::qat::{QatModel, QatOptions, cross_entropy};
use mppq_api::{CalibrationSet, ModelQuantizer, QuantizeSetting, load_quantizer};
use std::path::{Path, PathBuf};

type Error = Box<dyn std::error::Error>;

/// Images `[n, 1, 8, 8]` and labels of one split.
struct Split {
    x: Vec<f32>,
    y: Vec<i64>,
}

impl Split {
    fn read(path: &Path) -> Result<Self, Error> {
        let arrays = npy::read_npz(path)?;
        let get = |name: &str| {
            arrays
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, t)| t.clone())
                .ok_or(format!("{}: no `{name}`", path.display()))
        };
        Ok(Self { x: get("x")?.to_f32_vec()?, y: get("y")?.to_i64_vec()? })
    }

    fn len(&self) -> usize {
        self.y.len()
    }

    /// Rows `start..end` as the model's feed.
    fn feeds(&self, start: usize, end: usize, device: &mppq_api::exec::Device) -> Vec<(String, Value)> {
        let x = self.x[start * 64..end * 64].to_vec();
        vec![("input".to_string(), Value::Tensor(Tensor::from_f32(&[end - start, 1, 8, 8], x, device)))]
    }
}

fn argmax_accuracy(logits: &[f32], labels: &[i64]) -> f64 {
    let hits = logits
        .chunks(10)
        .zip(labels)
        .filter(|(row, label)| {
            // The first of equal maxima, as NumPy's argmax (4-bit logits tie often).
            let best = (0..row.len()).fold(0, |best, i| if row[i] > row[best] { i } else { best });
            best as i64 == **label
        })
        .count();
    100.0 * hits as f64 / labels.len().max(1) as f64
}

/// Test accuracy (%) of the quantized model as simulated, or of the float model.
fn accuracy(q: &ModelQuantizer, test: &Split, quantized: bool) -> Result<f64, Error> {
    let feeds = test.feeds(0, test.len(), q.device());
    let outputs = if quantized { q.simulate(feeds)? } else { q.executor()?.run(feeds, &mut [])? };
    let logits = outputs[0].1.as_tensor().ok_or("logits are not a tensor")?.to_f32_vec();
    Ok(argmax_accuracy(&logits, &test.y))
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let out = PathBuf::from(args.get(1).map_or("target/digits-qat", String::as_str));
    let epochs: usize = args.get(2).map_or(Ok(5), |e| e.parse())?;
    let weight_bits: u32 = args.get(3).map_or(Ok(4), |e| e.parse())?;
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/digits");
    let (train, test) = (Split::read(&data.join("train.npz"))?, Split::read(&data.join("test.npz"))?);

    // The `lowbit` platform: symmetric per-channel weights (4 bits by default), 4-bit activations.
    let mut setting = QuantizeSetting { platform: "lowbit".into(), ..QuantizeSetting::default() };
    setting.quantizer.bits = Some(4);
    setting.quantizer.weight_bits = Some(weight_bits);
    let mut q = load_quantizer(&data.join("digits_cnn.onnx"), setting)?;
    let float = accuracy(&q, &test, false)?;
    let calib = CalibrationSet::from_path(&q.model, &data.join("calib"), None)?;
    q.quantize(&calib, &mut mppq_api::passes::NoProgress)?;
    let before = accuracy(&q, &test, true)?;
    println!("test accuracy: float {float:.1} %, W{weight_bits}A4 after calibration {before:.1} %");

    let started = std::time::Instant::now();
    let mut model = QatModel::new(&q, QatOptions::default())?;
    let (weights, scales) = model.parameter_count();
    println!("fine-tuning {weights} weights and {scales} scales, {epochs} epochs of batch 32");
    let batch = 32;
    for epoch in 0..epochs {
        let mut total = 0.0;
        let mut steps = 0;
        // A fixed permutation per epoch (deterministic: stride through the split).
        let order: Vec<usize> = (0..train.len()).map(|i| (i * 389 + epoch * 97) % train.len()).collect();
        for chunk in order.chunks(batch) {
            let x: Vec<f32> = chunk.iter().flat_map(|&i| train.x[i * 64..(i + 1) * 64].iter().copied()).collect();
            let y: Vec<i64> = chunk.iter().map(|&i| train.y[i]).collect();
            let feeds = vec![(
                "input".to_string(),
                Value::Tensor(Tensor::from_f32(&[chunk.len(), 1, 8, 8], x, model.device())),
            )];
            let outputs = model.forward(feeds)?;
            total += model.step(cross_entropy(&outputs[0].1, &y)?)?;
            steps += 1;
        }
        println!("epoch {}: mean loss {:.4}", epoch + 1, total / steps.max(1) as f64);
    }
    model.apply(&mut q)?;
    let after = accuracy(&q, &test, true)?;
    println!(
        "test accuracy: float {float:.1} %, W{weight_bits}A4 calibrated {before:.1} %, after fine-tuning {after:.1} % ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    for artifact in q.export_to(&out)? {
        println!("wrote {}", artifact.path.display());
    }
    Ok(())
}
