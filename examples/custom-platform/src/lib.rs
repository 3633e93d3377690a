//! A user-defined platform for mppq, written the way a user outside this repository would: it
//! depends on `mppq-api` only and uses nothing but its public API.
//!
//! The imaginary target, `example-dsp`, runs only convolutions (and the Relu right after them)
//! in int8 with power-of-two scales — a fixed-point DSP shifts instead of multiplying — and
//! everything else in float. It brings:
//! - a dispatcher, [`ConvOnly`] (`conv-only`): Conv and a Relu fed by a quantized Conv are
//!   quantized, shape-or-index work stays SOI, the rest FP32;
//! - a quantizer, [`DspQuantizer`]: symmetric per-tensor int8, power-of-two scales;
//! - an operator implementation, [`DspRelu`]: the DSP's own Relu kernel, used whenever this
//!   platform is simulated (it counts its calls so the test can see it ran);
//! - an exporter, [`ShiftTable`] (`dsp-shifts`): the DSP's table of right shifts (`-log2(scale)`)
//!   per quantized tensor, as `dsp_shifts.txt`;
//! - the platform, [`ExampleDsp`], bundling them (parser: the default; exporters: the QDQ model
//!   and its own table).

use mppq_api::dispatch::analysis::{Proposal, finalize, prepare};
use mppq_api::dispatch::{Dispatch, DispatchContext, DispatchError, Dispatcher, register_dispatcher};
use mppq_api::exec::{Kernel, KernelContext, OpNode, OpRegistry, Tensor, Value};
use mppq_api::export::{Artifact, ExportOptions, Exporter, NoOptions, parse_options};
use mppq_api::ir::quant::{
    ObserverKind, OperationQuantConfig, QuantizationPolicy, QuantizationProperty as P, QuantizationState,
    TargetPrecision, TensorQuantConfig,
};
use mppq_api::ir::{Graph, OpId};
use mppq_api::quant::quantizer::Quantizer;
use mppq_api::{Platform, QuantizerOptions};
use std::collections::HashMap;
use std::fmt::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Registers the dispatcher and the platform (call once; a second call reports "already registered").
pub fn register() -> mppq_api::Result<()> {
    register_dispatcher(Arc::new(ConvOnly))?;
    mppq_api::register_exporter(Arc::new(ShiftTable))?;
    mppq_api::register_platform(Arc::new(ExampleDsp))
}

/// Quantizes Conv, and a Relu whose input comes from a quantized Conv.
pub struct ConvOnly;

impl Dispatcher for ConvOnly {
    fn name(&self) -> &str {
        "conv-only"
    }

    fn dispatch(&self, graph: &Graph, ctx: &DispatchContext) -> Result<Dispatch, DispatchError> {
        let prep = prepare(graph, ctx)?;
        let mut proposals = HashMap::new();
        for id in &prep.order {
            let op = graph.operation(*id)?;
            let fed_by_conv =
                op.inputs().iter().flatten().any(|v| {
                    graph.producer(*v).and_then(|p| graph.operation(p).ok()).is_some_and(|p| p.op_type == "Conv")
                });
            let proposal = match (prep.soi.get(id), op.op_type.as_str()) {
                (Some(reason), _) => Proposal::Soi(reason.clone()),
                (None, "Conv") => Proposal::Quant("conv-only: the DSP runs convolutions".into()),
                (None, "Relu") if fed_by_conv => Proposal::Quant("conv-only: Relu after a Conv runs on the DSP".into()),
                (None, _) => Proposal::Fp32("conv-only: runs on the host CPU".into()),
            };
            proposals.insert(*id, proposal);
        }
        finalize(self.name(), graph, ctx, &prep, &proposals)
    }
}

/// Symmetric per-tensor int8 with power-of-two scales; int32 biases.
pub struct DspQuantizer;

fn pow2_int8() -> mppq_api::quant::Result<TensorQuantConfig> {
    let mut c = TensorQuantConfig::linear(8, true, None)?;
    c.policy = QuantizationPolicy::new(&[P::PerTensor, P::Linear, P::Symmetric, P::PowerOf2])?;
    Ok(c)
}

impl Quantizer for DspQuantizer {
    fn name(&self) -> &str {
        "example-dsp"
    }

    fn target_precision(&self) -> TargetPrecision {
        TargetPrecision::Int8
    }

