//! Pairing across frameworks: a torch-side dump (msprobe's call names at L0, L1 or mix, or
//! reference arrays keyed by module name) with a dump whose kernels name the ONNX node they
//! came from (`graphs/*.ir` source rows, with the torch scope the exporter recorded or
//! TorchScript's scoped node names).
//!
//! Rules, in order (each over what the ones before left):
//! - **counter**: an API call and its per-API counter (`Functional.conv2d.5.forward`) with the
//!   ONNX node whose FX call is the same API and counter (`conv2d_5`);
//! - **scope**: calls in a module scope (an L0 module's own output, or at level mix the API
//!   calls `construct.json` puts in it) with the ONNX nodes of that scope: the API calls in
//!   order by op kind ([`kinds`](super::kinds)), the module's output with the last node of
//!   its scope (its subtree for a container) whose output has its shape; the N-th call of a
//!   module with the N-th group of its nodes;
//! - **order**: what is left, in run order by op kind, a few nodes of look-ahead;
//! - **fused**: a BatchNorm folded into the convolution before it: the fused node pairs with
//!   the BatchNorm call (the last call of the group, whose output it computes), and the
//!   convolution's call is reported as fused into that node, not as unpaired.

use std::collections::{HashMap, HashSet};

use dump_stats::Io;

use super::{
    PairRule,
    kinds::{compatible, fx_call, is_view, kind_of},
    same_but_unit_dims,
};
use crate::{Dump, KernelRef};

/// A torch-side call name, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TorchCall {
    /// A module's call (`Module.layer1.0.conv1.Conv2d.forward.0`), not an API call.
    pub module: bool,
    /// The module path of a module call (`layer1.0.conv1`).
    pub path: String,
    /// The module class or the API (`Conv2d`, `conv2d`, `__iadd__`).
    pub what: String,
    /// The module's call index, or the API's call counter.
    pub index: u32,
    /// A forward call (not backward or a gradient).
    pub forward: bool,
}

/// Parses an msprobe call name (PyTorch's `Module.`/`Functional.`/`Tensor.`/`Torch.`…, and
/// MindSpore's `Cell.`/`Mint.`/`Primitive.`…); `None` for other names.
pub fn parse_call(name: &str) -> Option<TorchCall> {
    let parts: Vec<&str> = name.split('.').collect();
    let n = parts.len();
    let num = |s: &str| -> Option<u32> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let dir = |s: &str| matches!(s, "forward" | "backward");
    if matches!(parts[0], "Module" | "Cell") {
        if n >= 4 && dir(parts[n - 2]) {
            return Some(TorchCall {
                module: true,
                path: parts[1..n - 3].join("."),
                what: parts[n - 3].to_owned(),
                index: num(parts[n - 1])?,
                forward: parts[n - 2] == "forward",
            });
        }
        return None;
    }
    if n >= 4 && dir(parts[n - 1]) {
        return Some(TorchCall {
            module: false,
            path: String::new(),
            what: parts[n - 3].to_owned(),
            index: num(parts[n - 2])?,
            forward: parts[n - 1] == "forward",
        });
    }
    None
}

