//! Which hardware runs the graph: a thin wrapper over Burn's run-time `Device` that configures
//! it for ONNX (64-bit default integers, so indices and shapes stay exact).

use burn::tensor::{FloatDType, IntDType};

/// A compute device. `Device::cpu()` is Burn's `flex` backend; `Device::wgpu()` (feature
/// `wgpu`) the default GPU adapter.
#[derive(Clone, Debug)]
pub struct Device {
    inner: burn::tensor::Device,
}

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

    /// Selects by name: `cpu` or `wgpu`.
    pub fn by_name(name: &str) -> Option<Self> {
        match name {
            "cpu" | "flex" => Some(Self::cpu()),
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

    pub fn dispatch(&self) -> &burn::backend::DispatchDevice {
        self.inner.as_dispatch()
    }
}

impl Default for Device {
    fn default() -> Self {
        Self::cpu()
    }
}
