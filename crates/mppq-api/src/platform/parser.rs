//! Parsers: what reads a model file into the IR. Registered by name like platforms and
//! exporters ([`register_parser`]); [`parse_model`] asks each parser whether it reads a file
//! (by extension or content) and falls back to ONNX. Built-ins: `onnx` (`.onnx`, and anything no
//! other parser claims) and `caffe` (`.prototxt` with its `.caffemodel`). A parser produces
//! standard ONNX operations, so everything downstream (dispatch, quantization, export) works
//! unchanged; the export is ONNX whatever the source format was.
//!
//! Some formats keep weights in a second file: `weights` (`--weights FILE`, `weights = "..."` in
//! the setting) names it; a parser that has none refuses it rather than ignoring it.

use crate::error::{ApiError, Result};
use mppq_ir::Model;
use mppq_ir::registry::Registry;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Reads one model format into the IR.
pub trait Parser: Send + Sync {
    /// Unique name (`mppq parsers` lists them).
    fn name(&self) -> &str;
    /// One line for listings.
    fn description(&self) -> &str;
    /// Whether this parser reads `path` (its extension, or its first bytes).
    fn accepts(&self, path: &Path) -> bool;
    /// Reads the model; `weights` is the separate weights file of formats that have one.
    fn parse(&self, path: &Path, weights: Option<&Path>) -> Result<Model>;
}

/// `onnx`: ONNX files (with external data beside them).
struct Onnx;

impl Parser for Onnx {
    fn name(&self) -> &str {
        "onnx"
    }
    fn description(&self) -> &str {
        "ONNX (.onnx, external data beside it); any file no other parser claims"
    }
    fn accepts(&self, path: &Path) -> bool {
        path.extension().is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
    }
    fn parse(&self, path: &Path, weights: Option<&Path>) -> Result<Model> {
        if let Some(w) = weights {
            return Err(ApiError::Setting(format!(
                "`{}` is an ONNX model, which holds its own weights; --weights `{}` is for formats that keep them apart (Caffe's .caffemodel)",
                path.display(),
                w.display()
            )));
        }
        Ok(mppq_onnx::load_model(path)?)
    }
}

/// `caffe`: a Caffe network (`.prototxt`) with its trained weights (`.caffemodel`).
struct Caffe;

impl Parser for Caffe {
    fn name(&self) -> &str {
        "caffe"
    }
    fn description(&self) -> &str {
        "Caffe: NAME.prototxt with --weights NAME.caffemodel (found beside it when not given), converted to ONNX operations"
    }
    fn accepts(&self, path: &Path) -> bool {
        path.extension().is_some_and(|e| e.eq_ignore_ascii_case("prototxt"))
    }
    fn parse(&self, path: &Path, weights: Option<&Path>) -> Result<Model> {
        let weights: PathBuf = match weights {
            Some(w) => w.to_path_buf(),
            None => {
                let beside = path.with_extension("caffemodel");
                if !beside.exists() {
                    return Err(ApiError::data(
                        path,
                        format!(
                            "a Caffe network needs its trained weights: give --weights FILE.caffemodel (`{}` does not exist)",
                            beside.display()
                        ),
                    ));
                }
                beside
            }
        };
        Ok(mppq_onnx::caffe::load_caffe(path, &weights)?)
    }
}

fn builtin() -> Vec<(String, Arc<dyn Parser>)> {
    let all: Vec<Arc<dyn Parser>> = vec![Arc::new(Onnx), Arc::new(Caffe)];
    all.into_iter().map(|p| (p.name().to_string(), p)).collect()
}

static PARSERS: Registry<dyn Parser> = Registry::new("parser", builtin);

/// Registers a parser; a name already taken is an error.
pub fn register_parser(parser: Arc<dyn Parser>) -> Result<()> {
    let name = parser.name().to_string();
    Ok(PARSERS.register(&name, parser)?)
}

/// Names of every registered parser, sorted.
pub fn parser_names() -> Vec<String> {
    PARSERS.names()
}

/// The parser called `name`; the error lists the known ones.
pub fn parser_by_name(name: &str) -> Result<Arc<dyn Parser>> {
    Ok(PARSERS.get(name)?)
}

/// Reads `path` with the first parser other than `onnx` that accepts it, else as ONNX.
pub fn parse_model(path: &Path, weights: Option<&Path>) -> Result<Model> {
    for name in parser_names().into_iter().filter(|n| n != "onnx") {
        let parser = parser_by_name(&name)?;
        if parser.accepts(path) {
            return parser.parse(path, weights);
        }
    }
    parser_by_name("onnx")?.parse(path, weights)
}