/// The cell path of a MindSpore kernel's full name (`Default/network-WithLossCell/
/// _backbone-Net/features-SequentialCell/0-Conv2d/Conv2D-op5`, or its file-name form with `_`
/// for `/`, as dumps name it): the cells' attribute names, outermost first
/// (`network._backbone.features.0`); the empty path for an op of the root cell
/// (`Default/Add-op0`, a network called directly); `None` for names of another form (backward
/// `Gradients/...` kernels, Parameters, ONNX-named kernels). The wrappers around the network
/// (`network._backbone` under TrainOneStepCell and WithLossCell) are kept: the cross rules
/// drop the prefix after which the paths are the other side's module scopes.
pub fn mindspore_scope(op_name: &str) -> Option<String> {
    let mut segments: Vec<String> = Vec::new();
    if let Some(rest) = op_name.strip_prefix("Default/") {
        segments.extend(rest.split('/').map(str::to_owned));
    } else {
        let rest = op_name.strip_prefix("Default_")?;
        // Segments end at a token holding `-` (`name-Class`, `Op-opN`); `_` inside a name is
        // kept (`conv_1-Conv2d`, `_backbone-Net`).
        let mut pending: Option<String> = None;
        for token in rest.split('_') {
            let p = match pending.take() {
                Some(p) => p + "_" + token,
                None => token.to_owned(),
            };
            if token.contains('-') {
                segments.push(p);
            } else {
                pending = Some(p);
            }
        }
        if pending.is_some() {
            return None;
        }
    }
    // The op: `Type-opN`, a primitive's name (no `_`: an ONNX-named kernel such as
    // `Default__conv1_Conv_Conv-op0` is not MindSpore's).
    let op = segments.pop()?;
    let (ty, n) = op.rsplit_once("-op")?;
    if ty.is_empty()
        || ty.contains(['_', '-'])
        || n.is_empty()
        || !n.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut path: Vec<&str> = Vec::with_capacity(segments.len());
    for s in &segments {
        let name = s.split_once('-').map_or(s.as_str(), |(name, _)| name);
        if name.is_empty() {
            return None;
        }
        path.push(name);
    }
    Some(path.join("."))
}

/// Whether dump `d` reads as a torch-side dump: most kernels are msprobe calls, MindSpore
/// kernels named by cell (not ONNX nodes), or reference arrays named like module paths
/// (Parameters, the weights and inputs a MindSpore dump holds beside its kernels, count for
/// neither side: a network can have more of them than kernels).
pub fn is_torch_side(ks: &[KernelRef]) -> bool {
    let ks: Vec<&KernelRef> = ks.iter().filter(|k| k.op_type != "Parameter").collect();
    let n = ks
        .iter()
        .filter(|k| {
            parse_call(&k.op_name).is_some()
                || reference_scope(k).is_some()
                || mindspore_kernel(k).is_some()
        })
        .count();
    n > 0 && n * 2 >= ks.len()
}

/// Whether dump `d` reads as an ONNX-node dump: some kernels name the ONNX node they came
/// from.
pub fn is_graph_side(ks: &[KernelRef]) -> bool {
    ks.iter().any(|k| k.onnx.is_some())
}

/// The cell path of a MindSpore kernel ([`mindspore_scope`]); `None` for a kernel that names
/// the ONNX node it came from.
fn mindspore_kernel(k: &KernelRef) -> Option<String> {
    k.onnx
        .is_none()
        .then(|| mindspore_scope(&k.op_name))
        .flatten()
}

/// A reference array named like a module path (`layer1.0.conv1`): a forward hook's key.
fn reference_scope(k: &KernelRef) -> Option<String> {
    let ok = k.op_type == "Reference"
        && !k.op_name.is_empty()
        && k.op_name
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
    ok.then(|| k.op_name.clone())
}

/// One forward call of the torch side.
#[derive(Debug)]
struct Entry {
    module: bool,
    /// Module path and call index: the module's own, or for an API call its module's.
    scope: Option<(String, u32)>,
    kind: Option<&'static str>,
    /// API and counter of an API call.
    api: Option<(String, u32)>,
    /// Output tensors by slot.
    outs: Vec<(u32, usize)>,
    /// Inputs and parameters.
    rest: Vec<usize>,
    /// A MindSpore kernel: its scope is the whole cell path, wrappers included.
    cells: bool,
    /// A MindSpore Conv2D or MatMul whose bias the next entry (a BiasAdd in the same cell)
    /// adds: that entry stands for the pair (an ONNX Conv or Gemm computes both), this one's
    /// output is fused into its node.
    fused_next: bool,
}

/// One ONNX node of the graph side.
#[derive(Debug)]
struct GNode {
    name: String,
    kind: Option<&'static str>,
    scope: Option<(String, u32)>,
    call: Option<String>,
    fused: bool,
    /// Output tensors by the node's output slot.
    outs: Vec<(u32, usize)>,
    /// Every other tensor of its kernels.
    rest: Vec<usize>,
}

/// What the cross rules decided: pairs (torch tensor, graph tensor, rule), tensors left
/// within nodes, tensors fused into nodes.
#[derive(Debug, Default)]
pub(super) struct Cross {
    pub pairs: Vec<(usize, usize, PairRule)>,
    pub within_t: Vec<(usize, String)>,
    pub within_g: Vec<(usize, String)>,
    pub fused_t: Vec<(usize, String)>,
}

