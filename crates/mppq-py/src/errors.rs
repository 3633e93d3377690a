//! Errors as Python exceptions. The classes live in the package (`mppq_rs.errors`), so that
//! Python code can subclass, document and `except` them; each carries the message the CLI prints
//! (file, node, op type, what would fix it). A panic (a bug in mppq) becomes `InternalError`,
//! never a crashed interpreter.

use mppq_api::ApiError;
use mppq_api::exec::ExecError;
use pyo3::prelude::*;

/// An instance of `mppq_rs.errors.<class>` carrying `message`, as a `PyErr`.
fn raise(class: &str, message: String) -> PyErr {
    Python::attach(|py| {
        let made = py.import("mppq_rs.errors").and_then(|m| m.getattr(class)).and_then(|c| c.call1((message.clone(),)));
        match made {
            Ok(exception) => PyErr::from_value(exception),
            // The package is not importable (the native module loaded alone): still an exception.
            Err(_) => pyo3::exceptions::PyRuntimeError::new_err(message),
        }
    })
}

/// The exception class an API error belongs to: by what the user must fix (the model, the data,
/// the setting, a file), then by the stage that failed.
fn class_of(e: &ApiError) -> &'static str {
    use mppq_api::export::ExportError as Ex;
    use mppq_api::onnx::OnnxError;
    use mppq_api::passes::PassError;
    match e {
        ApiError::Onnx(OnnxError::Read { .. } | OnnxError::Write { .. }) => "FileError",
        ApiError::Onnx(_) | ApiError::Ir(_) | ApiError::Dispatch(_) => "ModelError",
        ApiError::Exec(e) if matches!(**e, ExecError::Stopped) => "Interrupted",
        ApiError::Exec(e) if matches!(**e, ExecError::Input { .. }) => "DataError",
        ApiError::Exec(_) => "ModelError",
        ApiError::Data { .. } => "DataError",
        ApiError::Setting(_) | ApiError::Pass(PassError::Setting(_)) => "SettingError",
        ApiError::Pass(PassError::Exec { source, .. }) => match **source {
            ExecError::Stopped => "Interrupted",
            ExecError::Unsupported { .. } | ExecError::NotImplemented { .. } => "ModelError",
            _ => "QuantizationError",
        },
        ApiError::Export(Ex::Setting(_) | Ex::BadOption { .. }) => "SettingError",
        ApiError::Export(Ex::Io { .. }) | ApiError::Io { .. } => "FileError",
        ApiError::Export(Ex::Data { .. } | Ex::Json { .. }) => "DataError",
        ApiError::Export(_) => "ExportError",
        ApiError::Quant(_) | ApiError::Pass(_) | ApiError::Training(_) | ApiError::Analysis { .. } => {
            "QuantizationError"
        }
    }
}

/// The Python exception for an API error.
pub fn to_py(e: ApiError) -> PyErr {
    raise(class_of(&e), e.to_string())
}

/// A `DataError` with `message`.
pub fn data_error(message: String) -> PyErr {
    raise("DataError", message)
}

/// A `SettingError` with `message`.
pub fn setting_error(message: String) -> PyErr {
    raise("SettingError", message)
}

/// Runs `work`, turning a panic into `InternalError` (with the panic's message).
pub fn guard<T>(work: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
        Ok(result) => result,
        Err(payload) => {
            let what = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            Err(raise(
                "InternalError",
                format!("internal error (a bug in mppq {}; please report it): {what}", env!("CARGO_PKG_VERSION")),
            ))
        }
    }
}

/// `?` for API results inside the binding.
pub trait OrRaise<T> {
    fn or_raise(self) -> PyResult<T>;
}

impl<T> OrRaise<T> for Result<T, ApiError> {
    fn or_raise(self) -> PyResult<T> {
        self.map_err(to_py)
    }
}
