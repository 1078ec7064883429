//! Pairing the tensors of two dumps.
//!
//! 1. **name**: same rank, iteration, op name, IO and slot (the normal case: two runs of the
//!    same program).
//! 2. **node**: kernels that found no partner by name and whose graph nodes name the ONNX node
//!    they came from (the `# In file` row: [`OnnxOrigin`](crate::graph::OnnxOrigin)), when
//!    both dumps hold kernels of that ONNX node in the same rank and iteration. Two plain
//!    kernels of the same op type pair every tensor by IO and slot; otherwise (one runtime
//!    decomposed the node, as tract turns Gemm into `EinSum` + `Add`) only the node's outputs
//!    pair, by the ONNX node's output slot, and every other tensor of those kernels (the
//!    decomposition's helpers, the inputs of both sides) is reported as
//!    [`within`](Pairing::within_a) that node, never as unpaired.
//! 3. **value**: kernels that found no partner by name, whose graph nodes (`graphs/*.ir`)
//!    define the same value names (the ONNX value names the adapters keep, one per output), in
//!    the same rank and iteration. When every value of A's kernel is defined by one kernel of B
//!    at the same slot, their tensors pair by IO and slot; otherwise each output pairs with the
//!    output that defines its value (an ONNX Split's or LSTM's outputs against one reference
//!    array each).
//! 4. **order**: kernels that found no partner by name are paired by their position in the run
//!    order of the same rank and iteration, when their op types agree (two runtimes or two
//!    frameworks that name ops differently); a kernel whose op type does not match the next
//!    few unpaired kernels of the other side stays unpaired. Their tensors pair by IO and slot.
//!
//!
//! Before them all, a user's **mapping** file ([`Mapping`](super::Mapping)) pairs the names it
//! maps; after the value rule, when one dump is torch-side (msprobe's call names, or reference
//! arrays keyed by module path) and the other names ONNX nodes, the cross-framework rules
//! (**counter**, **scope**, then order by op kind, and **fused**: see
//! [`cross`](super::cross)) pair the torch calls' outputs with the ONNX nodes' outputs.
//!
//! Everything else is reported as only in A or only in B, with the nearest candidates of the
//! other side ([`Pairing::nearest_a`]).

use std::collections::{HashMap, HashSet};

use dump_stats::Io;

pub use super::rule::PairRule;
use super::{
    Mapping,
    cross::{is_graph_side, is_torch_side, pair_cross},
    rule::LOOKAHEAD,
};
use crate::{Dump, KernelRef};

/// Tensor pairs of two dumps.
#[derive(Clone, Debug, Default)]
pub struct Pairing {
    /// `(index in A, index in B, rule)` in A's run order (iteration, rank, timestamps).
    pub pairs: Vec<(usize, usize, PairRule)>,
    /// A's tensors computed inside a fused ONNX node of B whose output pairs with a later call
    /// (a convolution whose BatchNorm was folded into it), with the node's name.
    pub fused_a: Vec<(usize, String)>,
    /// B's tensors fused so into a node of A.
    pub fused_b: Vec<(usize, String)>,
    /// For unpaired outputs (of [`only_in_a`](Pairing::only_in_a)), up to three of B's
    /// unpaired outputs nearest by shape, op kind and module scope, best first.
    pub nearest_a: Vec<(usize, Vec<usize>)>,
    /// The same for B's unpaired outputs, from A's.
    pub nearest_b: Vec<(usize, Vec<usize>)>,
    /// A's tensors without a partner, in A's run order.
    pub only_in_a: Vec<usize>,
    /// B's tensors without a partner, in B's run order.
    pub only_in_b: Vec<usize>,
    /// A's tensors left unpaired inside an ONNX node that the two dumps compute with
    /// different kernels (a decomposition's helpers and inputs), with the node's name; the
    /// node's outputs are paired.
    pub within_a: Vec<(usize, String)>,
    /// B's tensors left unpaired inside such a node, with its name.
    pub within_b: Vec<(usize, String)>,
}

/// Pairs the tensors of `a` and `b` (see the module docs).
pub fn pair_tensors(a: &Dump, b: &Dump) -> Pairing {
    pair_tensors_with(a, b, None)
}

