//! Typed reads of one JSON object's keys that record a diagnostic instead of stopping, and the
//! unknown-key check. JSON typing follows nlohmann as MindSpore uses it: an "unsigned int" is
//! an integer literal without a minus sign (`1.0`, `-0`, `true`, `"1"` are not).

use serde_json::{Map, Value};

use super::diagnostics::Diagnostics;
use super::suggest::did_you_mean;

/// The outcome of reading one key.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Got<T> {
    /// The key is not there.
    Absent,
    /// It is there but wrong; a diagnostic has been recorded.
    Bad,
    /// It is there and has the right type.
    Val(T),
}

/// A short description of a JSON value for messages: its compact text (cut at 60 chars) and,
/// for non-obvious cases, its JSON type.
pub(crate) fn describe(v: &Value) -> String {
    let mut text = v.to_string();
    if text.chars().count() > 60 {
        text = text.chars().take(57).collect::<String>() + "...";
    }
    let kind = match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_u64() => "an unsigned integer",
        Value::Number(n) if n.is_i64() => "a negative integer",
        Value::Number(_) => "a number that is not an integer literal",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    format!("{text} ({kind})")
}

/// One JSON object (a settings section) being read.
pub(crate) struct Section<'v> {
    /// The section's JSON path, e.g. `common_dump_settings`.
    pub name: &'static str,
    /// Its members.
    pub map: &'v Map<String, Value>,
}

impl<'v> Section<'v> {
    /// The JSON path of `key` in this section.
    pub(super) fn path(&self, key: &str) -> String {
        format!("{}.{key}", self.name)
    }

    /// The raw value of `key`.
    pub(super) fn raw(&self, key: &str) -> Option<&'v Value> {
        self.map.get(key)
    }

    /// Reads an unsigned integer that must fit in `u32`. `type_msg` is MindSpore's text for a
    /// type error.
    pub(super) fn uint(&self, key: &str, type_msg: &str, d: &mut Diagnostics) -> Got<u32> {
        let Some(v) = self.map.get(key) else {
            return Got::Absent;
        };
        match v.as_u64() {
            Some(n) if !v.is_f64() => match u32::try_from(n) {
                Ok(n) => Got::Val(n),
                Err(_) => {
                    d.error(
                        self.path(key),
                        format!(
                            "{type_msg}; got {}, allowed: an integer from 0 to {}",
                            describe(v),
                            u32::MAX
                        ),
                    );
                    Got::Bad
                }
            },
            _ => {
                d.error(
                    self.path(key),
                    format!(
                        "{type_msg}; got {}, allowed: an integer literal without sign or fraction",
                        describe(v)
                    ),
                );
                Got::Bad
            }
        }
    }

    /// Reads a finite JSON number (integer or fraction).
    pub(super) fn number(&self, key: &str, type_msg: &str, d: &mut Diagnostics) -> Got<f64> {
        let Some(v) = self.map.get(key) else {
            return Got::Absent;
        };
        match v.as_f64() {
            Some(x) if x.is_finite() => Got::Val(x),
            _ => {
                d.error(
                    self.path(key),
                    format!("{type_msg}; got {}, allowed: a JSON number", describe(v)),
                );
                Got::Bad
            }
        }
    }

    /// Reads an unsigned integer literal that fits in `u64` (byte counts).
    pub(super) fn uint64(&self, key: &str, type_msg: &str, d: &mut Diagnostics) -> Got<u64> {
        let Some(v) = self.map.get(key) else {
            return Got::Absent;
        };
        match v.as_u64() {
            Some(n) if !v.is_f64() => Got::Val(n),
            _ => {
                d.error(
                    self.path(key),
                    format!(
                        "{type_msg}; got {}, allowed: an integer from 0 to {}",
                        describe(v),
                        u64::MAX
                    ),
                );
                Got::Bad
            }
        }
    }

    /// Reads a boolean (`true`/`false` only).
    pub(super) fn boolean(&self, key: &str, type_msg: &str, d: &mut Diagnostics) -> Got<bool> {
        match self.map.get(key) {
            None => Got::Absent,
            Some(Value::Bool(b)) => Got::Val(*b),
            Some(v) => {
                d.error(
                    self.path(key),
                    format!("{type_msg}; got {}, allowed: true or false", describe(v)),
                );
                Got::Bad
            }
        }
    }

    /// Reads a string.
    pub(super) fn string(&self, key: &str, type_msg: &str, d: &mut Diagnostics) -> Got<&'v str> {
        match self.map.get(key) {
            None => Got::Absent,
            Some(Value::String(s)) => Got::Val(s.as_str()),
            Some(v) => {
                d.error(
                    self.path(key),
                    format!("{type_msg}; got {}, allowed: a JSON string", describe(v)),
                );
                Got::Bad
            }
        }
    }

    /// Reads an array.
    pub(super) fn array(&self, key: &str, type_msg: &str, d: &mut Diagnostics) -> Got<&'v [Value]> {
        match self.map.get(key) {
            None => Got::Absent,
            Some(Value::Array(a)) => Got::Val(a.as_slice()),
            Some(v) => {
                d.error(
                    self.path(key),
                    format!("{type_msg}; got {}, allowed: a JSON array", describe(v)),
                );
                Got::Bad
            }
        }
    }

    /// Warns about every key not in `known`, suggesting the closest known key.
    pub(super) fn unknown_keys(&self, known: &[&str], d: &mut Diagnostics) {
        warn_unknown(self.name, self.map, known, d);
    }
}

