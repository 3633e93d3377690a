//! Executor of mppq (being built): runs an IR graph on Burn, in float and with quantization
//! simulation, on CPU (`flex`) and GPU (`wgpu`) through one operator code path. It will own the
//! operator registry (one file per operator), execution hooks and the fake-quant kernels.