/// Pairs the tensors of `a` and `b`, `mapping`'s names first (see the module docs).
pub fn pair_tensors_with(a: &Dump, b: &Dump, mapping: Option<&Mapping>) -> Pairing {
    let ka = a.kernels();
    let kb = b.kernels();
    let mut by_name: HashMap<(u32, u64, &str, bool, u32), usize> = HashMap::new();
    for (i, t) in b.tensors.iter().enumerate() {
        by_name.insert(
            (
                t.rank,
                t.iteration,
                t.id.op_name.as_str(),
                t.id.io == Io::Input,
                t.id.slot,
            ),
            i,
        );
    }
    let mut partner: HashMap<usize, (usize, PairRule)> = HashMap::new();
    let mut used_b: HashSet<usize> = HashSet::new();
    let (mut mapped_a, mut mapped_b) = (Vec::new(), Vec::new());
    if let Some(m) = mapping {
        (mapped_a, mapped_b) = pair_mapped(a, b, &ka, &kb, m, &mut partner, &mut used_b);
    }
    for k in &ka {
        for &i in &k.tensors {
            let t = &a.tensors[i];
            let key = (
                t.rank,
                t.iteration,
                t.id.op_name.as_str(),
                t.id.io == Io::Input,
                t.id.slot,
            );
            if let Some(&j) = by_name.get(&key)
                && used_b.insert(j)
            {
                partner.insert(i, (j, PairRule::Name));
            }
        }
    }
    let (mut within_a, mut within_b) = pair_nodes(a, b, &ka, &kb, &mut partner, &mut used_b);
    within_a.extend(mapped_a);
    within_b.extend(mapped_b);
    let mut within_a_set: HashSet<usize> = within_a.iter().map(|(i, _)| *i).collect();
    // The value rule over kernels untouched by the rules above, by every output's value name.
    let mut by_value: HashMap<(u32, u64, &str), (usize, u32)> = HashMap::new();
    for (n, k) in kb.iter().enumerate() {
        if k.tensors.iter().any(|j| used_b.contains(j)) {
            continue;
        }
        for (slot, v) in k.values.iter().enumerate() {
            if !v.is_empty() {
                by_value
                    .entry((k.rank, k.iteration, v.as_str()))
                    .or_insert((n, slot_u32(slot)));
            }
        }
    }
    for k in &ka {
        if k.values.is_empty()
            || k.tensors
                .iter()
                .any(|i| partner.contains_key(i) || within_a_set.contains(i))
        {
            continue;
        }
        let found: Vec<(u32, Option<(usize, u32)>)> = k
            .values
            .iter()
            .enumerate()
            .map(|(slot, v)| {
                let hit = (!v.is_empty())
                    .then(|| by_value.get(&(k.rank, k.iteration, v.as_str())).copied())
                    .flatten();
                (slot_u32(slot), hit)
            })
            .collect();
        match found.first() {
            // The kernel's values are one kernel of B's, slot for slot: every tensor pairs by
            // IO and slot, inputs included (two runs of one graph).
            Some(&(_, Some((n, 0))))
                if found
                    .iter()
                    .all(|&(s, hit)| hit.is_none_or(|(m, t)| m == n && t == s)) =>
            {
                pair_slots(a, b, k, &kb[n], PairRule::Value, &mut partner, &mut used_b);
            }
            // Otherwise each output pairs with the output defining its value, wherever it is
            // (an ONNX Split's or LSTM's outputs against one reference array each).
            _ => {
                for (slot, hit) in found {
                    if let Some((n, t)) = hit
                        && let Some(i) = output_at(a, k, slot)
                        && let Some(j) = output_at(b, &kb[n], t)
                        && used_b.insert(j)
                    {
                        partner.insert(i, (j, PairRule::Value));
                    }
                }
            }
        }
    }
    // Across frameworks: a torch-side dump against ONNX nodes, either way round.
    let (mut fused_a, mut fused_b) = (Vec::new(), Vec::new());
    let cross =
        (is_torch_side(&ka) && is_graph_side(&kb)) || (is_graph_side(&ka) && is_torch_side(&kb));
    if is_torch_side(&ka) && is_graph_side(&kb) {
        let c = pair_cross(
            a,
            b,
            &ka,
            &kb,
            &|i| partner.contains_key(&i) || within_a_set.contains(&i),
            &|j| used_b.contains(&j),
        );
        for (ti, gi, rule) in c.pairs {
            partner.insert(ti, (gi, rule));
            used_b.insert(gi);
        }
        within_a.extend(c.within_t);
        for (j, n) in c.within_g {
            if used_b.insert(j) {
                within_b.push((j, n));
            }
        }
        fused_a = c.fused_t;
    } else if is_graph_side(&ka) && is_torch_side(&kb) {
        let c = pair_cross(b, a, &kb, &ka, &|j| used_b.contains(&j), &|i| {
            partner.contains_key(&i) || within_a_set.contains(&i)
        });
        for (ti, gi, rule) in c.pairs {
            // A's node output pairs once (a module and its container may share it: the
            // second stays only in B).
            if let std::collections::hash_map::Entry::Vacant(v) = partner.entry(gi) {
                v.insert((ti, rule));
                used_b.insert(ti);
            }
        }
        within_a.extend(c.within_g);
        for (j, n) in c.within_t {
            if used_b.insert(j) {
                within_b.push((j, n));
            }
        }
        for (j, n) in c.fused_t {
            if used_b.insert(j) {
                fused_b.push((j, n));
            }
        }
    }
    within_a.sort_unstable();
    within_a.dedup_by_key(|(i, _)| *i);
    within_b.sort_unstable();
    within_a_set = within_a.iter().map(|(i, _)| *i).collect();
    within_a_set.extend(fused_a.iter().map(|(i, _)| *i));
    // The order rule over kernels untouched by the rules above, per (rank, iteration).
    let untouched =
        |ks: &[KernelRef], used: &dyn Fn(usize) -> bool| -> HashMap<(u32, u64), Vec<usize>> {
            let mut m: HashMap<(u32, u64), Vec<usize>> = HashMap::new();
            for (n, k) in ks.iter().enumerate() {
                if !k.tensors.iter().any(|&i| used(i)) {
                    m.entry((k.rank, k.iteration)).or_default().push(n);
                }
            }
            m
        };
    let free_a = untouched(&ka, &|i| {
        partner.contains_key(&i) || within_a_set.contains(&i)
    });
    let free_b = untouched(&kb, &|j| used_b.contains(&j));
    for (group, list_a) in &free_a {
        // Across frameworks the cross rules' order by op kind and shape took its place.
        let Some(list_b) = free_b.get(group).filter(|_| !cross) else {
            continue;
        };
        let mut p = 0;
        for &na in list_a {
            let ka_ = &ka[na];
            let found = (p..list_b.len().min(p + LOOKAHEAD))
                .find(|&q| kb[list_b[q]].op_type.eq_ignore_ascii_case(&ka_.op_type));
            let Some(q) = found else {
                continue;
            };
            p = q + 1;
            pair_slots(
                a,
                b,
                ka_,
                &kb[list_b[q]],
                PairRule::Order,
                &mut partner,
                &mut used_b,
            );
        }
    }
    let mut out = Pairing {
        within_a,
        within_b,
        fused_a,
        fused_b,
        ..Pairing::default()
    };
    // Run order across ranks: iteration first (the earliest step), then rank; stable, so the
    // timestamp order within a rank and iteration stays.
    let mut order: Vec<&KernelRef> = ka.iter().collect();
    order.sort_by_key(|k| (k.iteration, k.rank));
    for k in order {
        for &i in &k.tensors {
            match partner.get(&i) {
                Some(&(j, rule)) => out.pairs.push((i, j, rule)),
                None if within_a_set.contains(&i) => {}
                None => out.only_in_a.push(i),
            }
        }
    }
    for k in &kb {
        out.only_in_b
            .extend(k.tensors.iter().filter(|j| !used_b.contains(j)));
    }
    out.nearest_a = nearest(a, b, &ka, &kb, &out.only_in_a, &out.only_in_b);
    out.nearest_b = nearest(b, a, &kb, &ka, &out.only_in_b, &out.only_in_a);
    out
}

