//! The CPU class an ONNX Runtime export is meant for, and what its integer arithmetic asks of
//! 8-bit weights.
//!
//! ORT's u8×s8 kernels (MLAS) add the products of neighbouring K positions into a saturating
//! int16 on x86 CPUs with AVX2, or AVX-512 without VNNI (`vpmaddubsw`), and add exactly in int32
//! with VNNI (`vpdpbusd`, AVX-512 VNNI or AVX-VNNI) and on ARM64. Weights for the first class, or
//! for any class, get a [`PairLimit`] in the K order of each kernel
//! (`mppq_ir::quant::pair_limit`), so that nothing saturates and every class computes what the
//! simulation computed. Weights for a non-saturating class keep the full 8-bit range.
//!
//! What each class costs (docs/export.md, "CPU classes"): the limit alone loses about 1 dB on
//! ResNet-18 (2–2.7 dB of weight noise per layer), 5 dB on PP-OCRv4 det. `any` therefore makes
//! every weight that has a pair over the limit uint8 (zero point 128: the unlimited codes, added
//! exactly by ORT's u8×u8 kernels on every CPU), so its simulation is the unlimited int8 one, at
//! the price of those kernels' speed on VNNI CPUs (ResNet-18: 27.7 ms against 8.8 ms in ORT 1.31).
//! `x86-avx2` keeps the limit (u8×s8 speed there); `x86-vnni` and `arm64` the full int8 range
//! (fastest there, saturating on x86 without VNNI).

use mppq_ir::quant::{PairLimit, PairOrder};
use mppq_ir::{Graph, OpId};
use serde::{Deserialize, Serialize};

/// The CPU class whose integer arithmetic an export is simulated for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TargetCpu {
    /// Every class: int8 weights none of whose pairs exceeds the x86 limit, uint8 (zero point 128)
    /// the others, so that no class saturates and the numbers are those of unlimited int8 (the
    /// default: an export runs where its user runs it, not where it was made).
    #[default]
    #[serde(rename = "any")]
    Any,
    /// x86-64 with AVX2, or AVX-512 without VNNI (Intel before Cascade Lake / Ice Lake, AMD Zen
    /// 1–3): `vpmaddubsw` saturates int16 pair sums, so weights are kept within the pair limit
    /// (all of them: u8×s8 speed, about 1 dB below unlimited weights).
    #[serde(rename = "x86-avx2")]
    X86Avx2,
    /// x86-64 with AVX-512 VNNI or AVX-VNNI: exact int32 sums, full 8-bit weights.
    #[serde(rename = "x86-vnni")]
    X86Vnni,
    /// ARM64 (dot-product or widening multiplies): exact int32 sums, full 8-bit weights.
    #[serde(rename = "arm64")]
    Arm64,
}

impl TargetCpu {
    pub const ALL: [TargetCpu; 4] = [Self::Any, Self::X86Avx2, Self::X86Vnni, Self::Arm64];

    pub fn name(self) -> &'static str {
        match self {
            Self::Any => "any",
            Self::X86Avx2 => "x86-avx2",
            Self::X86Vnni => "x86-vnni",
            Self::Arm64 => "arm64",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// What the class means, for messages and `mppq info`.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Any => "every CPU class (uint8 weights where int8 could overflow the x86 AVX2 pair sums)",
            Self::X86Avx2 => "x86-64 with AVX2 or AVX-512 but no VNNI (int16 pair sums saturate)",
            Self::X86Vnni => "x86-64 with AVX-512 VNNI or AVX-VNNI (exact int32 sums)",
            Self::Arm64 => "ARM64 (exact int32 sums)",
        }
    }

    /// Whether some CPU this export may run on adds weight pairs in a saturating int16.
    pub fn may_saturate(self) -> bool {
        matches!(self, Self::Any | Self::X86Avx2)
    }

    /// The class of the CPU this process runs on.
    pub fn host() -> Self {
        if cfg!(target_arch = "aarch64") {
            Self::Arm64
        } else if cfg!(target_arch = "x86_64") && !mppq_exec::cpu::has_vnni() {
            Self::X86Avx2
        } else if cfg!(target_arch = "x86_64") {
            Self::X86Vnni
        } else {
            Self::Any
        }
    }
}

