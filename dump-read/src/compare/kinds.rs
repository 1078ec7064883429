//! The op-kind equivalence table of cross-framework pairing: torch module classes, torch API
//! names (msprobe's `Functional.conv2d`, `Tensor.__iadd__`), MindSpore primitives and ONNX op
//! types that compute the same thing map to one kind (`conv`, `linear`, `relu`, …).

/// `(kind, names)`: every name (compared ignoring ASCII case) that is of the kind.
const TABLE: &[(&str, &[&str])] = &[
    (
        "conv",
        &[
            "Conv",
            "Conv1d",
            "Conv2d",
            "Conv3d",
            "conv1d",
            "conv2d",
            "conv3d",
            "Conv2D",
            "Conv3D",
            "convolution",
        ],
    ),
    (
        "conv_transpose",
        &[
            "ConvTranspose",
            "ConvTranspose1d",
            "ConvTranspose2d",
            "conv_transpose1d",
            "conv_transpose2d",
            "Conv2DTranspose",
            "Conv2DBackpropInput",
        ],
    ),
    (
        "linear",
        &[
            "Linear",
            "linear",
            "Gemm",
            "Dense",
            "addmm",
            "fully_connected",
        ],
    ),
    (
        "matmul",
        &[
            "MatMul",
            "matmul",
            "mm",
            "bmm",
            "__matmul__",
            "BatchMatMul",
            "einsum",
        ],
    ),
    ("relu", &["ReLU", "relu", "relu_", "Relu", "ReLU6", "relu6"]),
    // MindSpore's Conv2d and Dense cells with a bias: Conv2D or MatMul, then BiasAdd.
    ("bias_add", &["BiasAdd", "bias_add"]),
    // A dtype conversion: MindSpore's Cast, ONNX's Cast, torch's `.to()` / `.half()` (FX
    // `_to_copy`).
    (
        "cast",
        &["Cast", "_to_copy", "to", "half", "float", "bfloat16"],
    ),
    (
        "batch_norm",
        &[
            "BatchNorm1d",
            "BatchNorm2d",
            "BatchNorm3d",
            "batch_norm",
            "BatchNormalization",
            "BatchNorm",
            "_native_batch_norm_legit_no_training",
            "_native_batch_norm_legit",
        ],
    ),
    (
        "layer_norm",
        &["LayerNorm", "layer_norm", "LayerNormalization"],
    ),
    (
        "add",
        &[
            "add", "add_", "__add__", "__iadd__", "__radd__", "Add", "Sum", "AddN",
        ],
    ),
    (
        "sub",
        &["sub", "sub_", "__sub__", "__isub__", "__rsub__", "Sub"],
    ),
    (
        "mul",
        &["mul", "mul_", "__mul__", "__imul__", "__rmul__", "Mul"],
    ),
    (
        "div",
        &[
            "div",
            "div_",
            "__div__",
            "__truediv__",
            "__itruediv__",
            "__rtruediv__",
            "Div",
            "RealDiv",
        ],
    ),
    (
        "max_pool",
        &[
            "MaxPool1d",
            "MaxPool2d",
            "MaxPool3d",
            "max_pool1d",
            "max_pool2d",
            "max_pool3d",
            "MaxPool",
            "max_pool2d_with_indices",
        ],
    ),
    (
        "avg_pool",
        &[
            "AvgPool2d",
            "avg_pool2d",
            "AveragePool",
            "AdaptiveAvgPool2d",
            "adaptive_avg_pool2d",
            "GlobalAveragePool",
            "AvgPool",
        ],
    ),
    ("mean", &["mean", "ReduceMean"]),
    ("flatten", &["Flatten", "flatten"]),
    (
        "reshape",
        &[
            "Reshape",
            "reshape",
            "view",
            "_unsafe_view",
            "Unsqueeze",
            "Squeeze",
            "squeeze",
            "unsqueeze",
        ],
    ),
    (
        "softmax",
        &["Softmax", "softmax", "log_softmax", "LogSoftmax"],
    ),
    ("sigmoid", &["Sigmoid", "sigmoid"]),
    ("tanh", &["Tanh", "tanh"]),
    ("gelu", &["GELU", "gelu", "Gelu", "GeLU"]),
    ("concat", &["cat", "concat", "Concat"]),
    ("transpose", &["transpose", "permute", "Transpose", "t"]),
    ("embedding", &["Embedding", "embedding", "Gather"]),
];