/// How many unpaired outputs get nearest candidates (the report shows the first few).
const NEAREST_FOR: usize = 64;

/// For the unpaired outputs `from` of `x`, up to three unpaired outputs of `y` (`pool`) that
/// share the most: the shape (but for size-1 dims), the op kind, and module-scope components.
fn nearest(
    x: &Dump,
    y: &Dump,
    kx: &[KernelRef],
    ky: &[KernelRef],
    from: &[usize],
    pool: &[usize],
) -> Vec<(usize, Vec<usize>)> {
    let facts =
        |d: &Dump, ks: &[KernelRef]| -> HashMap<usize, (Option<&'static str>, Vec<String>)> {
            let mut m = HashMap::new();
            for k in ks {
                let (kind, scope) = kernel_facts(k);
                for &i in &k.tensors {
                    if d.tensors[i].id.io == Io::Output {
                        m.insert(i, (kind, scope.clone()));
                    }
                }
            }
            m
        };
    let (fx, fy) = (facts(x, kx), facts(y, ky));
    let pool: Vec<usize> = pool
        .iter()
        .copied()
        .filter(|j| fy.contains_key(j))
        .collect();
    let mut out = Vec::new();
    for &i in from.iter().filter(|i| fx.contains_key(i)).take(NEAREST_FOR) {
        let (kind, scope) = &fx[&i];
        let mut scored: Vec<(u32, usize)> = pool
            .iter()
            .map(|&j| {
                let (k2, s2) = &fy[&j];
                let mut score = 0;
                if super::same_but_unit_dims(&x.tensors[i].shape, &y.tensors[j].shape) {
                    score += 4;
                }
                if let (Some(a), Some(b)) = (kind, k2)
                    && (super::kinds::compatible(a, b) || super::kinds::compatible(b, a))
                {
                    score += 2;
                }
                score += scope.iter().zip(s2).take_while(|(p, q)| p == q).count() as u32;
                (score, j)
            })
            .filter(|(s, _)| *s > 0)
            .collect();
        scored.sort_by(|p, q| q.0.cmp(&p.0).then(p.1.cmp(&q.1)));
        if !scored.is_empty() {
            out.push((i, scored.iter().take(3).map(|&(_, j)| j).collect()));
        }
    }
    out
}

