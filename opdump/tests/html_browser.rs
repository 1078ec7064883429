//! The `--html` pages of `inspect` and `compare` loaded in a real browser (Debian's headless
//! Chromium): no console error, and a screenshot that shows the page (not blank) with the
//! red marker of the first divergent / non-finite operator, and the graph view's red node of a
//! dump with one perturbed kernel, counted in the screenshot's pixels.
//!
//! Needs `chromium` and `python3` (to decode the PNG) on PATH; with `CI=true` their absence
//! fails the test (CI installs them: `apt-get install -y --no-install-recommends chromium
//! python3`), otherwise the test prints why it skips.

mod html_common;

use std::{path::Path, process::Command};

use html_common::{
    Kernel, load_sized, load_url, opdump_bin, pixels, prerequisites, scoped_dump, tmpdir,
};

/// Loads `page` in a 1200×900 window: (console lines, screenshot path).
fn load(page: &Path, dir: &Path) -> (Vec<String>, std::path::PathBuf) {
    let l = load_sized(page, dir, "1200,900");
    (l.console, l.shot)
}

fn opdump(args: &[&str]) -> std::process::Output {
    html_common::run(&opdump_bin(), args)
}

/// Whether byte `at` of a serialized DOM is inside a `<noscript>` (which a browser with
/// scripting keeps as text).
fn in_noscript(dom: &str, at: usize) -> bool {
    let before = &dom[..at];
    match (before.rfind("<noscript"), before.rfind("</noscript>")) {
        (Some(open), Some(close)) => open > close,
        (open, _) => open.is_some(),
    }
}

/// The DOM of `url` once its scripts ran (`chromium --dump-dom`).
fn dom(url: &str, dir: &Path) -> String {
    let o = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.join("profile-dom").display()
        ))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("run chromium");
    let d = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        d.contains("</html>"),
        "no DOM: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    d
}