/// Warns about every key of `map` not in `known` (MindSpore ignores them silently).
pub(crate) fn warn_unknown(
    prefix: &str,
    map: &Map<String, Value>,
    known: &[&str],
    d: &mut Diagnostics,
) {
    for key in map.keys() {
        if known.contains(&key.as_str()) {
            continue;
        }
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        let msg = match did_you_mean(key, known) {
            Some(s) => format!("unknown key {key:?} is ignored; did you mean {s:?}?"),
            None => format!(
                "unknown key {key:?} is ignored; known keys here: {}",
                known.join(", ")
            ),
        };
        d.warn(path, msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn with<R>(v: Value, f: impl FnOnce(&Section<'_>, &mut Diagnostics) -> R) -> (R, Diagnostics) {
        let map = v.as_object().unwrap().clone();
        let s = Section {
            name: "sec",
            map: &map,
        };
        let mut d = Diagnostics::new();
        let r = f(&s, &mut d);
        (r, d)
    }

    #[test]
    fn uint_typing_follows_nlohmann() {
        let cases = [
            (json!({"k": 3}), Got::Val(3)),
            (json!({"k": 0}), Got::Val(0)),
            (json!({"k": 4_294_967_295u64}), Got::Val(u32::MAX)),
            (json!({"k": 4_294_967_296u64}), Got::Bad),
            (json!({"k": -1}), Got::Bad),
            (json!({"k": 1.0}), Got::Bad),
            (json!({"k": true}), Got::Bad),
            (json!({"k": "1"}), Got::Bad),
            (json!({}), Got::Absent),
        ];
        for (v, want) in cases {
            let text = v.to_string();
            let (got, d) = with(v, |s, d| s.uint("k", "k should be unsigned int type", d));
            assert_eq!(got, want, "{text}");
            assert_eq!(d.has_errors(), want == Got::Bad, "{text}");
            if want == Got::Bad {
                let e = d.first_error().unwrap();
                assert_eq!(e.path, "sec.k");
                assert!(e.message.starts_with("k should be unsigned int type; got "));
            }
        }
        // `-0` is a float for serde_json, as for nlohmann: not an unsigned int.
        let v: Value = serde_json::from_str(r#"{"k": -0}"#).unwrap();
        let (got, _) = with(v, |s, d| s.uint("k", "m", d));
        assert_eq!(got, Got::Bad);
    }

    #[test]
    fn other_types() {
        let (got, d) = with(json!({"b": 1}), |s, d| {
            s.boolean("b", "'enable' should be boolean type", d)
        });
        assert_eq!(got, Got::Bad);
        assert!(
            d.first_error()
                .unwrap()
                .message
                .contains("1 (an unsigned integer)")
        );
        let (got, _) = with(json!({"s": "x"}), |s, d| {
            s.string("s", "m", d) == Got::Val("x")
        });
        assert!(got);
        let (got, d) = with(json!({"a": {}}), |s, d| s.array("a", "m", d) == Got::Bad);
        assert!(got);
        assert!(d.has_errors());
    }

    #[test]
    fn unknown_keys_suggest() {
        let (_, d) = with(
            json!({"iteraton": "all", "zzz": 1, "net_name": "x"}),
            |s, d| s.unknown_keys(&["iteration", "net_name"], d),
        );
        let w: Vec<_> = d.warnings().collect();
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].path, "sec.iteraton");
        assert!(w[0].message.contains("did you mean \"iteration\""));
        assert!(
            w[1].message
                .contains("known keys here: iteration, net_name")
        );
    }

    #[test]
    fn describe_cuts_long_values() {
        let long = Value::String("x".repeat(100));
        let s = describe(&long);
        assert!(s.ends_with("... (a string)"), "{s}");
        assert!(s.len() < 80);
    }
}