    fn quant_operation_types(&self) -> Vec<&'static str> {
        vec!["Conv", "Relu"]
    }

    fn init_quantize_config(&self, graph: &Graph, id: OpId) -> mppq_api::quant::Result<OperationQuantConfig> {
        let op = graph.operation(id)?;
        let mut inputs = Vec::new();
        for (slot, var) in op.inputs().iter().enumerate() {
            inputs.push(match (slot, var) {
                (_, None) => None,
                // Conv bias: int32 per output channel, scale = s_in * s_w, derived after calibration.
                (2, Some(_)) => {
                    let mut c = TensorQuantConfig::linear(32, true, Some(0))?;
                    c.state = QuantizationState::PassiveInit;
                    c.observer = ObserverKind::Passive;
                    Some(c)
                }
                _ => Some(pow2_int8()?),
            });
        }
        let outputs = op.outputs().iter().map(|o| o.map(|_| pow2_int8()).transpose()).collect::<Result<_, _>>()?;
        Ok(OperationQuantConfig { input_configs: inputs, output_configs: outputs })
    }
}

/// How many times [`DspRelu`] ran (for the test).
pub static DSP_RELU_CALLS: AtomicUsize = AtomicUsize::new(0);

/// The DSP's Relu kernel (here: max(x, 0) on the host, counting its calls).
pub struct DspRelu;

impl Kernel for DspRelu {
    fn run(&self, ctx: &KernelContext<'_>, inputs: Vec<Option<Value>>) -> mppq_api::exec::Result<Vec<Option<Value>>> {
        let x = ctx.inputs(inputs).tensor(0)?;
        let shape = x.shape();
        let values = x.to_f32_vec().into_iter().map(|v| v.max(0.0)).collect();
        DSP_RELU_CALLS.fetch_add(1, Ordering::Relaxed);
        Ok(vec![Some(Value::Tensor(Tensor::from_f32(&shape, values, ctx.device)))])
    }
}

/// The platform bundling the pieces above.
pub struct ExampleDsp;

impl Platform for ExampleDsp {
    fn name(&self) -> &str {
        "example-dsp"
    }

    fn description(&self) -> &str {
        "example: int8 power-of-two convolutions on a DSP, the rest in float"
    }

    fn dispatcher(&self) -> &str {
        "conv-only"
    }

    fn quantizer(&self, options: &QuantizerOptions) -> mppq_api::Result<Box<dyn Quantizer>> {
        options.honour_only(self.name(), &[])?;
        Ok(Box::new(DspQuantizer))
    }

    fn exporters(&self) -> Vec<String> {
        vec!["qdq".into(), "dsp-shifts".into()]
    }

    fn register_operators(&self, registry: &mut OpRegistry) {
        registry.register("", "Relu", 1, Arc::new(|_: &OpNode<'_>| Ok(Box::new(DspRelu) as Box<dyn Kernel>)));
    }
}

/// The DSP's shift table: one line `tensor shift` per quantized 8-bit tensor, where the DSP
/// computes `x >> shift` for a scale of `2^-shift`.
pub struct ShiftTable;

impl Exporter for ShiftTable {
    fn name(&self) -> &str {
        "dsp-shifts"
    }

    fn description(&self) -> &str {
        "example: the DSP's right-shift per quantized tensor (dsp_shifts.txt)"
    }

    fn check_options(&self, options: &ExportOptions) -> mppq_api::export::Result<()> {
        parse_options::<NoOptions>(self.name(), options).map(|_| ())
    }

    fn export(
        &self,
        model: &mppq_api::ir::Model,
        _: &ExportOptions,
        dir: &Path,
    ) -> mppq_api::export::Result<Vec<Artifact>> {
        let graph = &model.graph;
        let mut table = String::new();
        for (_, op) in graph.operations() {
            let Some(config) = &op.quant_config else { continue };
            for (c, var) in config.output_configs.iter().zip(op.outputs()) {
                if let (Some(c), Some(var)) = (c, var)
                    && c.num_of_bits == 8
                    && c.state.is_active()
                {
                    let _ = writeln!(table, "{} {}", graph.var_name(*var), -c.scale[0].log2());
                }
            }
        }
        let path = dir.join("dsp_shifts.txt");
        std::fs::write(&path, table)
            .map_err(|source| mppq_api::export::ExportError::Io { path: path.display().to_string(), source })?;
        Ok(vec![Artifact::new("DSP shift table", path)])
    }
}
