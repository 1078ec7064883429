//! Issue 28 item 2 through dump-tract: a step that dumps nothing (a disabled Dumper, a step
//! the iteration filter rejects, a `kernels` filter that rejects every kernel and graph
//! input) is tract's own run, unhooked; the shared check proves such steps dump nothing
//! while the others still dump in full, with one `TractDump` whose Dumpers change mid-run.

#[path = "../../testsupport/onnx_fixtures.rs"]
mod support;

use dump_tract::{TractDump, tract_onnx::prelude::*};
use support::{Tmp, check_quiet_steps, fixtures, x_f32};

fn input() -> TVec<TValue> {
    let (shape, v) = x_f32("cnn");
    tvec!(Tensor::from_shape(&shape, &v).unwrap().into_tvalue())
}

#[test]
fn steps_that_dump_nothing_run_unhooked_and_the_others_dump_in_full() {
    let tmp = Tmp::new("quiet");
    let plan = tract_onnx::onnx()
        .model_for_path(fixtures().join("cnn.onnx"))
        .unwrap()
        .into_typed()
        .unwrap()
        .into_runnable()
        .unwrap();
    let mut state = plan.spawn().unwrap();
    let plain = state.run(input()).unwrap();
    let mut td = TractDump::new(&plan, 0);
    check_quiet_steps(&tmp.0, &mut |d| {
        let out = td.run(d, &mut state, input()).unwrap();
        assert_eq!(out.len(), plain.len());
        assert_eq!(
            out[0].as_plain_ram().unwrap().as_bytes(),
            plain[0].as_plain_ram().unwrap().as_bytes(),
            "the same outputs, whatever the step dumps"
        );
    });
    assert!(td.diagnostics().is_empty(), "{:?}", td.diagnostics());
}
