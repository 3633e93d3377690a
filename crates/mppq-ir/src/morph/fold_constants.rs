//! `fold_constants`: Constant nodes become initializers, in the graph and in every sub-graph
//! (If/Loop/Scan bodies). A weight stored in a Constant node (PaddlePaddle exports keep every
//! Conv weight there) is then a weight like any other: the role table's weight slot reads a
//! parameter, so it is quantized per channel, symmetric and stored as integers, instead of as an
//! activation quantized at run time; BatchNormalization folding also needs its weights to be
//! initializers. Constants that are graph outputs, sparse or strings stay nodes.

use crate::error::Result;
use crate::{Attribute, Graph, OpId, Operation, TensorData};

/// The value of a Constant node, if it is a dense numeric one.
pub(crate) fn constant_value(op: &Operation) -> Result<Option<TensorData>> {
    let Some((name, value)) = op.attributes.iter().next() else { return Ok(None) };
    Ok(match (name.as_str(), value) {
        ("value", Attribute::Tensor(t)) => Some(t.clone()),
        ("value_float", Attribute::Float(v)) => Some(TensorData::scalar(*v)),
        ("value_floats", Attribute::Floats(v)) => Some(TensorData::from_vec(vec![v.len()], v)?),
        ("value_int", Attribute::Int(v)) => Some(TensorData::scalar(*v)),
        ("value_ints", Attribute::Ints(v)) => Some(TensorData::from_vec(vec![v.len()], v)?),
        _ => None,
    })
}

/// Turns every dense numeric Constant node of `graph` and of its sub-graphs into an initializer;
/// returns how many.
pub fn fold_constants(graph: &mut Graph) -> Result<usize> {
    let mut folded = 0;
    let ids: Vec<OpId> = graph.operations().map(|(id, _)| id).collect();
    for id in ids {
        let op = graph.operation_mut(id)?;
        for attribute in op.attributes.values_mut() {
            match attribute {
                Attribute::Graph(body) => folded += fold_constants(body)?,
                Attribute::Graphs(bodies) => {
                    for body in bodies {
                        folded += fold_constants(body)?;
                    }
                }
                _ => {}
            }
        }
        let op = graph.operation(id)?;
        if op.op_type != "Constant" || !op.in_default_domain() {
            continue;
        }
        let Some(Some(out)) = op.outputs().first().copied() else { continue };
        if graph.is_graph_output(out) {
            continue;
        }
        let Some(value) = constant_value(op)? else { continue };
        graph.remove_operation(id)?;
        graph.variable_mut(out)?.value = Some(value);
        folded += 1;
    }
    Ok(folded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_nodes_become_initializers_and_other_nodes_stay() {
        let mut g = Graph::new("g");
        let (x, w, y, k) =
            (g.ensure_variable("x"), g.ensure_variable("w"), g.ensure_variable("y"), g.ensure_variable("k"));
        g.add_graph_input(x).unwrap();
        let weight = TensorData::from_vec(vec![2, 1, 1, 1], &[0.5f32, -2.0]).unwrap();
        let c = Operation::new("Constant", "w_const").with_attr("value", Attribute::Tensor(weight.clone()));
        g.add_operation(c, &[], &[Some(w)]).unwrap();
        let ints = Operation::new("Constant", "k_const").with_attr("value_ints", Attribute::Ints(vec![1, 2]));
        g.add_operation(ints, &[], &[Some(k)]).unwrap();
        g.add_operation(Operation::new("Conv", "conv"), &[Some(x), Some(w)], &[Some(y)]).unwrap();
        g.add_graph_output(y).unwrap();
        assert_eq!(fold_constants(&mut g).unwrap(), 2);
        let types: Vec<_> = g.operations().map(|(_, o)| o.op_type.as_str()).collect();
        assert_eq!(types, ["Conv"]);
        assert_eq!(g.variable(w).unwrap().value.as_ref(), Some(&weight));
        assert_eq!(g.variable(k).unwrap().value.as_ref().unwrap().to_i64_vec().unwrap(), [1, 2]);
        assert_eq!(fold_constants(&mut g).unwrap(), 0, "nothing left to fold");
    }
}
