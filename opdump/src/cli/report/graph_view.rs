//! The model's graph on an HTML page: one node per kernel, its data-flow edges (the
//! `graphs/*.ir` producers each kernel reads), the module scope as nested, collapsible
//! `<details>` groups, and each node shaded by how far it diverges (`compare`) or whether its
//! outputs hold NaN/Inf (`inspect`), linked to its table row. A nested list whose nodes carry
//! a small coloured bar (longer and warmer the worse), ordered by topological layer, so the
//! page stays small and readable at thousands of kernels; the outermost folded groups keep
//! their members as text until opened (the page's script; without it they show as markup),
//! so a browser lays out only the open path.

use std::{collections::HashMap, fmt::Write as _};

use dump_read::KernelRef;

use super::{compare_report::CompareReport, esc, g, html::MAX_ROWS, inspect_report::InspectReport};

pub use super::shade::Shade;

/// How a shade is drawn: its CSS class and colour (bar length grows with it), and its words
/// in the legend.
impl Shade {
    /// The CSS class (`s0` … `s6`).
    pub fn class(self) -> &'static str {
        match self {
            Shade::Unknown => "s0",
            Shade::Close => "s1",
            Shade::Near => "s2",
            Shade::Drift => "s3",
            Shade::Far => "s4",
            Shade::Bad => "s5",
            Shade::First => "s6",
        }
    }

    /// The fill colour.
    pub fn color(self) -> &'static str {
        match self {
            Shade::Unknown => "#bbbbbb",
            Shade::Close => "#2a8f2a",
            Shade::Near => "#9ccc65",
            Shade::Drift => "#f2d024",
            Shade::Far => "#f5a623",
            Shade::Bad => "#f4a0a0",
            Shade::First => "#f00000",
        }
    }

    /// What the shade means on a compare page.
    fn compare_words(self) -> &'static str {
        match self {
            Shade::Unknown => "no pair",
            Shade::Close => "rel. error ≤ 1e-6",
            Shade::Near => "≤ 1e-4",
            Shade::Drift => "≤ 1e-3",
            Shade::Far => "> 1e-3, within tolerance",
            Shade::Bad => "diverged",
            Shade::First => "first divergent",
        }
    }

    /// What the shade means on an inspect page.
    fn inspect_words(self) -> Option<&'static str> {
        match self {
            Shade::Unknown => Some("no statistics"),
            Shade::Close => Some("finite"),
            Shade::Bad => Some("NaN/Inf in its outputs"),
            Shade::First => Some("first non-finite"),
            _ => None,
        }
    }
}

/// One node of the view: a kernel.
#[derive(Clone, Debug)]
pub struct Node {
    /// The kernel's number (the table's `#` on inspect pages); its anchor is `g-{id}`.
    pub id: usize,
    /// The name shown (the last part of its scoped name).
    pub name: String,
    /// The hover text (kernel number, op type, full name, figure).
    pub title: String,
    /// The module scope, outermost first (each entry the group's label).
    pub scope: Vec<String>,
    /// Indices (into the node list) of the nodes it reads.
    pub inputs: Vec<usize>,
    /// Its shade.
    pub shade: Shade,
    /// The table row (`row-N`) it links to, when the page holds one.
    pub row: Option<usize>,
    /// A short figure after the name (`1.2e-3`, `4 NaN/Inf`).
    pub note: String,
}

/// The module scope of kernel `k`: the torch module path the exporter recorded (or
/// TorchScript's node name holds), as its cumulative prefixes (`layer2`, `layer2.0`,
/// `layer2.0.conv1`); else the `/`-separated prefixes of the graph's full name
/// (`Default`, `conv1-Conv2d`); empty when neither is known. The name shown follows.
pub fn scope_of(k: &KernelRef) -> (Vec<String>, String) {
    let full = k.full_name.as_deref().unwrap_or(&k.op_name);
    let shown = full
        .rsplit('/')
        .find(|p| !p.is_empty())
        .unwrap_or(full)
        .to_owned();
    if let Some((path, _)) = k.onnx.as_ref().and_then(|o| o.module_scope())
        && !path.is_empty()
    {
        let mut scope = Vec::new();
        let mut acc = String::new();
        for p in path.split('.') {
            if !acc.is_empty() {
                acc.push('.');
            }
            acc.push_str(p);
            scope.push(acc.clone());
        }
        return (scope, shown);
    }
    if k.full_name.is_none()
        && let Some(mut parts) = mindspore_scope(&k.op_name)
    {
        let shown = parts.pop().unwrap_or_default();
        return (parts, shown);
    }
    let mut parts: Vec<String> = full
        .split('/')
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    parts.pop();
    (parts, shown)
}

