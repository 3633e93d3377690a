//! One-off timing of fake quantization on 1M float32 values: the fused in-place CPU kernel
//! against the chain of Burn operations (what non-CPU devices run). Not a test:
//! `cargo run -p mppq-exec --example fake_quant_timing` (best of 15 runs, milliseconds).

use mppq_exec::simulation::fake_quant::{KernelPath, fake_quant_with};
use mppq_exec::{Device, Tensor};
use mppq_ir::quant::{RoundingPolicy, TensorQuantConfig};
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n = 1 << 20;
    let d = Device::cpu();
    let x: Vec<f32> = (0..n).map(|i| ((i as u64 * 2_654_435_761) % 100_000) as f32 / 1000.0 - 50.0).collect();
    let mut fp8 = TensorQuantConfig::linear(8, true, None)?;
    fp8.policy = mppq_ir::quant::QuantizationPolicy::new(&[
        mppq_ir::quant::QuantizationProperty::PerTensor,
        mppq_ir::quant::QuantizationProperty::Floating,
        mppq_ir::quant::QuantizationProperty::Symmetric,
    ])?;
    (fp8.exponent_bits, fp8.mantissa_bits, fp8.quant_min, fp8.quant_max) = (4, 3, -448, 448);
    fp8.scale = vec![0.1];
    fp8.offset = vec![0.0];
    let mut per_channel = TensorQuantConfig::linear(8, true, Some(1))?;
    per_channel.scale = (0..64).map(|i| 0.01 + i as f32 * 0.003).collect();
    per_channel.offset = vec![0.0; 64];
    for (name, policy, shape, cfg) in [
        ("int8 per-tensor half-even", Some(RoundingPolicy::HalfEven), vec![n], None),
        ("int8 per-tensor half-up", Some(RoundingPolicy::HalfUp), vec![n], None),
        ("int8 per-channel [16,64,32,32] axis 1", None, vec![16, 64, 32, 32], Some(per_channel.clone())),
        ("fp8 e4m3 per-tensor", None, vec![n], Some(fp8.clone())),
    ] {
        let cfg = match cfg {
            Some(c) => c,
            None => {
                let mut c = TensorQuantConfig::linear(8, true, None)?;
                c.scale = vec![0.05];
                c.offset = vec![0.0];
                c.rounding = policy.unwrap_or_default();
                c
            }
        };
        let mut row = format!("{name:40}");
        for path in [KernelPath::Auto, KernelPath::Chained] {
            let mut best = f64::INFINITY;
            for _ in 0..15 {
                let t = Tensor::from_f32(&shape, x.clone(), &d);
                let start = Instant::now();
                let y = fake_quant_with(t, &cfg, path)?;
                best = best.min(start.elapsed().as_secs_f64() * 1e3);
                std::hint::black_box(y);
            }
            row += &format!("  {path:?}: {best:7.3} ms");
        }
        println!("{row}");
    }
    Ok(())
}
