//! The `opdump` section: settings of opdump's own that MindSpore ignores (it reads only
//! `common_dump_settings` and `e2e_dump_settings`), so one config serves both.
//!
//! ```json
//! "opdump": {
//!   "flight_recorder": {"steps": 2, "budget_bytes": 1073741824, "max_triggers": 1},
//!   "on_nonfinite": "record",
//!   "watch": "nonfinite",
//!   "watcher": {"nodes": ["Conv2D-op0"], "layer": ["Add-op2"], "on_corruption": "stop"}
//! }
//! ```
//!
//! - `flight_recorder`: keep the last `steps` steps (statistics and, within `budget_bytes`,
//!   tensors) in memory and write them only when something goes wrong (see
//!   `docs/flight-recorder.md`). `max_triggers` triggers write (0: no limit); `l2norm_growth`
//!   K (optional) also fires when an output's l2norm passes K times its median over the ring.
//! - `on_nonfinite`: what a non-finite output does: `continue` (nothing), `record` (fires the
//!   flight recorder; the default with one), `stop` (fires it when there is one, and the
//!   kernel call returns [`Error::NonFinite`](crate::Error::NonFinite)).
//! - `watch`: which outputs count: `nonfinite` (NaN or ±Inf in any floating-point output, the
//!   default) or `overflow` (`op_debug_mode` 3's check: float16, float32 and bfloat16 outputs).
//! - `watcher`: watcher mode (CANN's `dump_scene: watcher`): the outputs of `nodes` are
//!   summarised again after every kernel (of `layer` when given), and a change no kernel wrote
//!   is reported as memory corruption (see [`WatcherConfig`](super::WatcherConfig) and
//!   docs/watcher.md).

use serde_json::Value;

use super::diagnostics::Diagnostics;
use super::read::{Got, Section, describe};
use super::types::OpDebugMode;
use super::watcher::{CorruptionPolicy, WatcherConfig};

/// Every key of the `opdump` section.
pub const OPDUMP_KEYS: [&str; 4] = ["flight_recorder", "on_nonfinite", "watch", "watcher"];

/// Every key of `opdump.flight_recorder`.
pub const FLIGHT_RECORDER_KEYS: [&str; 4] =
    ["steps", "budget_bytes", "max_triggers", "l2norm_growth"];

/// Most steps the flight recorder may hold.
pub const MAX_FLIGHT_STEPS: u32 = 1000;

/// `opdump.flight_recorder`, defaults filled in.
#[derive(Clone, Copy, Debug)]
pub struct FlightRecorder {
    /// Steps kept before the current one (default 2, 1 to [`MAX_FLIGHT_STEPS`]).
    pub steps: u32,
    /// Most bytes of tensor copies held, the current step's included (default 1 GiB; 0 keeps
    /// statistics only).
    pub budget_bytes: u64,
    /// Triggers that write (default 1; 0: every trigger writes), like `overflow_number`.
    pub max_triggers: u32,
    /// The statistic rule (`None`, the default: off): a floating-point output whose l2norm is
    /// more than this many times the median of the same output's l2norm in the steps the ring
    /// holds fires a trigger (`"kind": "l2norm_growth"`). Greater than 1.
    pub l2norm_growth: Option<f64>,
}

impl Default for FlightRecorder {
    fn default() -> Self {
        FlightRecorder {
            steps: 2,
            budget_bytes: 1 << 30,
            max_triggers: 1,
            l2norm_growth: None,
        }
    }
}

impl PartialEq for FlightRecorder {
    fn eq(&self, o: &Self) -> bool {
        (self.steps, self.budget_bytes, self.max_triggers)
            == (o.steps, o.budget_bytes, o.max_triggers)
            && self.l2norm_growth.map(f64::to_bits) == o.l2norm_growth.map(f64::to_bits)
    }
}

// The growth factor is always finite (checked when read), so equality is total.
impl Eq for FlightRecorder {}

/// What a non-finite output does (`opdump.on_nonfinite`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NonFinitePolicy {
    /// Nothing: it is dumped like any other tensor.
    Continue,
    /// Fires the flight recorder (which writes what it holds), and the run goes on.
    Record,
    /// Fires the flight recorder when there is one, and the kernel call that reported the
    /// output returns [`Error::NonFinite`](crate::Error::NonFinite) so the runtime can stop.
    Stop,
}

impl NonFinitePolicy {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            NonFinitePolicy::Continue => "continue",
            NonFinitePolicy::Record => "record",
            NonFinitePolicy::Stop => "stop",
        }
    }
}