/// The scope of a MindSpore-style op name whose `/` were sanitised to `_` (no graph file to
/// give the full name): `Default_network-WithLossCell__backbone-LeNet5_max_pool2d-MaxPool2d_MaxPool-op0`
/// → `Default`, `network-WithLossCell`, `_backbone-LeNet5`, `max_pool2d-MaxPool2d`, and last
/// the op `MaxPool-op0`. Each part after the first is `name-Class` (so `_` inside a part
/// joins it), and the op ends in `-op{N}`; a name of another form gives `None`.
pub fn mindspore_scope(op_name: &str) -> Option<Vec<String>> {
    let mut tokens = op_name.split('_');
    let root = tokens
        .next()
        .filter(|t| !t.is_empty() && !t.contains('-'))?;
    let mut parts = vec![root.to_owned()];
    let mut acc: Option<String> = None;
    for t in tokens {
        let piece = match acc.take() {
            Some(a) => format!("{a}_{t}"),
            None => t.to_owned(),
        };
        if t.contains('-') {
            parts.push(piece);
        } else {
            acc = Some(piece);
        }
    }
    let op = parts.last()?;
    let digits = op.rsplit_once("-op")?.1;
    let is_op = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
    (acc.is_none() && parts.len() >= 2 && is_op).then_some(parts)
}

/// The nodes of `kernels` with the edges their graph producers give (producers looked up by
/// op name in the same rank and iteration), scope-grouped by [`scope_of`], under a
/// `rank R, iteration I` group when the kernels span several.
fn skeleton(kernels: &[KernelRef]) -> Vec<Node> {
    let mut index: HashMap<(u32, u64, &str), usize> = HashMap::new();
    for (n, k) in kernels.iter().enumerate() {
        index
            .entry((k.rank, k.iteration, k.op_name.as_str()))
            .or_insert(n);
    }
    let first = kernels.first().map(|k| (k.rank, k.iteration));
    let several = kernels.iter().any(|k| Some((k.rank, k.iteration)) != first);
    kernels
        .iter()
        .enumerate()
        .map(|(n, k)| {
            let (mut scope, name) = scope_of(k);
            if several {
                scope.insert(0, format!("rank {}, iteration {}", k.rank, k.iteration));
            }
            let mut inputs: Vec<usize> = k
                .producers
                .iter()
                .filter_map(|p| index.get(&(k.rank, k.iteration, p.as_str())).copied())
                .filter(|&p| p != n)
                .collect();
            inputs.dedup();
            Node {
                id: n,
                name,
                title: format!(
                    "#{n} {} {}",
                    k.op_type,
                    k.full_name.as_deref().unwrap_or(&k.op_name)
                ),
                scope,
                inputs,
                shade: Shade::Unknown,
                row: None,
                note: String::new(),
            }
        })
        .collect()
}

/// The nodes of a compare page: A's kernels, each shaded by its worst pair (the first
/// divergent pair's kernel [`Shade::First`]) and linked to that pair's row.
pub fn compare_nodes(r: &CompareReport<'_>) -> Vec<Node> {
    let mut nodes = skeleton(&r.kernels);
    for (node, w) in nodes.iter_mut().zip(&r.kernel_worst) {
        if let Some(w) = w {
            node.shade = w.shade;
            node.row = Some(w.pair).filter(|&i| i < MAX_ROWS);
            node.note = note_of(w.rel);
            let _ = write!(node.title, "; pair #{}: {}", w.pair, node.note);
        }
    }
    nodes
}

/// A pair's figure: its largest relative error, or `NaN/Inf differ`.
fn note_of(rel: f64) -> String {
    if rel.is_infinite() {
        "NaN/Inf positions differ".into()
    } else if rel.is_nan() {
        "-".into()
    } else {
        format!("rel {}", g(rel))
    }
}