fn entries(t: &Dump, kt: &[KernelRef], taken: &dyn Fn(usize) -> bool) -> Vec<((u32, u64), Entry)> {
    let mut parent: HashMap<(u32, u64, &str), &str> = HashMap::new();
    for m in &t.modules {
        if let Some(p) = &m.parent {
            parent.insert((m.rank, m.iteration, m.node.as_str()), p.as_str());
        }
    }
    let mut out = Vec::new();
    for k in kt {
        if k.tensors.iter().any(|&i| taken(i)) {
            continue;
        }
        let (module, scope, kind, api) = if let Some(c) = parse_call(&k.op_name) {
            if !c.forward {
                continue;
            }
            if c.module {
                (true, Some((c.path, c.index)), kind_of(&c.what), None)
            } else {
                let scope = parent
                    .get(&(k.rank, k.iteration, k.op_name.as_str()))
                    .and_then(|p| parse_call(p))
                    .filter(|p| p.module)
                    .map(|p| (p.path, p.index));
                (false, scope, kind_of(&c.what), Some((c.what, c.index)))
            }
        } else if let Some(s) = reference_scope(k) {
            (true, Some((s, 0)), None, None)
        } else if let Some(path) = mindspore_kernel(k) {
            (false, Some((path, 0)), kind_of(&k.op_type), None)
        } else {
            continue;
        };
        let cells = !module && api.is_none() && scope.is_some();
        let mut outs = Vec::new();
        let mut rest = Vec::new();
        for &i in &k.tensors {
            let id = &t.tensors[i].id;
            if id.io == Io::Output {
                outs.push((id.slot, i));
            } else {
                rest.push(i);
            }
        }
        out.push((
            (k.rank, k.iteration),
            Entry {
                module,
                scope,
                kind,
                api,
                outs,
                rest,
                cells,
                fused_next: false,
            },
        ));
    }
    bias_groups(t, &mut out);
    out
}

/// MindSpore's Conv2d and Dense cells with a bias run two kernels, Conv2D (or MatMul) then
/// BiasAdd, where torch's export has one node (Conv, Gemm): the BiasAdd, right after its
/// producer in the same cell and with its output's shape, takes the producer's kind and
/// stands for the pair; the producer is marked fused into it.
fn bias_groups(t: &Dump, es: &mut [((u32, u64), Entry)]) {
    let shape = |e: &Entry| {
        e.outs
            .iter()
            .min_by_key(|(s, _)| *s)
            .map(|&(_, i)| t.tensors[i].shape.as_slice())
    };
    for i in 1..es.len() {
        let (head, tail) = es.split_at_mut(i);
        let ((kp, p), (kb, b)) = (&mut head[i - 1], &mut tail[0]);
        let producer = match p.kind {
            Some("conv") => "conv",
            Some("matmul" | "linear") => "linear",
            _ => continue,
        };
        if kp == kb
            && p.cells
            && b.cells
            && b.kind == Some("bias_add")
            && p.scope == b.scope
            && shape(p).is_some()
            && shape(p) == shape(b)
        {
            b.kind = Some(producer);
            p.fused_next = true;
        }
    }
}

