//! Which hardware runs the graph: a thin wrapper over Burn's run-time `Device` that configures
//! it for ONNX (64-bit default integers, so indices and shapes stay exact), says what the
//! device can hold (bool storage, element types, rank-0 shapes) and remembers when a backend
//! panic has made it unusable.

use burn::backend::{Backend, Dispatch, DispatchDevice};
use burn::tensor::{BoolDType, DType, FloatDType, IntDType};
use std::sync::Mutex;

/// A compute device. `Device::cpu()` is Burn's `flex` backend; `Device::wgpu()` (feature
/// `wgpu`) the default GPU adapter; `Device::ndarray()` (feature `ndarray`) Burn's older CPU
/// backend.
#[derive(Clone, Debug)]
pub struct Device {
    inner: burn::tensor::Device,
}

/// Devices on which a backend panic was caught. A panic in the middle of a cubecl launch can
/// leave the server's buffers inconsistent (later results were seen to be wrong), so such a
/// device must not compute again in this process.
static POISONED: Mutex<Vec<(DispatchDevice, String)>> = Mutex::new(Vec::new());

impl Device {
    /// The CPU backend (`flex`).
    pub fn cpu() -> Self {
        Self::configured(burn::tensor::Device::flex())
    }

    /// The default wgpu adapter.
    #[cfg(feature = "wgpu")]
    pub fn wgpu() -> Self {
        Self::configured(burn::tensor::Device::wgpu(burn::tensor::DeviceKind::DefaultDevice))
    }

    /// Burn's `ndarray` CPU backend, for integrators who pinned it (deprecated upstream in favour
    /// of flex). The hand-written CPU kernels take flex tensors only, so every operator runs
    /// Burn's ndarray implementation. What ndarray cannot hold is held by stand-ins as on wgpu:
    /// scalars as `[1]` (its arrays have 1 to 6 dimensions), F16 and BF16 in F32.
    #[cfg(feature = "ndarray")]
    #[allow(deprecated)] // the deprecated backend is this constructor's point
    pub fn ndarray() -> Self {
        Self::configured(burn::tensor::Device::ndarray())
    }

    /// The same hardware with Burn's autodiff: tensors made on it record the operations run on
    /// them, so the training passes get gradients through the same operator code. The
    /// hand-written CPU kernels take only plain flex tensors; on this device the Burn operation
    /// chains run instead (same forward numbers, tested in `tests/autodiff.rs`).
    pub fn autodiff(&self) -> Self {
        Self { inner: self.inner.clone().autodiff() }
    }

    /// The device a tensor lives on.
    pub fn of(tensor: &burn::backend::DispatchTensor) -> Self {
        use burn::backend::TensorMetadata;
        Self { inner: burn::tensor::Device::new(tensor.device()) }
    }

    /// Whether tensors on this device record operations for gradients.
    pub fn is_autodiff(&self) -> bool {
        matches!(self.dispatch(), DispatchDevice::Autodiff(_))
    }

    /// Selects by name: `cpu`, `wgpu` or `ndarray` (the last two in builds with their feature).
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "cpu" | "flex" => Some(Self::cpu()),
            #[cfg(feature = "ndarray")]
            "ndarray" => Some(Self::ndarray()),
            #[cfg(feature = "wgpu")]
            "wgpu" | "gpu" => Some(Self::wgpu()),
            _ => None,
        }
    }

    fn configured(mut inner: burn::tensor::Device) -> Self {
        // Device settings are global per device and can be set once, before its first tensor;
        // a second call reports "already initialized", which is fine: we set the same thing.
        let _ = inner.configure((FloatDType::F32, IntDType::I64));
        Self { inner }
    }

    pub fn burn(&self) -> &burn::tensor::Device {
        &self.inner
    }

    pub fn dispatch(&self) -> &DispatchDevice {
        self.inner.as_dispatch()
    }

    /// The bool storage of this device's comparison results (`Native` on flex, `U32` on wgpu).
    pub fn bool_dtype(&self) -> BoolDType {
        bool_dtype(self.dispatch())
    }

    /// Whether the device stores and computes `dtype` (wgpu lacks 8/16-bit ints and BF16).
    pub fn supports_dtype(&self, dtype: DType) -> bool {
        supports_dtype(self.dispatch(), dtype)
    }

    /// Whether the device is Burn's CPU backend `flex`, which holds every shape and type as ONNX
    /// does (and on which the hand-written CPU kernels run).
    pub fn is_cpu(&self) -> bool {
        is_cpu(self.dispatch())
    }

    /// Marks the device unusable after a caught backend panic (never the CPU, whose panics are
    /// assertions that leave no state behind). `why` names the node that panicked.
    pub fn poison(&self, why: String) {
        if self.is_cpu() {
            return;
        }
        let mut poisoned = POISONED.lock().unwrap_or_else(|e| e.into_inner());
        if !poisoned.iter().any(|(d, _)| d == self.dispatch()) {
            poisoned.push((self.dispatch().clone(), why));
        }
    }

    /// Why the device is unusable, if a backend panic poisoned it.
    pub fn poisoned(&self) -> Option<String> {
        let poisoned = POISONED.lock().unwrap_or_else(|e| e.into_inner());
        poisoned.iter().find(|(d, _)| d == self.dispatch()).map(|(_, why)| why.clone())
    }
}

impl Default for Device {
    fn default() -> Self {
        Self::cpu()
    }
}

/// The bool storage of comparison results on `device` (from its settings, never a constant:
/// cubecl cannot store `Native` bools).
pub fn bool_dtype(device: &DispatchDevice) -> BoolDType {
    burn::backend::get_device_settings::<Dispatch>(device).bool_dtype
}

/// Whether `device` stores and computes `dtype`.
pub fn supports_dtype(device: &DispatchDevice, dtype: DType) -> bool {
    <Dispatch as Backend>::supports_dtype(device, dtype)
}

/// Whether `device` is the CPU (`flex`) backend.
pub fn is_cpu(device: &DispatchDevice) -> bool {
    match device {
        DispatchDevice::Flex(_) => true,
        // Autodiff holds what the device it wraps holds.
        DispatchDevice::Autodiff(inner) => is_cpu(inner),
        #[allow(unreachable_patterns)] // without the `wgpu` feature
        _ => false,
    }
}
