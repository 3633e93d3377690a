//! A fingerprint of what a graph computes in float, so that work derived from the float graph
//! alone (activation statistics of calibration) can be reused while the graph stays the same.

use crate::graph::Graph;
use crate::tensor::TensorBytes;
use xxhash_rust::xxh3::Xxh3;

impl Graph {
    /// A 64-bit hash of everything the float graph computes from: operations (type, domain,
    /// opset, attributes, wiring), variable names, initializer values, graph inputs and outputs.
    /// Precisions and quantization configs are left out: graphs that differ only in how they are
    /// quantized share a fingerprint. Weights are hashed with XXH3 (tens of GB/s), so this costs
    /// little next to one forward pass.
    pub fn float_fingerprint(&self) -> u64 {
        let mut h = Xxh3::new();
        let text = |h: &mut Xxh3, s: &str| {
            h.update(&(s.len() as u64).to_le_bytes());
            h.update(s.as_bytes());
        };
        for (id, op) in self.operations() {
            text(
                &mut h,
                &format!("{}|{}|{}|{}|{}|{:?}", id.0, op.op_type, op.domain, op.opset, op.name, op.attributes),
            );
            text(&mut h, &format!("{:?}->{:?}", op.inputs(), op.outputs()));
        }
        text(&mut h, &format!("{:?}->{:?}", self.inputs(), self.outputs()));
        for (id, var) in self.variables() {
            text(&mut h, &format!("{}|{}", id.0, var.name));
            let Some(value) = &var.value else { continue };
            text(&mut h, &format!("{:?}{:?}", value.dtype(), value.shape()));
            hash_bytes(&mut h, value);
        }
        h.digest()
    }
}

impl Graph {
    /// A 64-bit hash of the weights alone: every initializer (by name, in name order: ids and
    /// order of construction do not count) with its type, shape and bytes, sub-graphs' included.
    /// `quant.json` records it, so that applying the file to weights other than those it was
    /// made for (passes that change weights: equalization, training) is refused, not simulated.
    pub fn weights_fingerprint(&self) -> u64 {
        fn add(g: &Graph, h: &mut Xxh3) {
            let mut weights: Vec<(&str, &crate::tensor::TensorData)> =
                g.variables().filter_map(|(_, v)| v.value.as_ref().map(|t| (v.name.as_str(), t))).collect();
            weights.sort_by_key(|(name, _)| *name);
            for (name, value) in weights {
                let head = format!("{name}|{:?}{:?}", value.dtype(), value.shape());
                h.update(&(head.len() as u64).to_le_bytes());
                h.update(head.as_bytes());
                hash_bytes(h, value);
            }
            for (_, op) in g.operations() {
                for a in op.attributes.values() {
                    if let crate::Attribute::Graph(body) = a {
                        add(body, h);
                    }
                }
            }
        }
        let mut h = Xxh3::new();
        add(self, &mut h);
        h.digest()
    }
}

/// Adds a tensor's stored bytes (packed data, or each string) to `h`.
fn hash_bytes(h: &mut Xxh3, value: &crate::tensor::TensorData) {
    match value.bytes() {
        TensorBytes::Packed(bytes) => h.update(bytes),
        TensorBytes::Strings(strings) => strings.iter().for_each(|s| h.update(s)),
    }
}

#[cfg(test)]
mod tests {
    use crate::quant::TargetPrecision;
    use crate::{Graph, Operation, TensorData, Variable};

    fn graph(weight: f32) -> Graph {
        let mut g = Graph::new("g");
        let x = g.add_variable(Variable::new("x")).unwrap();
        g.add_graph_input(x).unwrap();
        let w = g.add_initializer("w", TensorData::from_vec(vec![2], &[weight, 2.0]).unwrap()).unwrap();
        let y = g.add_variable(Variable::new("y")).unwrap();
        g.add_operation(Operation::new("Mul", "mul"), &[Some(x), Some(w)], &[Some(y)]).unwrap();
        g.add_graph_output(y).unwrap();
        g
    }

    #[test]
    fn the_fingerprint_follows_weights_and_ignores_quantization() {
        let a = graph(1.0);
        assert_eq!(a.float_fingerprint(), graph(1.0).float_fingerprint());
        assert_ne!(a.float_fingerprint(), graph(1.5).float_fingerprint());
        let mut quantized = a.clone();
        let op = quantized.op_id("mul").unwrap();
        quantized.operation_mut(op).unwrap().precision = TargetPrecision::Int8;
        assert_eq!(a.float_fingerprint(), quantized.float_fingerprint());
        let mut renamed = a.clone();
        renamed.operation_mut(op).unwrap().op_type = "Add".into();
        assert_ne!(a.float_fingerprint(), renamed.float_fingerprint());
    }
}