/// MindSpore's cell paths start with the wrappers around the network (`network._backbone`
/// under TrainOneStepCell and WithLossCell, nothing for a network called directly). Drops
/// from every MindSpore entry's scope the prefix (up to [`MAX_WRAPPERS`] cells) after which
/// the most paths are module scopes of the graph side, the shortest on a tie; entries outside
/// that prefix (a loss cell) keep their path.
fn strip_wrappers(es: &mut [((u32, u64), Entry)], ns: &[((u32, u64), GNode)]) {
    let scopes: HashSet<&str> = ns
        .iter()
        .filter_map(|(_, n)| n.scope.as_ref().map(|(s, _)| s.as_str()))
        .collect();
    let split = |s: &str| -> Vec<String> {
        if s.is_empty() {
            Vec::new()
        } else {
            s.split('.').map(str::to_owned).collect()
        }
    };
    let paths: Vec<Vec<String>> = es
        .iter()
        .filter(|(_, e)| e.cells)
        .filter_map(|(_, e)| e.scope.as_ref().map(|(s, _)| split(s)))
        .collect();
    let mut candidates: Vec<&[String]> = paths
        .iter()
        .flat_map(|p| (0..=p.len().min(MAX_WRAPPERS)).map(move |k| &p[..k]))
        .collect();
    candidates.sort_unstable_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    candidates.dedup();
    let matches = |prefix: &[String]| {
        paths
            .iter()
            .filter(|p| {
                p.starts_with(prefix) && scopes.contains(p[prefix.len()..].join(".").as_str())
            })
            .count()
    };
    let mut best: (usize, Vec<String>) = (0, Vec::new());
    for c in candidates {
        let m = matches(c);
        if m > best.0 {
            best = (m, c.to_vec());
        }
    }
    let prefix = best.1;
    if prefix.is_empty() {
        return;
    }
    for (_, e) in es.iter_mut().filter(|(_, e)| e.cells) {
        if let Some((s, _)) = &mut e.scope {
            let p = split(s);
            if p.starts_with(&prefix) {
                *s = p[prefix.len()..].join(".");
            }
        }
    }
}

/// How many wrapper cells around a MindSpore network [`strip_wrappers`] may drop.
const MAX_WRAPPERS: usize = 4;

fn gnodes(g: &Dump, kg: &[KernelRef], taken: &dyn Fn(usize) -> bool) -> Vec<((u32, u64), GNode)> {
    let mut out: Vec<((u32, u64), GNode)> = Vec::new();
    let mut at: HashMap<(u32, u64, &str), usize> = HashMap::new();
    for k in kg {
        let Some(o) = &k.onnx else { continue };
        if k.tensors.iter().any(|&i| taken(i)) {
            continue;
        }
        let key = (k.rank, k.iteration);
        let n = *at
            .entry((k.rank, k.iteration, o.node.as_str()))
            .or_insert_with(|| {
                let op = o
                    .op_type
                    .clone()
                    .or_else(|| (!o.decomposed).then(|| k.op_type.clone()));
                out.push((
                    key,
                    GNode {
                        name: o.node.clone(),
                        kind: op.as_deref().and_then(kind_of),
                        scope: o.module_scope(),
                        call: o.call.clone(),
                        fused: o.fused,
                        outs: Vec::new(),
                        rest: Vec::new(),
                    },
                ));
                out.len() - 1
            });
        for &i in &k.tensors {
            let id = &g.tensors[i].id;
            match (id.io, o.onnx_slot(id.slot)) {
                (Io::Output, Some(s)) => out[n].1.outs.push((s, i)),
                _ => out[n].1.rest.push(i),
            }
        }
    }
    out
}

/// State of one group (rank, iteration) being paired.
struct Group<'a> {
    t: &'a Dump,
    g: &'a Dump,
    es: Vec<&'a Entry>,
    ns: Vec<&'a GNode>,
    /// Entry → (node, rule) once paired.
    paired: HashMap<usize, (usize, PairRule)>,
    /// Nodes whose outputs a pair took.
    used: HashSet<usize>,
}

impl<'a> Group<'a> {
    fn shape_fits(&self, e: usize, n: usize) -> bool {
        let (Some(&(_, ti)), Some(&(_, gi))) = (
            self.es[e].outs.iter().min_by_key(|(s, _)| *s),
            self.ns[n].outs.iter().min_by_key(|(s, _)| *s),
        ) else {
            return false;
        };
        let (a, b) = (&self.t.tensors[ti], &self.g.tensors[gi]);
        same_but_unit_dims(&a.shape, &b.shape)
            || ((is_view(self.es[e].kind) || is_view(self.ns[n].kind))
                && a.elems().is_some_and(|n| Some(n) == b.elems()))
    }

    fn kind_fits(&self, e: usize, n: usize) -> bool {
        match (self.es[e].kind, self.ns[n].kind) {
            (Some(a), Some(b)) => {
                compatible(a, b) || (a == "batch_norm" && b == "conv" && self.ns[n].fused)
            }
            _ => false,
        }
    }

