//! What the pairing rules share: the rule that paired two tensors, and how far the order rule
//! looks ahead (used by the same-framework rules in `pair.rs` and the cross-framework ones in
//! `cross.rs`).

/// Which rule paired two tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairRule {
    /// Same rank, iteration, op name, IO and slot.
    Name,
    /// The same ONNX node (graph files' source rows): its outputs by the node's output slot,
    /// or, for two plain kernels of one op type, every tensor by IO and slot.
    Node,
    /// Same value name in the graph files (an ONNX value name), same IO and slot.
    Value,
    /// Same position in the run order, same op type (or, across frameworks, the same op kind
    /// and output shape), same IO and slot.
    Order,
    /// The user's mapping file maps one name to the other.
    Mapping,
    /// An API call's counter and the ONNX node's FX call (`Functional.conv2d.5.forward` and
    /// `conv2d_5`).
    Counter,
    /// The same torch module scope (msprobe's module path, the exporter's recorded scope or
    /// TorchScript's node name), by op kind and order within the scope.
    Scope,
    /// An ONNX node that fuses several torch calls (BatchNorm folded into Conv) with the last
    /// call of the group, whose output it computes.
    Fused,
}

impl PairRule {
    /// `name`, `node`, `value` or `order`.
    pub const fn as_str(self) -> &'static str {
        match self {
            PairRule::Name => "name",
            PairRule::Node => "node",
            PairRule::Value => "value",
            PairRule::Order => "order",
            PairRule::Mapping => "mapping",
            PairRule::Counter => "counter",
            PairRule::Scope => "scope",
            PairRule::Fused => "fused",
        }
    }
}

/// How many unpaired kernels of B the order rule looks ahead for A's kernel's op type.
pub(super) const LOOKAHEAD: usize = 8;
