//! MelWeightMatrix: triangular mel filters `[dft_length/2 + 1, num_mel_bins]` mapping linear
//! spectrogram bins to the mel scale (`mel = 2595 log10(1 + f/700)`), computed on the host as
//! the ONNX reference does (band edges snapped to `floor((dft_length + 1) f / sample_rate)`).

use crate::error::Result;
use crate::kernel::{Kernel, KernelContext, OpNode};
use crate::ops::util::host;
use crate::registry::OpRegistry;
use crate::tensor::{Tensor, burn_dtype};
use crate::value::Value;
use burn::backend::Dispatch;
use burn::backend::ops::FloatTensorOps;
use burn::tensor::Shape;
use mppq_ir::DataType;

pub fn register(r: &mut OpRegistry) {
    r.register_fn("MelWeightMatrix", 17, build);
}

struct Mel {
    out: DataType,
}

fn build(node: &OpNode<'_>) -> Result<Box<dyn Kernel>> {
    let code = node.int("output_datatype", 1)?;
    let out = i32::try_from(code)
        .ok()
        .and_then(DataType::from_onnx_code)
        .filter(|d| burn_dtype(*d).is_some() && *d != DataType::Bool)
        .ok_or_else(|| node.err(format!("unsupported output_datatype {code}")))?;
    Ok(Box::new(Mel { out }))
}

impl Kernel for Mel {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> Result<Vec<Option<Value>>> {
        let mut ins = ctx.inputs(inputs);
        let mut scalar = |i: usize, what: &str| -> Result<f64> {
            match ins.tensor(i)?.to_f64_vec().as_slice() {
                [v] => Ok(*v),
                _ => Err(ctx.err(format!("{what} must be a scalar"))),
            }
        };
        let bins = scalar(0, "num_mel_bins")?;
        let dft_length = scalar(1, "dft_length")?;
        let sample_rate = scalar(2, "sample_rate")?;
        let lower = scalar(3, "lower_edge_hertz")?;
        let upper = scalar(4, "upper_edge_hertz")?;
        if bins < 1.0 || dft_length < 1.0 || sample_rate <= 0.0 || bins > 1e6 || dft_length > 1e8 {
            return Err(ctx.err("num_mel_bins, dft_length and sample_rate must be positive"));
        }
        let (nb, spec) = (bins as usize, dft_length as usize / 2 + 1);
        host::check_size(ctx, &[nb, spec])?;
        // Mel-scale edges in float32, as the reference computes them from float32 inputs.
        let mel = |f: f64| (2595.0f32 * (1.0f32 + f as f32 / 700.0f32).log10()) as f64;
        let (lo, hi) = (mel(lower), mel(upper));
        // The reference divides by the number of edges (nb + 2), not the number of gaps.
        let step = (hi - lo) / (nb + 2) as f64;
        let edges: Vec<i64> = (0..nb + 2)
            .map(|i| {
                let m = i as f64 * step + lo;
                let hz = 700.0 * (10f64.powf(m / 2595.0) - 1.0);
                ((dft_length + 1.0) * hz / sample_rate).floor() as i64
            })
            .collect();
        let mut out = vec![0.0f64; spec * nb];
        let mut set = |j: i64, i: usize, v: f64| {
            if j >= 0 && (j as usize) < spec {
                out[j as usize * nb + i] = v;
            }
        };
        for i in 0..nb {
            let (l, c, h) = (edges[i], edges[i + 1], edges[i + 2]);
            if c == l {
                set(c, i, 1.0);
            } else {
                for j in l..=c {
                    set(j, i, (j - l) as f64 / (c - l) as f64);
                }
            }
            if h > c {
                for j in c..h {
                    set(j, i, (h - j) as f64 / (h - c) as f64);
                }
            }
        }
        let data = burn::tensor::TensorData::new(out, Shape::from(vec![spec, nb]));
        let t = Tensor::from_dispatch(Dispatch::float_from_data(data, ctx.device.dispatch()));
        Ok(vec![Some(t.cast(self.out)?.into())])
    }
}