/// The nodes of an inspect page: the dump's kernels, each shaded by its outputs' NaN/Inf
/// count (the first non-finite kernel [`Shade::First`]) and linked to its row (`row-N`, N
/// the kernel) when `linked(N)`.
pub fn inspect_nodes(r: &InspectReport<'_>, linked: &dyn Fn(usize) -> bool) -> Vec<Node> {
    let mut nodes = skeleton(&r.ins.kernels);
    for (n, (node, k)) in nodes.iter_mut().zip(&r.kernel_nonfinite).enumerate() {
        node.shade = k.shade;
        if let Some(bad) = k.count.filter(|&c| c > 0) {
            node.note = format!("{bad} NaN/Inf");
            let _ = write!(node.title, "; {bad} NaN/Inf in its outputs");
        }
        node.row = Some(n).filter(|&n| linked(n));
    }
    nodes
}

/// The topological layer of each node: 0 for a node reading no earlier node, else one past
/// the deepest earlier node it reads (a node reading a later one, which a well-formed graph
/// in run order never does, ignores that edge).
pub fn layers(nodes: &[Node]) -> Vec<usize> {
    let mut layer = vec![0usize; nodes.len()];
    for n in 0..nodes.len() {
        layer[n] = nodes[n]
            .inputs
            .iter()
            .filter(|&&p| p < n)
            .map(|&p| layer[p] + 1)
            .max()
            .unwrap_or(0);
    }
    layer
}

/// Most kernels the view draws (a larger dump gets a line saying so instead).
pub const MAX_NODES: usize = 20_000;

/// Most producers a node lists (the rest counted).
const MAX_INPUTS_SHOWN: usize = 6;

/// A group of the view: its label, then its members in order.
#[derive(Default)]
struct Group {
    label: String,
    members: Vec<Member>,
    worst: Option<Shade>,
    count: usize,
}

enum Member {
    Node(usize),
    Group(usize),
}

