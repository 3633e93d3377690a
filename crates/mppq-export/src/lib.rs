//! Export and import of quantized models: every format mppq writes and the registry of
//! exporters, in one crate.
//!
//! An [`Exporter`] writes one or more artifacts of a quantized model (the QDQ ONNX model a runtime
//! loads, a vendor's table, a parameter JSON) into an output directory. Exporters are registered by
//! name ([`register_exporter`]); a platform names its default ones, and a run picks them with
//! `mppq quantize --export NAME` or `exporters = [...]` in the setting file, each with its options
//! in an `[export.NAME]` section. Everything is checked before calibration starts
//! ([`resolve_exporters`], and the [`ExportPreflight`] pass right after the configs are set). Files
//! are written to a temporary name and renamed: an existing file is only replaced by a complete one.
//!
//! Rooms: the [`exporter`] trait, the [`registry`], the [`formats`] (one file each; adding one is
//! one file plus one line in the registry's built-in list, `docs/export.md`), the [`ranges`] the
//! range-table formats share, and [`import`]ing ranges calibrated by another tool.
//!
//! It sits above `mppq-passes` because the preflight and the import are pipeline passes, and
//! below `mppq-api`, which chooses the exporters for a platform and runs them.

pub mod error;
pub mod exporter;
pub mod formats;
pub mod import;
pub mod preflight;
pub mod ranges;
pub mod registry;

pub use error::{ExportError, Result};
pub use exporter::{Artifact, ExportOptions, Exporter, NoOptions, parse_options, write_file};
pub use import::{ImportRanges, read_ranges};
pub use preflight::ExportPreflight;
pub use registry::{
    DEFAULT_EXPORTERS, export_all, exporter_by_name, exporter_names, register_exporter, resolve_exporters,
};