    fn free(&self, e: usize) -> bool {
        !self.paired.contains_key(&e)
    }

    /// Pairs entry `e` with node `n` (`reuse`: the node's outputs may be paired already, as a
    /// container module's output is its last leaf's).
    fn link(&mut self, e: usize, n: usize, rule: PairRule, reuse: bool) -> bool {
        if !self.free(e) || (!reuse && self.used.contains(&n)) || !self.shape_fits(e, n) {
            return false;
        }
        let rule = if self.ns[n].fused && rule != PairRule::Mapping {
            PairRule::Fused
        } else {
            rule
        };
        self.paired.insert(e, (n, rule));
        self.used.insert(n);
        true
    }

    /// Graph nodes by module scope key, in graph order.
    fn by_scope(&self) -> HashMap<(&'a str, u32), Vec<usize>> {
        let mut m: HashMap<(&'a str, u32), Vec<usize>> = HashMap::new();
        for (i, &n) in self.ns.iter().enumerate() {
            if let Some((s, c)) = &n.scope {
                m.entry((s.as_str(), *c)).or_default().push(i);
            }
        }
        m
    }

    fn counter(&mut self) {
        let mut by_call: HashMap<(&str, u32), usize> = HashMap::new();
        for (i, n) in self.ns.iter().enumerate() {
            if let Some(c) = &n.call {
                by_call.entry(fx_call(c)).or_insert(i);
            }
        }
        for e in 0..self.es.len() {
            let Some((api, c)) = &self.es[e].api else {
                continue;
            };
            let Some(&n) = by_call.get(&(api.as_str(), *c)) else {
                continue;
            };
            if self.kind_fits(e, n) {
                self.link(e, n, PairRule::Counter, false);
            }
        }
    }

    /// The nodes of scope `s`, call `c` (`calls`: how many calls of the scope the torch side
    /// has): the exporter's own group for the call, or the scope's one group cut in `calls`
    /// equal parts.
    fn segment(
        &self,
        scopes: &HashMap<(&str, u32), Vec<usize>>,
        s: &str,
        c: u32,
        calls: u32,
    ) -> Option<Vec<usize>> {
        // A module named like a repeated call (`conv_1`): TorchScript's node names read as
        // the second call of `conv`.
        if c == 0
            && !scopes.contains_key(&(s, 0))
            && let Some((base, n)) = s.rsplit_once('_')
            && let Ok(n) = n.parse::<u32>()
            && let Some(l) = scopes.get(&(base, n))
        {
            return Some(l.clone());
        }
        if let Some(l) = scopes.get(&(s, c))
            && (c > 0 || calls == 1 || scopes.contains_key(&(s, 1)))
        {
            return Some(l.clone());
        }
        let l = scopes.get(&(s, 0))?;
        let calls = calls.max(1) as usize;
        if l.len() % calls != 0 {
            return None;
        }
        let size = l.len() / calls;
        Some(l[c as usize * size..(c as usize + 1) * size].to_vec())
    }

    fn scope(&mut self) {
        let scopes = self.by_scope();
        let mut calls: HashMap<&'a str, u32> = HashMap::new();
        for &e in &self.es {
            if let Some((s, c)) = &e.scope {
                let m = calls.entry(s.as_str()).or_insert(0);
                *m = (*m).max(c.saturating_add(1));
            }
        }
        // API calls within their module's nodes, in order, by kind.
        let mut keys: Vec<(String, u32)> = Vec::new();
        for e in &self.es {
            if let (false, Some(k)) = (e.module, &e.scope)
                && !keys.contains(k)
            {
                keys.push(k.clone());
            }
        }
        for (s, c) in &keys {
            let Some(seg) = self.segment(&scopes, s, *c, calls[s.as_str()]) else {
                continue;
            };
            let members: Vec<usize> = (0..self.es.len())
                .filter(|&e| {
                    !self.es[e].module && self.es[e].scope.as_ref() == Some(&(s.clone(), *c))
                })
                .collect();
            self.walk(&members, &seg, PairRule::Scope);
        }
        // Leaf modules: the last node of their group with their output's shape; containers:
        // the last of their subtree.
        for e in 0..self.es.len() {
            if !self.es[e].module || !self.free(e) {
                continue;
            }
            let Some((s, c)) = self.es[e].scope.clone() else {
                continue;
            };
            let kind = self.es[e].kind;
            // A container (a module of no known kind with nodes in scopes below its own):
            // the last node of its subtree.
            let prefix = format!("{s}.");
            let sub: Vec<usize> = (0..self.ns.len())
                .filter(|&n| {
                    self.ns[n].scope.as_ref().is_some_and(|(ns, _)| {
                        ns == &s || (!s.is_empty() && ns.starts_with(&prefix))
                    })
                })
                .collect();
            let container = kind.is_none()
                && sub
                    .iter()
                    .any(|&n| self.ns[n].scope.as_ref().is_some_and(|(ns, _)| ns != &s));
            let seg = if container {
                if calls[s.as_str()] > 1 || s.is_empty() {
                    continue;
                }
                sub
            } else {
                let Some(seg) = self.segment(&scopes, &s, c, calls[s.as_str()]) else {
                    continue;
                };
                seg
            };
            let fits = |g: &Self, n: usize| {
                g.shape_fits(e, n) && (kind.is_none() || g.kind_fits(e, n) || g.ns[n].fused)
            };
            // A reference array keeps a module's first call: in a group of nodes of one kind
            // (a module called twice), the first.
            let same_kind =
                seg.len() > 1 && seg.iter().all(|&n| self.ns[n].kind == self.ns[seg[0]].kind);
            let pick = if kind.is_none() && !container && same_kind {
                seg.iter().copied().find(|&n| fits(self, n))
            } else {
                seg.iter().rev().copied().find(|&n| fits(self, n))
            };
            if let Some(n) = pick {
                self.link(e, n, PairRule::Scope, true);
            }
        }
    }

    /// Pairs entries `es` (in order) with nodes `ns` (in order) by kind and shape, looking a
    /// few free nodes ahead.
    fn walk(&mut self, es: &[usize], ns: &[usize], rule: PairRule) {
        let mut p = 0;
        for &e in es {
            if !self.free(e) || self.es[e].kind.is_none() || self.es[e].fused_next {
                continue;
            }
            let found = (p..ns.len().min(p + super::rule::LOOKAHEAD)).find(|&q| {
                !self.used.contains(&ns[q]) && self.kind_fits(e, ns[q]) && self.shape_fits(e, ns[q])
            });
            if let Some(q) = found {
                // A Linear exported as MatMul + Add: the Add right after it is the output.
                let mut q = q;
                if self.ns[ns[q]].kind == Some("matmul")
                    && self.es[e].kind == Some("linear")
                    && ns
                        .get(q + 1)
                        .is_some_and(|&n| self.ns[n].kind == Some("add") && self.shape_fits(e, n))
                {
                    q += 1;
                }
                if self.link(e, ns[q], rule, false) {
                    p = q + 1;
                }
            }
        }
    }

    fn order(&mut self) {
        let api = self.es.iter().any(|e| !e.module);
        let es: Vec<usize> = (0..self.es.len())
            .filter(|&e| {
                self.es[e].module != api && self.es[e].kind.is_some() && !self.es[e].fused_next
            })
            .collect();
        let ns: Vec<usize> = (0..self.ns.len())
            .filter(|n| !self.used.contains(n))
            .collect();
        self.walk(&es, &ns, PairRule::Order);
    }

    /// Whether the graph has nodes in entry `e`'s own module scope (a call with nodes of its
    /// own was not fused away).
    fn has_own_nodes(&self, e: usize) -> bool {
        let Some((s, _)) = &self.es[e].scope else {
            return false;
        };
        self.es[e].module
            && self
                .ns
                .iter()
                .any(|n| n.scope.as_ref().is_some_and(|(ns, _)| ns == s))
    }

    /// Conv + BatchNorm folded into one node, and MindSpore's Conv2D or MatMul whose BiasAdd
    /// paired with the node computing both: returns the fused entries with their node.
    fn fused(&mut self) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        for e in 1..self.es.len() {
            if self.es[e - 1].fused_next
                && self.free(e - 1)
                && let Some(&(n, _)) = self.paired.get(&e)
            {
                out.push((e - 1, n));
            }
        }
        for level in [false, true] {
            let list: Vec<usize> = (0..self.es.len())
                .filter(|&e| self.es[e].module == level)
                .collect();
            // First the nodes that took the BatchNorm's scope or counter (the dynamo
            // exporter's fused nodes): the unpaired conv before such a call is fused.
            for w in list.windows(2) {
                let (conv, bn) = (w[0], w[1]);
                let conv_kind = self.es[conv].kind;
                if conv_kind.is_some_and(|k| k != "conv")
                    || self.paired.contains_key(&conv)
                    || out.iter().any(|&(f, _)| f == conv)
                {
                    continue;
                }
                let Some(&(n, _)) = self.paired.get(&bn) else {
                    continue;
                };
                let by_kind = conv_kind.is_some()
                    && self.es[bn].kind == Some("batch_norm")
                    && self.ns[n].kind == Some("conv");
                if (self.ns[n].fused || by_kind) && !self.has_own_nodes(conv) {
                    self.paired.insert(bn, (n, PairRule::Fused));
                    out.push((conv, n));
                }
            }
            // Then the nodes that took the conv's scope (TorchScript): the conv's node
            // computes the BatchNorm's output, which has no node of its own. (Reference
            // arrays have no kinds: a module right after a conv, not fused already, with no
            // node of its own, is what the conv's node computes.)
            for w in list.windows(2) {
                let (conv, bn) = (w[0], w[1]);
                if out.iter().any(|&(f, _)| f == conv || f == bn) || self.paired.contains_key(&bn) {
                    continue;
                }
                let Some(&(n, _)) = self.paired.get(&conv) else {
                    continue;
                };
                let kinds = match (self.es[conv].kind, self.es[bn].kind) {
                    (Some("conv"), Some("batch_norm")) => true,
                    (None, None) => {
                        !self.ns[n].fused && self.es[bn].scope.is_some() && !self.has_own_nodes(bn)
                    }
                    _ => false,
                };
                if kinds && self.ns[n].kind == Some("conv") && self.shape_fits(bn, n) {
                    self.paired.remove(&conv);
                    self.paired.insert(bn, (n, PairRule::Fused));
                    out.push((conv, n));
                }
            }
        }
        out
    }
}

