//! The platform registry: built-ins ([`super::builtin`]) first, then what users register from
//! their own crates; a name is taken once.

use super::Platform;
use crate::error::Result;
use mppq_exec::OpRegistry;
use mppq_ir::registry::Registry;
use std::sync::Arc;

static PLATFORMS: Registry<dyn Platform> =
    Registry::new("platform", || super::builtin::builtin().into_iter().map(|p| (p.name().to_string(), p)).collect());

/// Registers a platform; a name already taken is an error (built-ins cannot be replaced by accident).
pub fn register_platform(platform: Arc<dyn Platform>) -> Result<()> {
    let name = platform.name().to_string();
    Ok(PLATFORMS.register(&name, platform)?)
}

/// The platform called `name`; the error lists the known ones.
pub fn platform_by_name(name: &str) -> Result<Arc<dyn Platform>> {
    Ok(PLATFORMS.get(name)?)
}

/// Names of every registered platform, sorted.
pub fn platform_names() -> Vec<String> {
    PLATFORMS.names()
}

/// The operator table for simulating `platform`: built-ins, then the platform's own operators
/// ([`Platform::register_operators`]; later registrations win).
pub fn operator_registry(platform: &dyn Platform) -> OpRegistry {
    let mut registry = OpRegistry::builtin();
    platform.register_operators(&mut registry);
    registry
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::QuantizerOptions;

    #[test]
    fn builtins_are_listed_and_unknown_names_list_them() {
        let names = platform_names();
        for n in [
            "default",
            "ort-int8",
            "trt-int8",
            "trt-lowbit",
            "trt-implicit-int8",
            "lowbit",
            "fp8-e4m3",
            "fp8-e5m2",
            "academic-int8",
            "pow2-int8",
            "openvino-int8",
            "ncnn-int8",
            "qnn-int8",
            "snpe-int8",
            "ppl-cuda-int8",
        ] {
            assert!(names.iter().any(|x| x == n), "{n} missing from {names:?}");
        }
        let err = platform_by_name("tensorrt").err().unwrap().to_string();
        assert!(err.contains("unknown platform `tensorrt`") && err.contains("default"), "{err}");
        let dup = register_platform(platform_by_name("default").unwrap()).unwrap_err().to_string();
        assert!(dup.contains("already registered"), "{dup}");
    }

    #[test]
    fn fixed_options_are_refused_not_ignored() {
        let p = platform_by_name("trt-int8").unwrap();
        let err =
            p.quantizer(&QuantizerOptions { symmetric: Some(false), ..Default::default() }).err().unwrap().to_string();
        assert!(err.contains("symmetric") && err.contains("trt-int8"), "{err}");
    }
}