/// A kernel's op kind and module-scope components (for the nearest candidates).
fn kernel_facts(k: &KernelRef) -> (Option<&'static str>, Vec<String>) {
    let split = |s: &str| -> Vec<String> {
        s.split('.')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect()
    };
    if let Some(c) = super::cross::parse_call(&k.op_name) {
        return (super::kinds::kind_of(&c.what), split(&c.path));
    }
    if let Some(o) = &k.onnx {
        let kind = o
            .op_type
            .as_deref()
            .or((!o.decomposed).then_some(k.op_type.as_str()))
            .and_then(super::kinds::kind_of);
        return (
            kind,
            o.module_scope().map(|(s, _)| split(&s)).unwrap_or_default(),
        );
    }
    let scope =
        super::cross::mindspore_scope(&k.op_name).map_or_else(|| split(&k.op_name), |s| split(&s));
    (super::kinds::kind_of(&k.op_type), scope)
}

/// The mapping rule: every kernel of A whose op name (or ONNX node) the mapping maps to a
/// kernel of B (by op name, ONNX node, ONNX value or FX call) pairs its outputs with that
/// kernel's (an ONNX node's outputs by the node's slot); their other tensors are left within
/// the mapped name. Returns A's tensors so left.
fn pair_mapped(
    a: &Dump,
    b: &Dump,
    ka: &[KernelRef],
    kb: &[KernelRef],
    m: &Mapping,
    partner: &mut HashMap<usize, (usize, PairRule)>,
    used_b: &mut HashSet<usize>,
) -> (Within, Within) {
    let mut by: HashMap<&str, Vec<usize>> = HashMap::new();
    for (n, k) in kb.iter().enumerate() {
        let mut names: Vec<&str> = vec![k.op_name.as_str()];
        // The first value only: the mapping pairs outputs slot for slot, so naming a further
        // output's value would pair the wrong ones.
        names.extend(k.values.first().map(String::as_str));
        if let Some(o) = &k.onnx {
            names.push(o.node.as_str());
            names.extend(o.call.as_deref());
        }
        names.dedup();
        for name in names {
            by.entry(name).or_default().push(n);
        }
    }
    let (mut within, mut within_b) = (Vec::new(), Vec::new());
    for k in ka {
        let target = m
            .target(&k.op_name)
            .or_else(|| k.onnx.as_ref().and_then(|o| m.target(&o.node)));
        let Some(target) = target else { continue };
        let Some(list) = by.get(target.as_str()) else {
            continue;
        };
        let outs_b: Vec<(u32, usize)> = list
            .iter()
            .flat_map(|&n| {
                let kbn = &kb[n];
                kbn.tensors.iter().filter_map(move |&j| {
                    let t = &b.tensors[j];
                    if t.id.io != Io::Output {
                        return None;
                    }
                    match &kbn.onnx {
                        Some(o) => o.onnx_slot(t.id.slot).map(|s| (s, j)),
                        None => Some((t.id.slot, j)),
                    }
                })
            })
            .collect();
        for &i in &k.tensors {
            let t = &a.tensors[i];
            if t.id.io != Io::Output || partner.contains_key(&i) {
                continue;
            }
            let slot = k
                .onnx
                .as_ref()
                .and_then(|o| o.onnx_slot(t.id.slot))
                .unwrap_or(t.id.slot);
            if let Some(&(_, j)) = outs_b
                .iter()
                .find(|(s, j)| *s == slot && !used_b.contains(j))
            {
                used_b.insert(j);
                partner.insert(i, (j, PairRule::Mapping));
            }
        }
        if k.tensors
            .iter()
            .any(|i| partner.get(i).is_some_and(|p| p.1 == PairRule::Mapping))
        {
            within.extend(
                k.tensors
                    .iter()
                    .filter(|i| !partner.contains_key(i))
                    .map(|&i| (i, target.clone())),
            );
            for &n in list {
                for &j in &kb[n].tensors {
                    if used_b.insert(j) {
                        within_b.push((j, target.clone()));
                    }
                }
            }
        }
    }
    (within, within_b)
}