/// The cross rules over `t` (torch side) and `g` (graph side), leaving alone tensors already
/// paired (`t_taken`, `g_taken`).
pub(super) fn pair_cross(
    t: &Dump,
    g: &Dump,
    kt: &[KernelRef],
    kg: &[KernelRef],
    t_taken: &dyn Fn(usize) -> bool,
    g_taken: &dyn Fn(usize) -> bool,
) -> Cross {
    let mut es = entries(t, kt, t_taken);
    let ns = gnodes(g, kg, g_taken);
    strip_wrappers(&mut es, &ns);
    let mut keys_t: Vec<(u32, u64)> = es.iter().map(|(k, _)| *k).collect();
    keys_t.dedup();
    keys_t.sort_unstable();
    keys_t.dedup();
    let mut keys_g: Vec<(u32, u64)> = ns.iter().map(|(k, _)| *k).collect();
    keys_g.sort_unstable();
    keys_g.dedup();
    let mut out = Cross::default();
    for kt_ in &keys_t {
        // The same rank and iteration; one group on each side pair whatever their numbers
        // (msprobe's step and rank against a single run).
        let kg_ = if keys_g.contains(kt_) {
            *kt_
        } else if keys_t.len() == 1 && keys_g.len() == 1 {
            keys_g[0]
        } else {
            continue;
        };
        let mut grp = Group {
            t,
            g,
            es: es
                .iter()
                .filter(|(k, _)| k == kt_)
                .map(|(_, e)| e)
                .collect(),
            ns: ns
                .iter()
                .filter(|(k, _)| *k == kg_)
                .map(|(_, n)| n)
                .collect(),
            paired: HashMap::new(),
            used: HashSet::new(),
        };
        grp.counter();
        grp.scope();
        grp.order();
        let fused = grp.fused();
        let mut pairs: Vec<(usize, usize, PairRule)> =
            grp.paired.iter().map(|(&e, &(n, r))| (e, n, r)).collect();
        pairs.sort_unstable_by_key(|p| p.0);
        let mut taken_g: HashSet<usize> = HashSet::new();
        for (e, n, rule) in pairs {
            let (entry, node) = (grp.es[e], grp.ns[n]);
            for &(s, ti) in &entry.outs {
                if let Some(&(_, gi)) = node.outs.iter().find(|(gs, _)| *gs == s) {
                    out.pairs.push((ti, gi, rule));
                }
            }
            out.within_t
                .extend(entry.rest.iter().map(|&i| (i, node.name.clone())));
            if taken_g.insert(n) {
                out.within_g
                    .extend(node.rest.iter().map(|&i| (i, node.name.clone())));
            }
        }
        for (e, n) in fused {
            let entry = grp.es[e];
            let name = &grp.ns[n].name;
            out.fused_t
                .extend(entry.outs.iter().map(|&(_, i)| (i, name.clone())));
            out.within_t
                .extend(entry.rest.iter().map(|&i| (i, name.clone())));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msprobe_call_names() {
        let c = parse_call("Module.layer2.0.conv1.Conv2d.forward.0").unwrap();
        assert_eq!(
            (
                c.module,
                c.path.as_str(),
                c.what.as_str(),
                c.index,
                c.forward
            ),
            (true, "layer2.0.conv1", "Conv2d", 0, true)
        );
        let c = parse_call("Functional.conv2d.5.forward").unwrap();
        assert_eq!(
            (c.module, c.what.as_str(), c.index, c.forward),
            (false, "conv2d", 5, true)
        );
        let c = parse_call("Tensor.__iadd__.0.backward").unwrap();
        assert_eq!((c.what.as_str(), c.forward), ("__iadd__", false));
        let c = parse_call("Cell.net.fc.Dense.forward.1").unwrap();
        assert_eq!(
            (c.path.as_str(), c.what.as_str(), c.index),
            ("net.fc", "Dense", 1)
        );
        for bad in [
            "Module.fc.Linear.parameters_grad",
            "relu1",
            "Functional.x.y.forward",
            "Module.x.forward.y",
            "Module",
        ] {
            assert_eq!(parse_call(bad), None, "{bad}");
        }
    }

    #[test]
    fn mindspore_cell_paths() {
        for (name, path) in [
            // A network called directly (MindSpore 2.10's forward graph): no wrapper cell.
            ("Default/conv1-Conv2d/Conv2D-op0", "conv1"),
            ("Default_conv1-Conv2d_Conv2D-op0", "conv1"),
            (
                "Default_features-SequentialCell_0-Conv2d_BiasAdd-op0",
                "features.0",
            ),
            ("Default_Add-op3", ""),
            ("Default/Add-op3", ""),
            // Under TrainOneStepCell and WithLossCell: the wrappers stay in the path.
            (
                "Default_network-WithLossCell__backbone-TinyNet_conv1-Conv2d_Conv2D-op0",
                "network._backbone.conv1",
            ),
            (
                "Default/network-Net/layer1-SequentialCell/0-Block/conv_1-Conv2d/Conv2D-op5",
                "network.layer1.0.conv_1",
            ),
            ("Default_network-Net_fc_1-Dense_MatMul-op12", "network.fc_1"),
        ] {
            assert_eq!(mindspore_scope(name).as_deref(), Some(path), "{name}");
        }
        for other in [
            // opdump's names of ONNX nodes, backward kernels, Parameters, half names.
            "Default__conv1_Conv_Conv-op0",
            "Default__flatten_Flatten_0_Reshape-op0",
            "Gradients_Default_network-Net_conv1-Conv2d_Grad_Conv2D_Conv2DBackpropFilter-op0",
            "conv1_weight",
            "Default_conv1-Conv2d",
            "Default_conv1-Conv2d_Conv2D-opx",
            "Default_conv1-Conv2d_Conv2D-op",
            "Default_-op0",
            "Default/",
            "Default_",
            "Default//Add-op0",
        ] {
            assert_eq!(mindspore_scope(other), None, "{other}");
        }
    }
}
