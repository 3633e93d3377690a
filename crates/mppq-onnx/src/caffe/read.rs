//! Reading a Caffe net: the `.prototxt` (protobuf text format, parsed against the descriptor of
//! our `caffe.proto`), the `.caffemodel` (binary protobuf), legacy V1 layers upgraded to
//! `LayerParameter`, layers filtered by Caffe's TEST-phase rules, and the trained blobs of each
//! layer looked up by layer name (as Caffe's `CopyTrainedLayersFrom` does).

use super::error::{CaffeError, Result};
use super::schema::{
    BlobProto, DESCRIPTOR_SET, LayerParameter, NetParameter, NetState, NetStateRule, Phase, V1LayerParameter,
    v1_layer_parameter::LayerType,
};
use miette::Diagnostic;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage};
use std::collections::HashMap;

/// Parses a `.prototxt`; a syntax error or a field caffe.proto lacks names its line and column.
pub(crate) fn parse_prototxt(file: &str, text: &str) -> Result<NetParameter> {
    let net_error = |message: String| CaffeError::Net { file: file.to_string(), message };
    let pool = DescriptorPool::decode(DESCRIPTOR_SET)
        .map_err(|e| net_error(format!("the built-in caffe.proto descriptor is unreadable: {e}")))?;
    let desc = pool
        .get_message_by_name("caffe.NetParameter")
        .ok_or_else(|| net_error("the built-in caffe.proto descriptor lacks caffe.NetParameter".into()))?;
    let message = DynamicMessage::parse_text_format(desc, text).map_err(|e| {
        let offset = e.labels().and_then(|mut labels| labels.next()).map_or(text.len(), |l| l.offset());
        let (line, column) = line_column(text, offset);
        let mut message = e.to_string();
        if message.contains("field") && message.contains("not found") {
            message.push_str(
                " (mppq reads the layers of BVLC Caffe's public caffe.proto; fields of forks such as \
                 SSD's permute_param or prior_box_param are not in it)",
            );
        }
        CaffeError::Text { file: file.to_string(), line, column, message }
    })?;
    message.transcode_to::<NetParameter>().map_err(|source| CaffeError::Decode { file: file.to_string(), source })
}

/// 1-based line and column of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Decodes a `.caffemodel`.
pub(crate) fn decode_caffemodel(file: &str, bytes: &[u8]) -> Result<NetParameter> {
    NetParameter::decode(bytes).map_err(|source| CaffeError::Decode { file: file.to_string(), source })
}

/// The net's layers in file order, V1 layers upgraded, without those Caffe leaves out of a
/// TEST-phase net (its `include`/`exclude` rules).
pub(crate) fn active_layers(net: &NetParameter) -> Vec<LayerParameter> {
    let state = NetState { phase: Some(Phase::Test as i32), ..net.state.clone().unwrap_or_default() };
    all_layers(net).into_iter().filter(|l| included(l, &state)).collect()
}

fn all_layers(net: &NetParameter) -> Vec<LayerParameter> {
    net.layer.iter().cloned().chain(net.layers.iter().map(upgrade_v1)).collect()
}

/// Caffe's `Net::FilterNet`: with `include` rules a layer is kept if one is met; otherwise it is
/// dropped if one of its `exclude` rules is met.
fn included(layer: &LayerParameter, state: &NetState) -> bool {
    if layer.include.is_empty() {
        !layer.exclude.iter().any(|r| meets(state, r))
    } else {
        layer.include.iter().any(|r| meets(state, r))
    }
}

/// Caffe's `Net::StateMeetsRule`.
fn meets(state: &NetState, rule: &NetStateRule) -> bool {
    if rule.phase.is_some_and(|p| p != state.phase() as i32) {
        return false;
    }
    if rule.min_level.is_some_and(|min| state.level() < min) || rule.max_level.is_some_and(|max| state.level() > max) {
        return false;
    }
    rule.stage.iter().all(|s| state.stage.contains(s)) && !rule.not_stage.iter().any(|s| state.stage.contains(s))
}

/// A legacy V1 layer as the `LayerParameter` Caffe's `UpgradeV1LayerParameter` makes of it.
fn upgrade_v1(v1: &V1LayerParameter) -> LayerParameter {
    LayerParameter {
        name: v1.name.clone(),
        r#type: Some(v1_type_name(v1.r#type()).to_string()),
        bottom: v1.bottom.clone(),
        top: v1.top.clone(),
        blobs: v1.blobs.clone(),
        include: v1.include.clone(),
        exclude: v1.exclude.clone(),
        loss_weight: v1.loss_weight.clone(),
        concat_param: v1.concat_param,
        convolution_param: v1.convolution_param.clone(),
        dropout_param: v1.dropout_param,
        eltwise_param: v1.eltwise_param.clone(),
        inner_product_param: v1.inner_product_param.clone(),
        lrn_param: v1.lrn_param,
        pooling_param: v1.pooling_param,
        power_param: v1.power_param,
        relu_param: v1.relu_param,
        sigmoid_param: v1.sigmoid_param,
        softmax_param: v1.softmax_param,
        slice_param: v1.slice_param.clone(),
        tanh_param: v1.tanh_param,
        ..Default::default()
    }
}

/// The layer type name Caffe's upgrade gives a V1 layer type.
fn v1_type_name(t: LayerType) -> &'static str {
    use LayerType::*;
    match t {
        None => "",
        Absval => "AbsVal",
        Accuracy => "Accuracy",
        Argmax => "ArgMax",
        Bnll => "BNLL",
        Concat => "Concat",
        ContrastiveLoss => "ContrastiveLoss",
        Convolution => "Convolution",
        Data => "Data",
        Deconvolution => "Deconvolution",
        Dropout => "Dropout",
        DummyData => "DummyData",
        EuclideanLoss => "EuclideanLoss",
        Eltwise => "Eltwise",
        Exp => "Exp",
        Flatten => "Flatten",
        Hdf5Data => "HDF5Data",
        Hdf5Output => "HDF5Output",
        HingeLoss => "HingeLoss",
        Im2col => "Im2col",
        ImageData => "ImageData",
        InfogainLoss => "InfogainLoss",
        InnerProduct => "InnerProduct",
        Lrn => "LRN",
        MemoryData => "MemoryData",
        MultinomialLogisticLoss => "MultinomialLogisticLoss",
        Mvn => "MVN",
        Pooling => "Pooling",
        Power => "Power",
        Relu => "ReLU",
        Sigmoid => "Sigmoid",
        SigmoidCrossEntropyLoss => "SigmoidCrossEntropyLoss",
        Silence => "Silence",
        Softmax => "Softmax",
        SoftmaxLoss => "SoftmaxWithLoss",
        Split => "Split",
        Slice => "Slice",
        Tanh => "TanH",
        WindowData => "WindowData",
        Threshold => "Threshold",
    }
}

/// The trained blobs of a `.caffemodel`, by layer name.
pub(crate) struct Weights {
    by_layer: HashMap<String, Vec<BlobProto>>,
}

impl Weights {
    pub(crate) fn new(model: &NetParameter) -> Self {
        let by_layer = all_layers(model).into_iter().map(|l| (l.name.unwrap_or_default(), l.blobs)).collect();
        Self { by_layer }
    }

    /// The blobs of `layer`: the caffemodel's, else those written in the prototxt itself.
    pub(crate) fn blobs<'a>(&'a self, layer: &'a LayerParameter) -> &'a [BlobProto] {
        match self.by_layer.get(layer.name()) {
            Some(blobs) if !blobs.is_empty() => blobs,
            _ => &layer.blobs,
        }
    }
}
