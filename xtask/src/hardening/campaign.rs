//! The schedules and the soak at full scale: the same tests CI runs, with the sizes raised
//! through their environment variables, in a release build.

use super::cargo_test;

/// Seeded in-process schedules and children killed with SIGKILL (`tests/tests/schedules.rs`).
pub fn schedules(quick: bool) -> Result<(), String> {
    let (rounds, kills) = if quick { ("20", "10") } else { ("200", "100") };
    cargo_test(
        "schedules",
        &[
            ("OPDUMP_SCHEDULE_ROUNDS", rounds),
            ("OPDUMP_KILL_ROUNDS", kills),
        ],
    )
}

/// 100 000 steps (10 000 with `quick`) with a rotating iteration filter (`tests/tests/soak.rs`).
pub fn soak(quick: bool) -> Result<(), String> {
    let steps = if quick { "10000" } else { "100000" };
    cargo_test("soak", &[("OPDUMP_SOAK_STEPS", steps)])
}