/// Tensors left inside ONNX nodes by the node rule: `(tensor index, ONNX node name)`.
type Within = Vec<(usize, String)>;

/// Kernels of `ks` (by index) that name an ONNX node, grouped by (rank, iteration, ONNX
/// node).
fn onnx_groups(ks: &[KernelRef]) -> HashMap<(u32, u64, String), Vec<usize>> {
    let mut m: HashMap<(u32, u64, String), Vec<usize>> = HashMap::new();
    for (n, k) in ks.iter().enumerate() {
        if let Some(o) = &k.onnx {
            m.entry((k.rank, k.iteration, o.node.clone()))
                .or_default()
                .push(n);
        }
    }
    m
}

/// The output tensors of kernels `l` of `ks` that are their ONNX node's outputs:
/// `(the node's output slot, tensor index)`.
fn node_outputs(d: &Dump, ks: &[KernelRef], l: &[usize]) -> Vec<(u32, usize)> {
    let mut out = Vec::new();
    for &n in l {
        let k = &ks[n];
        let Some(o) = &k.onnx else { continue };
        for &i in &k.tensors {
            let t = &d.tensors[i];
            if t.id.io == Io::Output
                && let Some(slot) = o.onnx_slot(t.id.slot)
            {
                out.push((slot, i));
            }
        }
    }
    out
}