/// The graph view section: a heading (`id="graph"`), a legend, and the groups; `compare`
/// picks the legend's words. Empty when there are no nodes.
pub fn render(nodes: &[Node], compare: bool) -> String {
    if nodes.is_empty() {
        return String::new();
    }
    if nodes.len() > MAX_NODES {
        return format!(
            r#"<h2 id="graph">Model graph</h2><p>{} kernels: more than the {MAX_NODES} the view draws (about 200 bytes each); the plots and the table above and below still cover them.</p>"#,
            nodes.len()
        );
    }
    let layer = layers(nodes);
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by_key(|&n| (layer[n], n));
    // groups[0] is the root; children by (parent, label).
    let mut groups = vec![Group::default()];
    let mut child: HashMap<(usize, &str), usize> = HashMap::new();
    let mut home = vec![0usize; nodes.len()];
    for &n in &order {
        let mut at = 0;
        groups[0].count += 1;
        groups[0].worst = groups[0].worst.max(Some(nodes[n].shade));
        for label in &nodes[n].scope {
            at = match child.get(&(at, label.as_str())) {
                Some(&c) => c,
                None => {
                    let c = groups.len();
                    groups.push(Group {
                        label: label.clone(),
                        ..Group::default()
                    });
                    groups[at].members.push(Member::Group(c));
                    child.insert((at, label.as_str()), c);
                    c
                }
            };
            groups[at].count += 1;
            groups[at].worst = groups[at].worst.max(Some(nodes[n].shade));
        }
        groups[at].members.push(Member::Node(n));
        home[n] = at;
    }
    let max_layer = layer.iter().copied().max().unwrap_or(0);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<h2 id="graph">Model graph</h2><p class="legend">{} kernels in {} layer{}, grouped by module scope; each links to its table row; ← lists the kernels it reads (graphs/*.ir). "#,
        nodes.len(),
        max_layer + 1,
        if max_layer == 0 { "" } else { "s" }
    );
    for sh in Shade::ALL {
        let words = if compare {
            Some(sh.compare_words())
        } else {
            sh.inspect_words()
        };
        if let Some(w) = words {
            let _ = write!(s, r#"<span class="b {}"></span> {} &nbsp;"#, sh.class(), w);
        }
    }
    s.push_str(r#"</p><div class="graph">"#);
    // The red node's groups are open, so it shows without a click.
    let mut open = vec![false; groups.len()];
    open[0] = true;
    let mut stack = vec![0usize];
    mark_open(&groups, nodes, &mut stack, &mut open);
    write_group(&mut s, &groups, nodes, &layer, 0, &open, true);
    s.push_str("</div>");
    s
}

/// Marks open every group on the path to a [`Shade::First`] node.
fn mark_open(groups: &[Group], nodes: &[Node], stack: &mut Vec<usize>, open: &mut [bool]) {
    let g = *stack.last().expect("a group");
    for m in &groups[g].members {
        match m {
            Member::Node(n) if nodes[*n].shade == Shade::First => {
                for &a in stack.iter() {
                    open[a] = true;
                }
            }
            Member::Node(_) => {}
            Member::Group(c) => {
                stack.push(*c);
                mark_open(groups, nodes, stack, open);
                stack.pop();
            }
        }
    }
}

/// Writes group `g`; a closed group whose enclosing groups are all open (`lazy`) keeps its
/// members in a `<noscript class="lazy">` ([`super::html::folded`]): a browser with scripting
/// lays out none of them until the group opens.
fn write_group(
    s: &mut String,
    groups: &[Group],
    nodes: &[Node],
    layer: &[usize],
    g: usize,
    open: &[bool],
    lazy: bool,
) {
    let gr = &groups[g];
    let wrap = lazy && !open[g];
    let worst = gr.worst.unwrap_or(Shade::Unknown);
    let _ = write!(
        s,
        r#"<details{}><summary><span class="b {}"></span> {} ({} kernels)</summary>"#,
        if open[g] { " open" } else { "" },
        worst.class(),
        if g == 0 {
            "model".to_owned()
        } else {
            esc(&gr.label)
        },
        gr.count
    );
    if wrap {
        s.push_str(r#"<noscript class="lazy">"#);
    }
    s.push_str("<ul>");
    for m in &gr.members {
        match m {
            Member::Group(c) => {
                s.push_str("<li>");
                write_group(s, groups, nodes, layer, *c, open, lazy && !wrap);
                s.push_str("</li>");
            }
            Member::Node(n) => write_node(s, nodes, layer, *n),
        }
    }
    s.push_str("</ul>");
    if wrap {
        s.push_str("</noscript>");
    }
    s.push_str("</details>");
}

fn write_node(s: &mut String, nodes: &[Node], layer: &[usize], n: usize) {
    let node = &nodes[n];
    let _ = write!(
        s,
        r#"<li id="g-{}" title="{}"><span class="b {}"></span> "#,
        node.id,
        esc(&node.title),
        node.shade.class()
    );
    match node.row {
        Some(row) => {
            let _ = write!(s, r##"<a href="#row-{row}">{}</a>"##, esc(&node.name));
        }
        None => s.push_str(&esc(&node.name)),
    }
    let _ = write!(s, " <i>L{}</i>", layer[n]);
    if !node.note.is_empty() {
        let _ = write!(s, " {}", esc(&node.note));
    }
    if !node.inputs.is_empty() {
        s.push_str(" ←");
        for &p in node.inputs.iter().take(MAX_INPUTS_SHOWN) {
            let _ = write!(s, r##" <a href="#g-{0}">#{0}</a>"##, nodes[p].id);
        }
        if node.inputs.len() > MAX_INPUTS_SHOWN {
            let _ = write!(s, " +{}", node.inputs.len() - MAX_INPUTS_SHOWN);
        }
    }
    s.push_str("</li>");
}

/// The CSS the view needs (added to the page's style).
pub fn css() -> String {
    let mut c = String::from(
        ".graph ul{list-style:none;margin:0;padding-left:18px;font-size:12px} .graph details{margin:2px 0} .graph li:target,.graph li.target{background:#ffe08a} .graph i{color:#888} span.b{display:inline-block;height:10px;vertical-align:middle}\n",
    );
    for (i, sh) in Shade::ALL.iter().enumerate() {
        let _ = write!(
            c,
            "span.{}{{background:{};width:{}px}} ",
            sh.class(),
            sh.color(),
            6 + 6 * i
        );
    }
    c
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use dump_read::{
        Dump,
        compare::{Tolerances, compare as compare_dumps},
        inspect::inspect as inspect_dump,
    };

    use super::*;
    use crate::cli::report::{html, test_dumps as td};

    /// The `graphs/*.ir` text of a chain of `Conv2D` kernels with these full names, each
    /// reading the one before (kernel 0 reads a parameter).
    fn chain_ir(full: &[String]) -> String {
        let mut ir = String::new();
        for (i, f) in full.iter().enumerate() {
            let arg = if i == 0 {
                "%para1_x".to_owned()
            } else {
                format!("%{}", i - 1)
            };
            ir += &format!("  %{i}(v{i}) = Conv2D({arg})\n      # Fullname with scope: ({f})\n");
        }
        ir
    }

    /// Kernels 0..6 in scopes `Default/blockA` (0..3) and `Default/blockB` (3..6), a chain; B
    /// differs from A by `scale[i]` on kernel i's output.
    fn chain_dumps(tag: &str, scale: [f64; 6]) -> (Dump, Dump) {
        let root = td::fresh(tag);
        let full: Vec<String> = (0..6)
            .map(|i| {
                let block = if i < 3 { "blockA" } else { "blockB" };
                format!("Default/{block}/Conv-op{i}")
            })
            .collect();
        let rows = |b: bool| -> Vec<String> {
            (0..6)
                .map(|i| {
                    let v = if b { scale[i] } else { 1.0 };
                    let name = full[i].replace('/', "_");
                    format!(
                        "Conv2D,{name},0,0,{},output,0,4,float32,\"(1)\",{v},{v},{v},0",
                        10 + i
                    )
                })
                .collect()
        };
        let ir = chain_ir(&full);
        let a = td::stat_dump(&root.join("a"), &rows(false));
        td::graph(&a, &ir);
        let b = td::stat_dump(&root.join("b"), &rows(true));
        td::graph(&b, &ir);
        let both = (Dump::open(&a).unwrap(), Dump::open(&b).unwrap());
        let _ = std::fs::remove_dir_all(&root);
        both
    }

    /// The `<li>` of node `n` in `page`.
    fn node_li(page: &str, n: usize) -> &str {
        let at = page
            .find(&format!(r#"<li id="g-{n}""#))
            .unwrap_or_else(|| panic!("node {n}: {page}"));
        let end = page[at..].find("</li>").unwrap();
        &page[at..at + end]
    }

    /// Every `href="#X"` in `part` names an `id="X"` in `page`.
    fn links_resolve(part: &str, page: &str) -> usize {
        let mut n = 0;
        for h in part.split(r##"href="#"##).skip(1) {
            let target = &h[..h.find('"').unwrap()];
            assert!(
                page.contains(&format!(r#"id="{target}""#)),
                "link to #{target} has no target"
            );
            n += 1;
        }
        n
    }

    #[test]
    fn compare_graph_has_a_node_per_kernel_shaded_by_error_linked_to_rows() {
        // Kernel 1 drifts by 5e-4, kernel 2 by 1e-5, kernel 4 diverges (first), kernel 5 too.
        let (a, b) = chain_dumps("graph-cmp", [1.0, 1.0005, 1.00001, 1.0, 1.5, 2.0]);
        // rtol 1e-2: kernels 1 and 2 stay within it.
        let mut tol = Tolerances::default();
        tol.set_all(Some(1e-2), None);
        let cmp = compare_dumps(&a, &b, &tol, 1, &|_, _| {});
        let r = CompareReport::new(&a, &b, cmp, false);
        let first = r.first.as_ref().expect("kernel 4 diverges").pair;
        assert_eq!(first, 4);
        let nodes = compare_nodes(&r);
        assert_eq!(nodes.len(), a.kernels().len());
        assert_eq!(nodes.len(), 6);
        let shades: Vec<Shade> = nodes.iter().map(|n| n.shade).collect();
        assert_eq!(shades[4], Shade::First);
        assert_eq!(shades[5], Shade::Bad);
        assert_eq!(shades[0], Shade::Close);
        assert_eq!(shades[3], Shade::Close);
        for n in [1, 2] {
            let rel = r.pair_rel[n];
            assert_eq!(shades[n], Shade::of_error(rel, false), "kernel {n}: {rel}");
        }
        assert_eq!(shades[1], Shade::Drift, "5e-4");
        assert_eq!(shades[2], Shade::Near, "1e-5");
        assert_eq!(nodes[4].row, Some(first));
        // Edges from the graph file: a chain.
        assert_eq!(nodes[0].inputs, Vec::<usize>::new());
        for (n, node) in nodes.iter().enumerate().skip(1) {
            assert_eq!(node.inputs, vec![n - 1]);
        }
        assert_eq!(layers(&nodes), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(nodes[4].scope, vec!["Default", "blockB"]);
        assert_eq!(nodes[4].name, "Conv-op4");

        let page = html::compare(&r);
        let view = &page[page.find(r#"<h2 id="graph">"#).unwrap()..];
        let view = &view[..view.find(r#"</div>"#).unwrap()];
        assert_eq!(view.matches(r#"<li id="g-"#).count(), 6);
        assert_eq!(
            view.matches(r#"class="b s6""#).count(),
            5,
            "legend, the node, its groups blockB and Default, the root"
        );
        assert!(node_li(view, 4).contains(r##"<span class="b s6"></span> <a href="#row-"##));
        assert!(node_li(view, 5).contains(r#"class="b s5""#));
        assert!(node_li(view, 1).contains(r#"class="b s3""#));
        assert!(node_li(view, 3).contains(r##"← <a href="#g-2">#2</a>"##));
        // Every link (rows and producers) lands on an element of the page.
        assert!(links_resolve(view, &page) >= 6 + 5);
        // Groups by scope; blockB holds the red node and is open, blockA is folded.
        assert!(
            view.contains(
                r#"<details open><summary><span class="b s6"></span> blockB (3 kernels)</summary>"#
            ),
            "{view}"
        );
        assert!(
            view.contains(
                r#"<details><summary><span class="b s3"></span> blockA (3 kernels)</summary>"#
            ),
            "{view}"
        );
        assert!(view.contains("Default (6 kernels)"));
        // The folded group's members wait as text; the open ones are markup.
        assert!(
            view.contains(r#"blockA (3 kernels)</summary><noscript class="lazy"><ul><li id="g-0""#)
        );
        assert!(view.contains(r#"blockB (3 kernels)</summary><ul><li id="g-3""#));
        no_nested_noscript(view);
    }

    /// No `<noscript>` inside another (the first `</noscript>` would end the outer one).
    fn no_nested_noscript(page: &str) {
        let mut depth = 0;
        let mut rest = page;
        while let Some(at) = rest.find("noscript") {
            let closing = rest[..at].ends_with("</");
            depth += if closing { -1 } else { 1 };
            assert!((0..=1).contains(&depth), "nested noscript");
            rest = &rest[at + 8..];
        }
        assert_eq!(depth, 0);
    }

    #[test]
    fn the_view_draws_the_shades_the_report_holds() {
        let (a, b) = chain_dumps("graph-report", [1.0; 6]);
        let cmp = compare_dumps(&a, &b, &Tolerances::default(), 1, &|_, _| {});
        let mut r = CompareReport::new(&a, &b, cmp, false);
        assert!(
            r.kernel_worst
                .iter()
                .all(|w| w.unwrap().shade == Shade::Close)
        );
        // The renderer formats the report's judgement as it stands; it judges nothing again.
        r.kernel_worst[2] = Some(crate::cli::report::shade::KernelWorst {
            shade: Shade::Far,
            rel: 0.25,
            pair: 2,
        });
        r.kernel_worst[5] = None;
        let nodes = compare_nodes(&r);
        assert_eq!(nodes[2].shade, Shade::Far);
        assert_eq!(nodes[2].note, "rel 0.25");
        assert_eq!(nodes[5].shade, Shade::Unknown);
        assert_eq!(nodes[5].row, None);
        let view = render(&nodes, true);
        assert!(node_li(&view, 2).contains(r#"class="b s4""#));
        assert!(node_li(&view, 5).contains(r#"class="b s0""#));
    }

    #[test]
    fn hostile_names_are_escaped_in_the_view() {
        let evil = r#"<img src=x onerror="alert(1)">&'"#;
        let node = |id: usize, inputs: Vec<usize>| Node {
            id,
            name: evil.to_owned(),
            title: evil.to_owned(),
            scope: vec![evil.to_owned()],
            inputs,
            shade: Shade::Bad,
            row: Some(id),
            note: evil.to_owned(),
        };
        let s = render(&[node(0, vec![]), node(1, vec![0])], true);
        assert!(!s.contains("<img"), "{s}");
        assert!(!s.contains(r#""alert"#));
        assert!(s.contains("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;&#39;"));
        assert_eq!(s.matches(r#"<li id="g-"#).count(), 2);
        // Past MAX_NODES the view is a line, not megabytes of nodes.
        let many: Vec<Node> = (0..=MAX_NODES).map(|i| node(i, vec![])).collect();
        let s = render(&many, true);
        assert!(
            s.len() < 500 && s.contains("20001 kernels: more than the 20000"),
            "{s}"
        );
        assert!(!s.contains("<li"));
    }

    #[test]
    fn torch_module_scopes_nest() {
        let k = KernelRef {
            rank: 0,
            net: "Net".into(),
            graph: 0,
            iteration: 0,
            op_type: "Conv".into(),
            op_name: "_layer2_layer2_0_conv1_Conv".into(),
            tensors: vec![],
            first_timestamp: 0,
            exec_index: None,
            values: Vec::new(),
            full_name: Some("/layer2/layer2.0/conv1/Conv".into()),
            producers: vec![],
            onnx: Some(dump_read::OnnxOrigin::node(
                "/layer2/layer2.0/conv1/Conv",
                false,
            )),
        };
        let (scope, name) = scope_of(&k);
        assert_eq!(scope, vec!["layer2", "layer2.0", "layer2.0.conv1"]);
        assert_eq!(name, "Conv");
        let plain = KernelRef {
            onnx: None,
            full_name: None,
            op_name: "Default_Add-op1".into(),
            ..k
        };
        assert_eq!(
            scope_of(&plain),
            (vec!["Default".to_owned()], "Add-op1".to_owned())
        );
        // A sanitised MindSpore name without a graph file: `name-Class` parts, `_` inside
        // one kept.
        let ms = KernelRef {
            op_name:
                "Default_network-WithLossCell__backbone-LeNet5_max_pool2d-MaxPool2d_MaxPool-op0"
                    .into(),
            ..plain.clone()
        };
        assert_eq!(
            scope_of(&ms),
            (
                vec![
                    "Default".to_owned(),
                    "network-WithLossCell".to_owned(),
                    "_backbone-LeNet5".to_owned(),
                    "max_pool2d-MaxPool2d".to_owned()
                ],
                "MaxPool-op0".to_owned()
            )
        );
        // Names of other forms keep no scope.
        for other in [
            "Module_block1_conv1_Conv2d_forward_0",
            "Default_Add",
            "_Add-op1",
            "Default_Add-op1_tail",
            "Add-op1",
        ] {
            assert_eq!(mindspore_scope(other), None, "{other}");
            let k = KernelRef {
                op_name: other.into(),
                ..plain.clone()
            };
            assert_eq!(scope_of(&k), (vec![], other.to_owned()));
        }
    }

    #[test]
    fn inspect_graph_shades_non_finite_kernels() {
        let root = td::fresh("graph-ins");
        let full = [
            "Default/a/Relu-op0",
            "Default/a/Mul-op1",
            "Default/b/Relu-op2",
            "Default/b/Add-op3",
        ];
        let vals = [("3", 0), ("nan", 4), ("3", 0), ("inf", 2)];
        let rows: Vec<String> = full
            .iter()
            .zip(vals)
            .enumerate()
            .map(|(i, (f, (v, nan)))| {
                format!(
                    "Conv2D,{},0,0,{},output,0,12,float32,\"(3)\",{v},{v},{v},{nan}",
                    f.replace('/', "_"),
                    5 + i
                )
            })
            .collect();
        let d = td::stat_dump(&root, &rows);
        td::graph(&d, &chain_ir(&full.map(String::from)));
        let dump = Dump::open(&d).unwrap();
        let ins = inspect_dump(&dump, 1, &|_, _| {});
        let _ = std::fs::remove_dir_all(&root);
        let r = InspectReport::new(Path::new("x"), &dump, ins, 5);
        let first = r
            .ins
            .first_nonfinite
            .as_ref()
            .expect("kernel 1 has NaN")
            .kernel;
        assert_eq!(first, 1);
        let counts: Vec<Option<u64>> = r.kernel_nonfinite.iter().map(|k| k.count).collect();
        assert_eq!(counts, vec![Some(0), Some(4), Some(0), Some(2)]);
        let nodes = inspect_nodes(&r, &|_| true);
        assert_eq!(nodes.len(), 4);
        let shades: Vec<Shade> = nodes.iter().map(|n| n.shade).collect();
        assert_eq!(
            shades,
            vec![Shade::Close, Shade::First, Shade::Close, Shade::Bad]
        );
        assert_eq!(nodes[1].note, "4 NaN/Inf");
        let page = html::inspect(&r);
        let view = &page[page.find(r#"<h2 id="graph">"#).unwrap()..];
        let view = &view[..view.find(r#"</div>"#).unwrap()];
        assert_eq!(view.matches(r#"<li id="g-"#).count(), 4);
        assert!(
            node_li(view, 1)
                .contains(r##"<span class="b s6"></span> <a href="#row-1">Mul-op1</a>"##),
            "{view}"
        );
        assert!(node_li(view, 3).contains("NaN/Inf"));
        links_resolve(view, &page);
    }

    /// 5,000 kernels in 10 layers of 10 blocks: the view stays under 250 bytes a node (its
    /// tooltip holds the full name), one `<li>` per kernel; prints its size and build time
    /// (`cargo test -p opdump --lib five_thousand -- --nocapture`).
    #[test]
    fn five_thousand_kernels_stay_small() {
        const N: usize = 5000;
        let root = td::fresh("graph-5k");
        let full: Vec<String> = (0..N)
            .map(|i| format!("Default/layer{}/block{}/Conv2D-op{i}", i / 500, i / 50))
            .collect();
        let rows = |b: bool| -> Vec<String> {
            (0..N)
                .map(|i| {
                    let v = if b && i == 3210 { 1.5 } else { 1.0 };
                    format!(
                        "Conv2D,{},0,0,{},output,0,4,float32,\"(1)\",{v},{v},{v},0",
                        full[i].replace('/', "_"),
                        10 + i
                    )
                })
                .collect()
        };
        let ir = chain_ir(&full);
        let a = td::stat_dump(&root.join("a"), &rows(false));
        td::graph(&a, &ir);
        let b = td::stat_dump(&root.join("b"), &rows(true));
        td::graph(&b, &ir);
        let (a, b) = (Dump::open(&a).unwrap(), Dump::open(&b).unwrap());
        let _ = std::fs::remove_dir_all(&root);
        let cmp = compare_dumps(&a, &b, &Tolerances::default(), 1, &|_, _| {});
        let r = CompareReport::new(&a, &b, cmp, false);
        let t = std::time::Instant::now();
        let view = render(&compare_nodes(&r), true);
        let took = t.elapsed();
        eprintln!(
            "graph view of {N} kernels: {} bytes ({} per kernel) in {took:?}",
            view.len(),
            view.len() / N
        );
        assert_eq!(view.matches(r#"<li id="g-"#).count(), N);
        assert_eq!(view.matches(r#"<li id="g-3210" title"#).count(), 1);
        assert!(node_li(&view, 3210).contains(r#"class="b s6""#));
        assert!(view.len() < 250 * N, "{} bytes", view.len());
        // Only the red node's path is markup: its block's 50 nodes; the other 9 layers and the
        // other 9 blocks of layer 6 wait as text.
        no_nested_noscript(&view);
        assert_eq!(view.matches(r#"<noscript class="lazy">"#).count(), 18);
        let mut markup = view.clone();
        while let Some(a) = markup.find("<noscript") {
            let b = markup[a..].find("</noscript>").unwrap() + a + 11;
            markup.replace_range(a..b, "");
        }
        assert_eq!(markup.matches(r#"<li id="g-"#).count(), 50);
        assert!(markup.contains(r#"<li id="g-3210""#));
    }
}