impl std::str::FromStr for NonFinitePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "continue" => Ok(NonFinitePolicy::Continue),
            "record" => Ok(NonFinitePolicy::Record),
            "stop" => Ok(NonFinitePolicy::Stop),
            _ => Err(format!(
                "unknown non-finite policy {s:?}; allowed: continue, record, stop"
            )),
        }
    }
}

/// Which outputs are checked for NaN and ±Inf (`opdump.watch`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Watch {
    /// Every floating-point output (float16, bfloat16, float32, float64).
    #[default]
    NonFinite,
    /// `op_debug_mode` 3's definition of an overflow: float16, float32 and bfloat16 outputs.
    Overflow,
}

impl Watch {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Watch::NonFinite => "nonfinite",
            Watch::Overflow => "overflow",
        }
    }

    /// Whether an output of `dtype` is checked.
    pub fn covers(self, dtype: dump_core::DType) -> bool {
        use dump_core::DType;
        match self {
            Watch::NonFinite => dtype.is_float(),
            Watch::Overflow => matches!(dtype, DType::Float16 | DType::Float32 | DType::BFloat16),
        }
    }
}

/// The `opdump` section, defaults filled in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpdumpSettings {
    /// Whether the section was present.
    pub present: bool,
    /// `flight_recorder` (`None`: every selected step is written as usual).
    pub flight_recorder: Option<FlightRecorder>,
    /// `on_nonfinite` as written (`None`: the default, see
    /// [`policy`](OpdumpSettings::policy)).
    pub on_nonfinite: Option<NonFinitePolicy>,
    /// `watch`.
    pub watch: Watch,
    /// `watcher` (`None`: no watcher mode).
    pub watcher: Option<WatcherConfig>,
}

impl OpdumpSettings {
    /// The effective policy: as written, else `record` with a flight recorder and `continue`
    /// without.
    pub fn policy(&self) -> NonFinitePolicy {
        self.on_nonfinite
            .unwrap_or(if self.flight_recorder.is_some() {
                NonFinitePolicy::Record
            } else {
                NonFinitePolicy::Continue
            })
    }
}

const SEC: &str = "opdump";
const FR: &str = "opdump.flight_recorder";

/// Reads the section (defaults when absent), recording every problem.
pub(crate) fn parse_opdump(v: Option<&Value>, d: &mut Diagnostics) -> OpdumpSettings {
    let mut s = OpdumpSettings::default();
    let Some(v) = v else { return s };
    let Value::Object(map) = v else {
        d.error(
            SEC,
            format!(
                "the opdump section should be an object; got {}, allowed: {{\"flight_recorder\": \
                 {{...}}, \"on_nonfinite\": \"...\", \"watch\": \"...\"}}",
                describe(v)
            ),
        );
        return s;
    };
    s.present = true;
    let sec = Section { name: SEC, map };
    sec.unknown_keys(&OPDUMP_KEYS, d);
    if let Some(fr) = sec.raw("flight_recorder") {
        s.flight_recorder = parse_recorder(fr, d);
    }
    match sec.string("on_nonfinite", "opdump.on_nonfinite should be a string", d) {
        Got::Val(p) => match p.parse() {
            Ok(p) => s.on_nonfinite = Some(p),
            Err(m) => d.error(sec.path("on_nonfinite"), m),
        },
        Got::Absent | Got::Bad => {}
    }
    match sec.string("watch", "opdump.watch should be a string", d) {
        Got::Val("nonfinite") => s.watch = Watch::NonFinite,
        Got::Val("overflow") => s.watch = Watch::Overflow,
        Got::Val(other) => d.error(
            sec.path("watch"),
            format!(
                "unknown watch {other:?}; allowed: nonfinite (NaN/Inf in any floating-point \
                 output), overflow (op_debug_mode 3's check: float16, float32, bfloat16 outputs)"
            ),
        ),
        Got::Absent | Got::Bad => {}
    }
    if let Some(w) = sec.raw("watcher") {
        s.watcher = super::watcher::parse_watcher(w, d);
    }
    s
}

