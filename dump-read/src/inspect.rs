//! What a dump says at a glance: per rank and iteration counts, the first operator that went
//! non-finite, the kernels that grow their values most, and outputs that look wrong (all
//! zeros, constant).

use std::collections::BTreeMap;

use dump_stats::Hashes;

use dump_stats::Io;

use crate::{Dump, KernelRef, Stats};

/// Counts of one rank and iteration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IterationSummary {
    /// Rank.
    pub rank: u32,
    /// Iteration.
    pub iteration: u64,
    /// Kernels (ops with at least one tensor).
    pub kernels: usize,
    /// Tensors.
    pub tensors: usize,
    /// Data bytes of the `.npy` files.
    pub bytes: u64,
}

/// Why [`Inspection::first_nonfinite`] names its kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NonfiniteBasis {
    /// Its inputs were dumped and all finite: the kernel made the NaN/Inf.
    FiniteInputs,
    /// Its inputs were not dumped, but the graph file (`graphs/*.ir`) names the kernels that
    /// produce them, and their dumped outputs are all finite.
    FiniteProducers,
    /// No kernel with finite dumped inputs produced one; this is the first kernel with a
    /// non-finite output (its inputs were not dumped, or were non-finite too).
    FirstNonfiniteOutput,
}

impl NonfiniteBasis {
    /// `finite_inputs` or `first_nonfinite_output`.
    pub const fn as_str(self) -> &'static str {
        match self {
            NonfiniteBasis::FiniteInputs => "finite_inputs",
            NonfiniteBasis::FiniteProducers => "finite_producers",
            NonfiniteBasis::FirstNonfiniteOutput => "first_nonfinite_output",
        }
    }
}

/// The first operator with a non-finite output: in the earliest iteration holding one, the
/// first kernel whose dumped inputs (or producers) are finite, else that iteration's first
/// kernel with a non-finite output. Its role (a gradient, a parameter, an activation) is
/// [`crate::train::Role::of_kernel`] of [`Inspection::kernels`]`[kernel]`.
#[derive(Clone, Debug, PartialEq)]
pub struct FirstNonfinite {
    /// Position in [`Inspection::kernels`].
    pub kernel: usize,
    /// Index into [`Dump::tensors`] of the first non-finite output.
    pub tensor: usize,
    /// Why this kernel.
    pub basis: NonfiniteBasis,
    /// Whether its inputs were dumped.
    pub inputs_dumped: bool,
}

/// Where the first non-finite tensor of a dump comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// An output of a kernel: the kernel computed it.
    KernelOutput,
    /// An input of a kernel that no earlier dumped tensor explains: the kernel `graphs/*.ir`
    /// names as producing it (its outputs were not dumped or are finite), or, with `None`,
    /// the graph names no producer for that slot: a graph input, a weight, a constant, or a
    /// kernel that was not dumped.
    KernelInput {
        /// The producing kernel per `graphs/*.ir`, when the graph names one.
        producer: Option<String>,
    },
    /// A graph input or weight the runtime reports as a `Parameter`.
    Parameter,
}

impl Origin {
    /// `kernel_output`, `kernel_input` or `parameter`.
    pub const fn as_str(&self) -> &'static str {
        match self {
            Origin::KernelOutput => "kernel_output",
            Origin::KernelInput { .. } => "kernel_input",
            Origin::Parameter => "parameter",
        }
    }
}

/// The first non-finite tensor in run order, whatever its role.
#[derive(Clone, Debug, PartialEq)]
pub struct NonfiniteTensor {
    /// Position in [`Inspection::kernels`] of the kernel (or Parameter) that holds it.
    pub kernel: usize,
    /// Index into [`Dump::tensors`].
    pub tensor: usize,
    /// Where it comes from.
    pub origin: Origin,
}

/// Growth of a kernel's values from inputs to outputs.
#[derive(Clone, Debug, PartialEq)]
pub struct Growth {
    /// Position in [`Inspection::kernels`].
    pub kernel: usize,
    /// Largest output max|x| over largest input max|x|.
    pub max_abs_ratio: f64,
    /// Largest output l2norm over largest input l2norm.
    pub l2norm_ratio: f64,
}

/// An output that looks wrong.
#[derive(Clone, Debug, PartialEq)]
pub struct Oddity {
    /// Index into [`Dump::tensors`].
    pub tensor: usize,
    /// `all zeros` or `constant {value}`.
    pub what: String,
}