/// The kind of an op type, module class or API name; `None` when the table lacks it.
pub fn kind_of(name: &str) -> Option<&'static str> {
    TABLE
        .iter()
        .find(|(_, names)| names.iter().any(|n| n.eq_ignore_ascii_case(name)))
        .map(|(k, _)| *k)
}

/// Whether a torch call of kind `torch` can be computed by an ONNX node of kind `onnx`:
/// equal kinds, or the exporter's usual rewrites (a Linear as MatMul [+ Add], an average pool
/// as a mean, a flatten as a reshape, a bias added by an Add).
pub fn compatible(torch: &str, onnx: &str) -> bool {
    torch == onnx
        || matches!(
            (torch, onnx),
            ("linear", "matmul" | "add")
                | ("avg_pool", "mean")
                | ("mean", "avg_pool")
                | ("flatten" | "reshape", "reshape" | "flatten")
                | ("bias_add", "add")
        )
}

/// Whether `kind` is a view (a flatten or reshape): its output holds its input's elements in
/// the same order, whatever shape a dump records (MindSpore dumps Flatten's output with its
/// input's shape).
pub fn is_view(kind: Option<&str>) -> bool {
    matches!(kind, Some("flatten" | "reshape"))
}

/// The torch API an FX node name stands for, and its counter: `conv2d_5` → (`conv2d`, 5),
/// `relu` → (`relu`, 0); the batch-norm op torch's export decomposes to is `batch_norm`.
pub fn fx_call(name: &str) -> (&str, u32) {
    let (base, n) = match name.rsplit_once('_') {
        Some((b, n)) if !b.is_empty() && !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()) => {
            (b, n.parse().unwrap_or(u32::MAX))
        }
        _ => (name, 0),
    };
    let base = match base {
        "_native_batch_norm_legit_no_training" | "_native_batch_norm_legit" => "batch_norm",
        b => b,
    };
    (base, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_across_frameworks() {
        for (a, b) in [
            ("Conv2d", "Conv"),
            ("conv2d", "Conv"),
            ("BatchNorm2d", "BatchNormalization"),
            ("ReLU", "Relu"),
            ("__iadd__", "Add"),
            ("Linear", "Gemm"),
            ("adaptive_avg_pool2d", "GlobalAveragePool"),
            ("Dense", "Gemm"),
            ("Conv2D", "Conv"),
            ("MaxPool", "max_pool2d"),
            ("Cast", "_to_copy"),
        ] {
            assert_eq!(kind_of(a), kind_of(b), "{a} {b}");
            assert!(kind_of(a).is_some());
        }
        assert_ne!(kind_of("Conv2d"), kind_of("Relu"));
        assert_eq!(kind_of("NoSuchOp"), None);
        assert!(compatible("linear", "matmul"));
        assert!(!compatible("conv", "relu"));
        assert_eq!(kind_of("BiasAdd"), Some("bias_add"));
        assert!(compatible("bias_add", "add"));
        assert!(!compatible("bias_add", "conv"));
    }

    #[test]
    fn fx_counters() {
        assert_eq!(fx_call("conv2d_5"), ("conv2d", 5));
        assert_eq!(fx_call("conv2d"), ("conv2d", 0));
        assert_eq!(fx_call("relu_"), ("relu_", 0));
        assert_eq!(
            fx_call("_native_batch_norm_legit_no_training_3"),
            ("batch_norm", 3)
        );
        assert_eq!(fx_call("max_pool2d"), ("max_pool2d", 0));
        assert_eq!(fx_call("_1"), ("_1", 0));
    }
}