fn parse_recorder(v: &Value, d: &mut Diagnostics) -> Option<FlightRecorder> {
    let Value::Object(map) = v else {
        d.error(
            FR,
            format!(
                "opdump.flight_recorder should be an object; got {}, allowed: {{\"steps\": 2, \
                 \"budget_bytes\": 1073741824, \"max_triggers\": 1}} (every key optional)",
                describe(v)
            ),
        );
        return None;
    };
    let sec = Section { name: FR, map };
    sec.unknown_keys(&FLIGHT_RECORDER_KEYS, d);
    let mut r = FlightRecorder::default();
    match sec.uint(
        "steps",
        "opdump.flight_recorder.steps should be an unsigned integer",
        d,
    ) {
        Got::Val(n) if (1..=MAX_FLIGHT_STEPS).contains(&n) => r.steps = n,
        Got::Val(n) => d.error(
            sec.path("steps"),
            format!(
                "steps {n} is out of range; allowed: 1 to {MAX_FLIGHT_STEPS} (the steps kept \
                 before the current one)"
            ),
        ),
        Got::Absent | Got::Bad => {}
    }
    if let Got::Val(n) = sec.uint64(
        "budget_bytes",
        "opdump.flight_recorder.budget_bytes should be an unsigned integer (bytes)",
        d,
    ) {
        r.budget_bytes = n;
    }
    if let Got::Val(n) = sec.uint(
        "max_triggers",
        "opdump.flight_recorder.max_triggers should be an unsigned integer (0: no limit)",
        d,
    ) {
        r.max_triggers = n;
    }
    match sec.number(
        "l2norm_growth",
        "opdump.flight_recorder.l2norm_growth should be a number",
        d,
    ) {
        Got::Val(k) if k > 1.0 => r.l2norm_growth = Some(k),
        Got::Val(k) => d.error(
            sec.path("l2norm_growth"),
            format!(
                "l2norm_growth {k} would fire on every step; allowed: a number greater than 1 \
                 (e.g. 10: an output's l2norm above 10x its median over the ring's steps)"
            ),
        ),
        Got::Absent | Got::Bad => {}
    }
    Some(r)
}

/// The checks that need the rest of the config: the recorder and the policies work on normal
/// dumps (op_debug_mode 0); `record` needs a recorder.
pub(crate) fn check(s: &OpdumpSettings, op_debug_mode: OpDebugMode, d: &mut Diagnostics) {
    if op_debug_mode != OpDebugMode::Off {
        if s.flight_recorder.is_some() {
            d.error(
                FR,
                format!(
                    "the flight recorder records a normal dump; op_debug_mode is {}, allowed \
                     with flight_recorder: 0",
                    op_debug_mode.as_u32()
                ),
            );
        }
        if s.on_nonfinite
            .is_some_and(|p| p != NonFinitePolicy::Continue)
        {
            d.error(
                format!("{SEC}.on_nonfinite"),
                format!(
                    "on_nonfinite {:?} watches a normal dump; op_debug_mode is {}, allowed: 0",
                    s.policy().as_str(),
                    op_debug_mode.as_u32()
                ),
            );
        }
    }
    if let Some(w) = &s.watcher {
        if op_debug_mode != OpDebugMode::Off {
            d.error(
                format!("{SEC}.watcher"),
                format!(
                    "watcher mode watches a normal dump (as CANN's watcher scene refuses \
                     dump_debug); op_debug_mode is {}, allowed: 0",
                    op_debug_mode.as_u32()
                ),
            );
        }
        if w.on_corruption == CorruptionPolicy::Record && s.flight_recorder.is_none() {
            d.error(
                format!("{SEC}.watcher.on_corruption"),
                "on_corruption \"record\" fires the flight recorder, and there is none; add \
                 opdump.flight_recorder, or use \"continue\" or \"stop\"",
            );
        }
    }
    if s.on_nonfinite == Some(NonFinitePolicy::Record) && s.flight_recorder.is_none() {
        d.error(
            format!("{SEC}.on_nonfinite"),
            "on_nonfinite \"record\" fires the flight recorder, and there is none; add \
             opdump.flight_recorder, or use \"continue\" or \"stop\"",
        );
    }
}

/// The section as JSON with the recorder's defaults filled in, `on_nonfinite` as written
/// (`None` when the section was absent).
pub(crate) fn to_json(s: &OpdumpSettings) -> Option<Value> {
    if !s.present {
        return None;
    }
    let mut m = serde_json::Map::new();
    if let Some(r) = s.flight_recorder {
        let mut f = serde_json::json!({
            "steps": r.steps,
            "budget_bytes": r.budget_bytes,
            "max_triggers": r.max_triggers,
        });
        if let Some(k) = r.l2norm_growth {
            f["l2norm_growth"] = k.into();
        }
        m.insert("flight_recorder".into(), f);
    }
    // Written only when the config says it: its default depends on the recorder (and on a
    // builder's recorder), so the effective config parses back to the same settings.
    if let Some(p) = s.on_nonfinite {
        m.insert("on_nonfinite".into(), p.as_str().into());
    }
    m.insert("watch".into(), s.watch.as_str().into());
    if let Some(w) = &s.watcher {
        m.insert("watcher".into(), super::watcher::to_json(w));
    }
    Some(Value::Object(m))
}