/// The result of [`inspect`].
#[derive(Clone, Debug)]
pub struct Inspection {
    /// Kernels in run order.
    pub kernels: Vec<KernelRef>,
    /// Statistics per tensor (index as in [`Dump::tensors`]); `None` where neither a row nor
    /// a readable file gives them.
    pub stats: Vec<Option<Stats>>,
    /// Per rank and iteration.
    pub iterations: Vec<IterationSummary>,
    /// The first non-finite operator.
    pub first_nonfinite: Option<FirstNonfinite>,
    /// The first non-finite tensor in run order (kernels in run order, each one's inputs
    /// before its outputs), whether a kernel output, a kernel input or a Parameter: `Some`
    /// whenever any tensor holds a NaN or an Inf, even when every output is finite.
    pub first_nonfinite_tensor: Option<NonfiniteTensor>,
    /// Kernels by growth, largest first.
    pub growth: Vec<Growth>,
    /// Outputs that are all zeros or constant.
    pub oddities: Vec<Oddity>,
    /// Per parameter of a training dump, its gradient norm and update ratio over the steps
    /// ([`crate::train`]); empty when the dump holds no gradients or updates.
    pub parameters: Vec<crate::train::ParameterTrend>,
    /// Tensors whose statistics could not be had, with why.
    pub errors: Vec<(usize, String)>,
}