#[test]
fn inspect_and_compare_pages_render_in_chromium_without_console_errors() {
    if !prerequisites() {
        return;
    }
    let tmp = tmpdir("pages");
    let (clean, bad) = (tmp.join("clean"), tmp.join("bad"));
    for (dir, inject) in [(&clean, None), (&bad, Some("0"))] {
        let mut a = vec![
            "demo",
            "--out",
            dir.to_str().unwrap(),
            "--steps",
            "1",
            "--batch",
            "2",
            "--no-baseline",
            "--categories",
            "default",
        ];
        if let Some(s) = inject {
            a.extend(["--inject-nan", s]);
        }
        let o = opdump(&a);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let (ci, cc) = (tmp.join("inspect.html"), tmp.join("compare.html"));
    let o = opdump(&[
        "inspect",
        bad.to_str().unwrap(),
        "--html",
        ci.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let o = opdump(&[
        "compare",
        bad.to_str().unwrap(),
        clean.to_str().unwrap(),
        "--html",
        cc.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    for page in [&ci, &cc] {
        let (console, shot) = load(page, &tmp);
        assert!(
            console.is_empty(),
            "{}: console output {console:?}",
            page.display()
        );
        let (ink, red, _, _) = pixels(&shot);
        assert!(
            ink > 0.02,
            "{}: screenshot nearly blank ({ink})",
            page.display()
        );
        assert!(
            red > 50,
            "{}: the red marker is not visible ({red} red pixels)",
            page.display()
        );
    }
    // The console check is not vacuous: a page that throws is caught.
    let broken = tmp.join("broken.html");
    std::fs::write(
        &broken,
        "<!DOCTYPE html><html><body><p>x</p><script>undefinedFunction();</script></body></html>",
    )
    .unwrap();
    let (console, _) = load(&broken, &tmp);
    assert!(
        !console.is_empty(),
        "a thrown error must show on the console log"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn the_graph_view_shows_the_perturbed_kernel_as_a_red_node() {
    if !prerequisites() {
        return;
    }
    let tmp = tmpdir("graph");
    let (clean, bad) = (tmp.join("clean"), tmp.join("bad"));
    // 40 kernels in scopes Default/layer{i/4}/block{i}: kernel 25 in layer6, block25.
    scoped_dump(&clean, 40, &|_| Kernel::Plain);
    scoped_dump(&bad, 40, &|i| {
        if i == 25 {
            Kernel::Perturbed
        } else {
            Kernel::Plain
        }
    });
    let mut counts = Vec::new();
    for (a, code, name) in [(&clean, 0, "same.html"), (&bad, 1, "perturbed.html")] {
        let page = tmp.join(name);
        let o = opdump(&[
            "compare",
            a.to_str().unwrap(),
            clean.to_str().unwrap(),
            "--html",
            page.to_str().unwrap(),
        ]);
        assert_eq!(
            o.status.code(),
            Some(code),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let html = std::fs::read_to_string(&page).unwrap();
        assert_eq!(
            html.matches(r#"<li id="g-"#).count(),
            40,
            "a node per kernel"
        );
        // Tall enough for the plots, the folded inputs and the graph view.
        let l = load_sized(&page, &tmp, "1000,2400");
        assert!(
            l.console.is_empty(),
            "{name}: console output {:?}",
            l.console
        );
        counts.push(pixels(&l.shot).2);
    }
    let (legend, perturbed) = (counts[0], counts[1]);
    // The legend's swatch is the only #f00000 on the page of equal dumps; the perturbed
    // kernel's page adds its node's bar and those of the four groups it sits in (model,
    // Default, layer6, block25: open, so the node shows), each as large as the legend's.
    assert!(legend >= 200, "legend swatch not drawn ({legend} pixels)");
    assert!(
        perturbed * 2 >= legend * 9,
        "the red node and its groups are not visible: {perturbed} red pixels against the legend's {legend}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// The inspect page of a dump whose kernel 100 (of 110; its output row is the table's 202nd,
/// on the second page, which only the script lays out) outputs a NaN: the graph view draws
/// the kernel and its four groups in the first non-finite red; the address `#row-100` shows
/// the row's page and marks the row (counted in the screenshot: the page is shorter than the
/// window, as headless Chromium draws a scrolled page blank); `#g-5`, a node of a folded
/// group whose members wait as text, is turned into markup, its group opened and marked;
/// clicks on a header, "next" and "every row" sort every row and page through them.
#[test]
fn the_inspect_page_shows_the_first_non_finite_node_and_reaches_its_row() {
    if !prerequisites() {
        return;
    }
    let tmp = tmpdir("inspect");
    let (clean, nan) = (tmp.join("clean"), tmp.join("nan"));
    scoped_dump(&clean, 110, &|_| Kernel::Plain);
    scoped_dump(&nan, 110, &|i| {
        if i == 100 { Kernel::Nan } else { Kernel::Plain }
    });
    let mut pages = Vec::new();
    for (dump, code, name) in [(&clean, 0, "finite.html"), (&nan, 1, "nan.html")] {
        let page = tmp.join(name);
        let o = opdump(&[
            "inspect",
            dump.to_str().unwrap(),
            "--html",
            page.to_str().unwrap(),
        ]);
        assert_eq!(
            o.status.code(),
            Some(code),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        pages.push(page);
    }
    let html = std::fs::read_to_string(&pages[1]).unwrap();
    assert!(html.contains(r#"<tr id="row-100" class="hl">"#));
    let first_page = &html[..html.find(r#"<noscript id="rest">"#).expect("a paged table")];
    assert!(
        !first_page.contains(r#"id="row-100""#),
        "row 100 is on the second page"
    );

    let size = "1000,1800";
    let shot = |page: &Path, hash: &str, tag: &str| {
        let l = load_url(&format!("file://{}{hash}", page.display()), &tmp, tag, size);
        assert!(
            l.console.is_empty(),
            "{tag}: console output {:?}",
            l.console
        );
        pixels(&l.shot)
    };
    let (ink, _, legend, none) = shot(&pages[0], "", "finite");
    assert!(ink > 0.02, "screenshot nearly blank ({ink})");
    assert!(legend >= 200, "legend swatch not drawn ({legend} pixels)");
    assert_eq!(none, 0, "nothing is marked without an address");
    let (_, _, red, marked) = shot(&pages[1], "", "nan");
    // The legend, the node and its groups model, Default, layer9 and block100.
    assert!(
        red * 2 >= legend * 11,
        "the red node and its groups are not visible: {red} red pixels against the legend's {legend}"
    );
    assert_eq!(marked, 0);
    let (_, _, _, marked) = shot(&pages[1], "#row-100", "nan-row");
    assert!(
        marked >= 5000,
        "row 100 is not shown marked after going to #row-100 ({marked} pixels)"
    );

    // What the script did, in the DOM.
    let url = |hash: &str| format!("file://{}{hash}", pages[1].display());
    let d = dom(&url("#row-100"), &tmp);
    assert!(d.contains(r#"<tr id="row-100" class="hl target">"#), "{d}");
    assert!(d.contains("rows 201\u{2013}220 of 220 (page 2 of 2)"));
    let d = dom(&url("#g-5"), &tmp);
    let at = d.find(r#"<li id="g-5""#).expect("node 5");
    assert!(!in_noscript(&d, at), "node 5 turned into markup");
    assert!(d[at..d[at..].find('>').unwrap() + at].contains(r#"class="target""#));
    assert!(d.contains(
        r#"<details open=""><summary><span class="b s1"></span> layer0 (11 kernels)</summary><ul>"#
    ));
    // Without the address, node 5 waits as text.
    let d = dom(&url(""), &tmp);
    assert!(in_noscript(&d, d.find(r#"<li id="g-5""#).expect("node 5")));

    // The pager and the sort, driven by a copy of the page with clicks appended: `#` sorted
    // twice (descending) puts kernel 109 first and sorts every row, not the page's; "next"
    // shows the last 20 (kernels 9 to 0); "every row" all 220.
    let clicks = r#"<script>
var th = document.querySelectorAll('#rows th'), b = document.body;
function state() {
  var rows = document.querySelectorAll('#rows tbody tr');
  return rows[0].id + ' ' + rows.length + ' ' + document.querySelector('#pager span').textContent;
}
th[0].click(); th[0].click();
b.setAttribute('data-sorted', state());
document.querySelector('#pager button[data-go="1"]').click();
b.setAttribute('data-next', state());
document.querySelector('#pager button[data-go="all"]').click();
b.setAttribute('data-all', state());
</script></body>"#;
    let driven = tmp.join("driven.html");
    std::fs::write(&driven, html.replace("</body>", clicks)).unwrap();
    let d = dom(&format!("file://{}", driven.display()), &tmp);
    let body = &d[d.find("<body").unwrap()..];
    let body = &body[..body.find('>').unwrap()];
    assert_eq!(
        body,
        "<body data-sorted=\"row-109 200 rows 1\u{2013}200 of 220 (page 1 of 2)\" \
         data-next=\"row-9 20 rows 201\u{2013}220 of 220 (page 2 of 2)\" \
         data-all=\"row-109 220 rows 1\u{2013}220 of 220\""
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