impl std::fmt::Display for TargetCpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The pairs ORT's u8×s8 kernels add in one int16 for the weight of `op` (a Conv, MatMul or
/// Gemm reading a constant weight of shape `weight`), as a walk of the weight's reduction axes; `None` for other
/// operations and for weights no kernel pairs. Read from MLAS's packing and checked under
/// `qemu-x86_64 -cpu Haswell` on ORT 1.31 (docs/platforms.md, "CPU classes"): reduction
/// positions `2j` and `2j + 1` share an int16, K padded with zeros at its end only.
/// - Conv `[OC, IC/g, KH, KW]`: K = (kh, kw, ic), channels fastest, in the im2col GEMM and the
///   symmetric indirect kernel alike; with an odd channel count pairs run on across kernel
///   positions. Depthwise convolutions (one input and one output channel per group) run a kernel
///   that widens to int32 first: no pairs.
/// - MatMul `B [..., K, N]` and Gemm `B [K, N]` (`[N, K]` with transB): pairs along K.
pub fn x86_pair_limit(graph: &Graph, op: OpId, weight: &[usize]) -> Option<PairLimit> {
    let op = graph.operation(op).ok()?;
    if !op.in_default_domain() {
        return None;
    }
    let walk = |axes: Vec<usize>| PairLimit::x86(vec![PairOrder { axes, restart_per_position: false }]);
    match op.op_type.as_str() {
        "Conv" if weight.len() >= 3 => {
            let groups = usize::try_from(op.attr_int("group", 1).ok()?).ok()?;
            if weight[1] == 1 && weight[0] == groups {
                return None;
            }
            // (kh, kw, …, ic): the spatial axes in order, then the channels.
            let mut axes: Vec<usize> = (2..weight.len()).collect();
            axes.push(1);
            Some(walk(axes))
        }
        "MatMul" if weight.len() >= 2 => Some(walk(vec![weight.len() - 2])),
        "Gemm" if weight.len() == 2 => Some(walk(vec![usize::from(op.attr_int("transB", 0).ok()? != 0)])),
        _ => None,
    }
}

/// Which integer arithmetic a quantized graph's export asks of the CPU: the target class and,
/// per weight of a Conv/MatMul/Gemm, how it was made to fit it. Shown by the report, so that a
/// user sees what was simulated and where else the export would compute something different.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IntegerArithmetic {
    /// The target class simulated (`any`, `x86-avx2`, `x86-vnni`, `arm64`).
    pub target: String,
    /// int8 weights kept within the x86 pair limit.
    pub limited_weights: usize,
    /// uint8 weights (zero point 128), where an int8 pair would exceed the limit.
    pub unsigned_weights: usize,
    /// int8 weights of the full range.
    pub full_int8_weights: usize,
    /// Operations whose int8 weight has a pair that can overflow the int16 sums of x86 CPUs
    /// without VNNI (what ORT there computes differently from this simulation).
    pub saturating_on_x86_avx2: Vec<String>,
}

impl IntegerArithmetic {
    /// Reads the weights' configs of `graph` (quantized for `target`).
    pub fn of(graph: &Graph, target: TargetCpu) -> Self {
        let mut out = Self { target: target.name().to_string(), ..Self::default() };
        for (id, op) in graph.operations() {
            let Some(config) = op.quant_config.as_ref().and_then(|c| c.input_configs.get(1)?.as_ref()) else {
                continue;
            };
            let Some(var) = op.inputs().get(1).copied().flatten() else { continue };
            let Some(value) = graph.variable(var).ok().and_then(|v| v.value.as_ref()) else { continue };
            if config.policy.is_floating() || config.num_of_bits != 8 || config.scale.is_empty() {
                continue;
            }
            let Some(limit) = x86_pair_limit(graph, id, value.shape()) else { continue };
            if config.pair_limit.is_some() {
                out.limited_weights += 1;
            } else if config.quant_min >= 0 {
                out.unsigned_weights += 1;
            } else {
                out.full_int8_weights += 1;
                if saturates(&limit, config, value) {
                    out.saturating_on_x86_avx2.push(op.name.clone());
                }
            }
        }
        out
    }

    /// One line for the terminal: what was simulated, and a warning when another class would
    /// compute something else.
    pub fn summary(&self) -> String {
        let mut line = format!(
            "integer arithmetic simulated for CPU class `{}`: {} int8 weights within the x86 pair limit, {} uint8, {} full-range int8",
            self.target, self.limited_weights, self.unsigned_weights, self.full_int8_weights
        );
        if self.unsigned_weights > 0 {
            line.push_str(
                " (uint8 weights: exact on every CPU, but ORT's u8×u8 kernels run about 3× slower than u8×s8 on VNNI CPUs; \
                 deploying on VNNI or ARM64 CPUs only: --target-cpu x86-vnni or arm64)",
            );
        }
        if !self.saturating_on_x86_avx2.is_empty() {
            line.push_str(&format!(
                "\nwarning: {} weights (first: {}) can overflow the int16 pair sums of ONNX Runtime on x86 CPUs without VNNI (AVX2, AVX-512 without VNNI): there the export computes less accurately than simulated; `--target-cpu any` makes it exact on every CPU",
                self.saturating_on_x86_avx2.len(),
                self.saturating_on_x86_avx2[0]
            ));
        }
        line
    }
}

/// Whether the rounded codes of `value` under `config` (int8, zero point 0) have a pair above
/// `limit`.
fn saturates(limit: &PairLimit, config: &mppq_ir::quant::TensorQuantConfig, value: &mppq_ir::TensorData) -> bool {
    let Ok(values) = value.to_f32_vec() else { return false };
    let range = (config.quant_min, config.quant_max);
    let round = |v: f32| config.rounding.round(f64::from(v)) as f32;
    let codes = mppq_ir::quant::pair_limit::channel_codes(
        &values,
        value.shape(),
        config.channel_axis,
        &config.scale,
        range,
        round,
    );
    config.offset.iter().all(|o| *o == 0.0) && codes.is_some_and(|codes| limit.violations(&codes, value.shape()) > 0)
}