/// Inspects `dump`: statistics of every tensor (rows, else streamed from the files; spread
/// over `threads` threads; `progress(done, total)` after each), then the findings.
pub fn inspect(
    dump: &Dump,
    threads: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Inspection {
    let n = dump.tensors.len();
    let mut stats: Vec<Option<Stats>> = vec![None; n];
    let mut errors = Vec::new();
    let results = crate::par_map(
        n,
        threads,
        |i| dump.tensors[i].stats(Hashes::NONE),
        progress,
    );
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Some(Ok(s)) => stats[i] = Some(s),
            Some(Err(e)) => errors.push((i, e.to_string())),
            None => errors.push((i, "internal error: a worker thread stopped".into())),
        }
    }
    errors.sort_by_key(|e| e.0);
    let kernels = dump.kernels();
    let mut per: BTreeMap<(u32, u64), IterationSummary> = BTreeMap::new();
    for k in &kernels {
        let e = per
            .entry((k.rank, k.iteration))
            .or_insert(IterationSummary {
                rank: k.rank,
                iteration: k.iteration,
                ..IterationSummary::default()
            });
        e.kernels += 1;
        e.tensors += k.tensors.len();
        e.bytes += k
            .tensors
            .iter()
            .map(|&i| dump.data_bytes(&dump.tensors[i]))
            .sum::<u64>();
    }
    let nonfinite = |i: usize| stats[i].as_ref().and_then(Stats::nonfinite);
    // Run order across ranks: iteration first (the earliest step), then rank.
    let mut order: Vec<usize> = (0..kernels.len()).collect();
    order.sort_by_key(|&k| (kernels[k].iteration, kernels[k].rank));
    let by_name: std::collections::HashMap<(u32, u64, &str), usize> = kernels
        .iter()
        .enumerate()
        .map(|(n, k)| ((k.rank, k.iteration, k.op_name.as_str()), n))
        .collect();
    let mut first_nonfinite = None;
    let mut fallback = None;
    for &k in &order {
        let kr = &kernels[k];
        // A NaN made in one step is carried into the next by the weights (a training run) or
        // state: a kernel of a later step with finite inputs did not make the first one.
        if fallback
            .as_ref()
            .is_some_and(|f: &FirstNonfinite| kernels[f.kernel].iteration != kr.iteration)
        {
            break;
        }
        let (ins, outs): (Vec<usize>, Vec<usize>) = kr
            .tensors
            .iter()
            .partition(|&&i| dump.tensors[i].id.io == Io::Input);
        let Some(&bad) = outs.iter().find(|&&i| nonfinite(i) == Some(true)) else {
            continue;
        };
        let inputs_dumped = !ins.is_empty();
        if inputs_dumped && ins.iter().all(|&i| nonfinite(i) == Some(false)) {
            first_nonfinite = Some(FirstNonfinite {
                kernel: k,
                tensor: bad,
                basis: NonfiniteBasis::FiniteInputs,
                inputs_dumped,
            });
            break;
        }
        let producers_finite = !inputs_dumped
            && !kr.producers.is_empty()
            && kr.producers.iter().all(|p| {
                by_name
                    .get(&(kr.rank, kr.iteration, p.as_str()))
                    .is_some_and(|&pk| {
                        let outs: Vec<usize> = kernels[pk]
                            .tensors
                            .iter()
                            .copied()
                            .filter(|&i| dump.tensors[i].id.io == Io::Output)
                            .collect();
                        !outs.is_empty() && outs.iter().all(|&i| nonfinite(i) == Some(false))
                    })
            });
        if producers_finite {
            first_nonfinite = Some(FirstNonfinite {
                kernel: k,
                tensor: bad,
                basis: NonfiniteBasis::FiniteProducers,
                inputs_dumped,
            });
            break;
        }
        if fallback.is_none() {
            fallback = Some(FirstNonfinite {
                kernel: k,
                tensor: bad,
                basis: NonfiniteBasis::FirstNonfiniteOutput,
                inputs_dumped,
            });
        }
    }
    let first_nonfinite = first_nonfinite.or(fallback);
    let first_nonfinite_tensor = order.iter().find_map(|&k| {
        let kr = &kernels[k];
        let &bad = kr.tensors.iter().find(|&&i| nonfinite(i) == Some(true))?;
        let origin = if kr.op_type == "Parameter" {
            Origin::Parameter
        } else if dump.tensors[bad].id.io == Io::Output {
            Origin::KernelOutput
        } else {
            // The producer of this input slot, when the graph lists one kernel per input
            // (otherwise slots and producers cannot be matched).
            let slot = dump.tensors[bad].id.slot as usize;
            let inputs = kr
                .tensors
                .iter()
                .filter(|&&i| dump.tensors[i].id.io == Io::Input)
                .count();
            Origin::KernelInput {
                producer: (kr.producers.len() == inputs)
                    .then(|| kr.producers.get(slot).cloned())
                    .flatten(),
            }
        };
        Some(NonfiniteTensor {
            kernel: k,
            tensor: bad,
            origin,
        })
    });
    let mut growth = Vec::new();
    for (k, kr) in kernels.iter().enumerate() {
        let side = |io: Io, f: fn(&Stats) -> Option<f64>| {
            kr.tensors
                .iter()
                .filter(|&&i| dump.tensors[i].id.io == io)
                .filter_map(|&i| stats[i].as_ref().and_then(f))
                .filter(|v| v.is_finite())
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
        };
        let ratio = |f: fn(&Stats) -> Option<f64>| match (side(Io::Input, f), side(Io::Output, f)) {
            (Some(i), Some(o)) if i > 0.0 => Some(o / i),
            _ => None,
        };
        if let (Some(m), Some(l)) = (ratio(Stats::max_abs), ratio(|s| s.l2norm)) {
            growth.push(Growth {
                kernel: k,
                max_abs_ratio: m,
                l2norm_ratio: l,
            });
        }
    }
    growth.sort_by(|a, b| {
        b.max_abs_ratio
            .max(b.l2norm_ratio)
            .total_cmp(&a.max_abs_ratio.max(a.l2norm_ratio))
    });
    let mut oddities = Vec::new();
    for k in &kernels {
        for &i in &k.tensors {
            let t = &dump.tensors[i];
            let Some(s) = stats[i].as_ref() else { continue };
            if t.id.io != Io::Output || t.id.op_type == "Parameter" {
                continue;
            }
            let (Some(count), Some(max), Some(min)) = (s.count, s.max, s.min) else {
                continue;
            };
            if count > 1 && s.zero == Some(count) {
                oddities.push(Oddity {
                    tensor: i,
                    what: "all zeros".into(),
                });
            } else if count > 1 && max == min && max.is_finite() {
                oddities.push(Oddity {
                    tensor: i,
                    what: format!("constant {max}"),
                });
            }
        }
    }
    let parameters = crate::train::parameter_trends(dump, &kernels, &stats);
    Inspection {
        parameters,
        kernels,
        stats,
        iterations: per.into_values().collect(),
        first_nonfinite,
        first_nonfinite_tensor,
        growth,
        oddities,
        errors,
    }
}
