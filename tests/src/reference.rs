//! The real MindSpore 2.10 CPU dump output in `tests/fixtures/reference/` (a trimmed copy of
//! the project's `shared/reference/`, see its README): configs,
//! results, tree listings and npy header bytes, used as the oracle of the layout tests.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
};

use dump_host::layout::TensorFileName;

/// The reference directory: `$OPDUMP_REFERENCE_DIR`, else the trimmed copy in
/// `tests/fixtures/reference/`. `None` when it is missing (the test then prints SKIP, or fails
/// with `CI=true`; see `opdump_test_support`).
pub fn reference_root() -> Option<PathBuf> {
    opdump_test_support::reference_dir()
}

/// A file name without its timestamp: `{type}.{name}.{io}.{slot}.{format}.{dtype}` (what two
/// runs of the same network have in common). `None` for a name not in MindSpore's form.
pub fn npy_key(file_name: &str) -> Option<String> {
    let p = TensorFileName::parse(file_name)?;
    Some(format!(
        "{}.{}.{}.{}.{}.{}",
        p.id.op_type,
        p.id.op_name,
        p.id.io.as_str(),
        p.id.slot,
        p.format,
        file_name
            .strip_suffix(".npy")
            .and_then(|s| s.rsplit('.').next())
            .unwrap_or("")
    ))
}

/// One `.npy` of a reference tree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefNpy {
    /// The iteration directory's name.
    pub iteration: String,
    /// [`npy_key`] of the file name.
    pub key: String,
    /// File size in bytes.
    pub size: u64,
    /// Octal mode as listed (`400`).
    pub mode: String,
}

/// One reference case.
#[derive(Clone, Debug)]
pub struct Case {
    /// Case name (`a_tensor_all_io0`).
    pub name: String,
    /// Its directory.
    pub dir: PathBuf,
    /// The exact config text MindSpore read.
    pub config_text: String,
    /// `result.json`.
    pub result: serde_json::Value,
}

impl Case {
    /// Loads case `name` from `root`.
    pub fn load(root: &Path, name: &str) -> Case {
        let dir = root.join(name);
        let config_text = std::fs::read_to_string(dir.join("config.json")).expect("config.json");
        let result: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("result.json")).expect("result.json"),
        )
        .expect("result.json parses");
        Case {
            name: name.to_owned(),
            dir,
            config_text,
            result,
        }
    }

    /// `true` when MindSpore accepted the config (`rc` 0).
    pub fn accepted(&self) -> bool {
        self.result["rc"] == 0
    }

    /// MindSpore's error text for a rejected config.
    pub fn error(&self) -> Option<&str> {
        self.result["error"].as_str()
    }

    /// `iteration_dirs_with_npy`.
    pub fn iteration_dirs(&self) -> Vec<String> {
        self.result["iteration_dirs_with_npy"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Environment variables of the run other than `MINDSPORE_DUMP_CONFIG`, with `/ref/raw/
    /// {case}` replaced by `root`.
    pub fn env(&self, root: &Path) -> Vec<(String, String)> {
        let prefix = format!("/ref/raw/{}", self.name);
        self.result["env"]
            .as_object()
            .map(|o| {
                o.iter()
                    .filter(|(k, _)| *k != "MINDSPORE_DUMP_CONFIG")
                    .filter_map(|(k, v)| {
                        let v = v.as_str()?.replace(&prefix, &root.to_string_lossy());
                        Some((k.clone(), v))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The config bytes with `/ref/raw/{case}` replaced by `root` (everything else byte for
    /// byte as MindSpore read it).
    pub fn config_for(&self, root: &Path) -> Vec<u8> {
        self.config_text
            .replace(&format!("/ref/raw/{}", self.name), &root.to_string_lossy())
            .into_bytes()
    }

    /// Every `.npy` listed in `tree.txt`.
    pub fn tree_npy(&self) -> Vec<RefNpy> {
        let text = std::fs::read_to_string(self.dir.join("tree.txt")).expect("tree.txt");
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                let [kind, mode, size, rel] = f[..] else {
                    return None;
                };
                if kind != "f" || !rel.ends_with(".npy") {
                    return None;
                }
                let parts: Vec<&str> = rel.split('/').collect();
                let n = parts.len();
                Some(RefNpy {
                    iteration: parts[n - 2].to_owned(),
                    key: npy_key(parts[n - 1])?,
                    size: size.parse().ok()?,
                    mode: mode.to_owned(),
                })
            })
            .collect()
    }

    /// Every `d` line's mode in `tree.txt` (all should be `700`).
    pub fn tree_dir_modes(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.dir.join("tree.txt")).expect("tree.txt");
        text.lines()
            .filter(|l| l.starts_with("d\t"))
            .filter_map(|l| l.split('\t').nth(1).map(str::to_owned))
            .collect()
    }
}

/// `key -> header bytes` of every npy in `a_tensor_all_io0/manifest.tsv` (the full network,
/// every file kept).
pub fn reference_headers(root: &Path) -> HashMap<String, Vec<u8>> {
    let text = std::fs::read_to_string(root.join("a_tensor_all_io0/manifest.tsv"))
        .expect("a_tensor_all_io0/manifest.tsv");
    let mut lines = text.lines();
    let head: Vec<&str> = lines.next().unwrap_or("").split('\t').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).expect(name);
    let (rel, hex) = (col("relpath"), col("header_hex"));
    let mut out = HashMap::new();
    for l in lines {
        let f: Vec<&str> = l.split('\t').collect();
        let name = f[rel].rsplit('/').next().unwrap_or("");
        if let Some(k) = npy_key(name) {
            out.insert(k, decode_hex(f[hex]));
        }
    }
    out
}

fn decode_hex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap_or(0))
        .collect()
}
