//! Raising a model's default-domain opset: the graph conversion of
//! [`mppq_ir::morph::upgrade_opset`] plus what the file records around it (the opset import and
//! the lowest IR version that opset may be written with). Model-local functions keep their own
//! opset imports and are not converted.

use mppq_ir::Model;
use mppq_ir::morph::{OpsetUpgrade, upgrade_opset};

/// Highest IR version this crate writes (ONNX Runtime 1.31 loads IR ≤ 13), and the newest it
/// knows (ONNX 1.21).
pub const MAX_IR_VERSION: i64 = 13;

/// Newest default-domain opset mppq reads and runs: the one place that decides it. ONNX's
/// backend test data already holds opset 27 (LinearAttention, CausalConvWithState, Range for
/// more types), which the executor passes; `cargo xtask conformance` fails on a passing case
/// whose opset is past this, so `mppq run` and `mppq quantize` never refuse what the executor
/// runs.
pub const MAX_OPSET: i64 = 27;

/// The lowest IR version ONNX allows with default-domain opset `opset` (ONNX's
/// `VERSION_TABLE`: opset 9 came with IR 4, 10 with 5, 11 with 6, 12–14 with 7, 15–18 with 8,
/// 19–20 with 9, 21 with 10).
pub fn min_ir_version(opset: i64) -> i64 {
    match opset {
        ..=8 => 3,
        9 => 4,
        10 => 5,
        11 => 6,
        12..=14 => 7,
        15..=18 => 8,
        19 | 20 => 9,
        _ => 10,
    }
}

/// Converts `model` to default-domain opset `to` (nothing when it is already there or newer):
/// rewrites the graph, sets the opset import and raises the IR version as the opset needs
/// (capped at [`MAX_IR_VERSION`]). Refuses, leaving the model untouched, when an
/// operation cannot be converted ([`mppq_ir::IrError::OpsetBlocked`]).
pub fn upgrade_model(model: &mut Model, to: i64) -> mppq_ir::Result<OpsetUpgrade> {
    let from = model.opset("").unwrap_or(1);
    if to <= from {
        return Ok(OpsetUpgrade { from, to: from, rewrites: Vec::new() });
    }
    let upgrade = upgrade_opset(&mut model.graph, from, to)?;
    model.opset_imports.shift_remove("ai.onnx");
    model.opset_imports.insert(String::new(), to);
    model.ir_version = model.ir_version.max(min_ir_version(to)).min(MAX_IR_VERSION);
    Ok(upgrade)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mppq_ir::{Attribute, Graph, Operation, Variable};

    #[test]
    fn imports_and_ir_version_follow_the_upgrade() {
        let mut g = Graph::new("g");
        let x = g.add_variable(Variable::new("x")).unwrap();
        let y = g.add_variable(Variable::new("y")).unwrap();
        g.add_graph_input(x).unwrap();
        let sq = Operation::new("Squeeze", "sq").with_opset(11).with_attr("axes", Attribute::Ints(vec![0]));
        g.add_operation(sq, &[Some(x)], &[Some(y)]).unwrap();
        g.add_graph_output(y).unwrap();
        let mut m = Model::new(g, 11);
        m.ir_version = 6;
        let up = upgrade_model(&mut m, 13).unwrap();
        assert_eq!((m.opset(""), m.ir_version, up.rewrites.len()), (Some(13), 7, 1));
        // Already there: nothing.
        assert!(upgrade_model(&mut m, 12).unwrap().rewrites.is_empty());
        assert_eq!(m.opset(""), Some(13));
    }
}