/// The node rule (see the module docs) over kernels untouched by the name rule: pairs what
/// it can into `partner` / `used_b` and returns the tensors of A and of B left within the
/// ONNX nodes it handled (B's are marked used).
fn pair_nodes(
    a: &Dump,
    b: &Dump,
    ka: &[KernelRef],
    kb: &[KernelRef],
    partner: &mut HashMap<usize, (usize, PairRule)>,
    used_b: &mut HashSet<usize>,
) -> (Within, Within) {
    let mut ga: Vec<_> = onnx_groups(ka).into_iter().collect();
    ga.sort_unstable(); // deterministic: B's outputs are taken first come, first served
    let gb = onnx_groups(kb);
    let (mut within_a, mut within_b) = (Vec::new(), Vec::new());
    for ((rank, iteration, node), all_a) in &ga {
        let Some(all_b) = gb.get(&(*rank, *iteration, node.clone())) else {
            continue;
        };
        // Kernels none of whose tensors the name rule paired.
        let list_a: Vec<usize> = all_a
            .iter()
            .copied()
            .filter(|&n| !ka[n].tensors.iter().any(|i| partner.contains_key(i)))
            .collect();
        let list_b: Vec<usize> = all_b
            .iter()
            .copied()
            .filter(|&n| !kb[n].tensors.iter().any(|j| used_b.contains(j)))
            .collect();
        let plain = |ks: &[KernelRef], all: &[usize], free: &[usize]| {
            all.len() == 1
                && free.len() == 1
                && ks[all[0]].onnx.as_ref().is_some_and(|o| !o.decomposed)
        };
        if list_a.is_empty() && list_b.is_empty() {
            // the name rule paired the node's kernels
        } else if plain(ka, all_a, &list_a)
            && plain(kb, all_b, &list_b)
            && ka[list_a[0]]
                .op_type
                .eq_ignore_ascii_case(&kb[list_b[0]].op_type)
        {
            pair_slots(
                a,
                b,
                &ka[list_a[0]],
                &kb[list_b[0]],
                PairRule::Node,
                partner,
                used_b,
            );
        } else {
            // The node's outputs, by the ONNX node's output slot.
            let out_b = node_outputs(b, kb, &list_b);
            for (slot, i) in node_outputs(a, ka, &list_a) {
                if let Some(&(_, j)) = out_b
                    .iter()
                    .find(|(s, j)| *s == slot && !used_b.contains(j))
                {
                    used_b.insert(j);
                    partner.insert(i, (j, PairRule::Node));
                }
            }
        }
        // What is left is inside the node (a decomposition's helpers, the inputs of both
        // sides): the free kernels' tensors, and, where the two sides' kernels of the node
        // hold different tensors (tract gives a bias-less Conv a zero bias input), the
        // leftovers of name-paired kernels too. Two runs of one runtime keep their own.
        let signature = |d: &Dump, ks: &[KernelRef], all: &[usize]| {
            let mut v: Vec<(bool, u32)> = all
                .iter()
                .flat_map(|&n| ks[n].tensors.iter())
                .map(|&i| (d.tensors[i].id.io == Io::Input, d.tensors[i].id.slot))
                .collect();
            v.sort_unstable();
            v
        };
        let differ = signature(a, ka, all_a) != signature(b, kb, all_b);
        let (from_a, from_b) = if differ {
            (all_a.as_slice(), all_b.as_slice())
        } else {
            (list_a.as_slice(), list_b.as_slice())
        };
        for &n in from_a {
            within_a.extend(
                ka[n]
                    .tensors
                    .iter()
                    .filter(|i| !partner.contains_key(i))
                    .map(|&i| (i, node.clone())),
            );
        }
        for &n in from_b {
            for &j in &kb[n].tensors {
                if used_b.insert(j) {
                    within_b.push((j, node.clone()));
                }
            }
        }
    }
    within_a.sort_unstable();
    within_b.sort_unstable();
    (within_a, within_b)
}

/// Pairs the tensors of kernels `ka` (of `a`) and `kb` (of `b`) by IO and slot.
/// A kernel's output tensor at `slot`.
fn output_at(d: &Dump, k: &KernelRef, slot: u32) -> Option<usize> {
    k.tensors
        .iter()
        .copied()
        .find(|&i| d.tensors[i].id.io == Io::Output && d.tensors[i].id.slot == slot)
}

/// An output slot as the tensor identity stores it (graphs list far fewer outputs).
fn slot_u32(slot: usize) -> u32 {
    u32::try_from(slot).unwrap_or(u32::MAX)
}

fn pair_slots(
    a: &Dump,
    b: &Dump,
    ka: &KernelRef,
    kb: &KernelRef,
    rule: PairRule,
    partner: &mut HashMap<usize, (usize, PairRule)>,
    used_b: &mut HashSet<usize>,
) {
    for &i in &ka.tensors {
        let t = &a.tensors[i];
        let same_slot =
            |j: &&usize| b.tensors[**j].id.io == t.id.io && b.tensors[**j].id.slot == t.id.slot;
        if let Some(&j) = kb.tensors.iter().find(same_slot)
            && used_b.insert(j)
        {
            partner.insert(i, (j, rule));
        }
    }
}
