//! CI without a GPU: NVRTC compiles every statistics kernel for compute_80 and compute_90.
//!
//! NVRTC comes from `OPDUMP_NVRTC_LIB_DIR` (the directory `ci/fetch-nvrtc.sh` prints) or the
//! loader path. Without it the test prints SKIP and passes, unless `CI=true` or
//! `OPDUMP_REQUIRE_NVRTC=1` (then it fails).

mod nvrtc_probe;

use dump_device_cuda::{KernelId, compile_for};
use nvrtc_probe::require_nvrtc;

#[test]
fn every_kernel_compiles_for_compute_80_and_90() {
    if !require_nvrtc() {
        return;
    }
    for arch in ["compute_80", "compute_90"] {
        let m = compile_for(arch).unwrap_or_else(|e| panic!("{e}"));
        let ptx = m.ptx_text().expect("compute_XY gives PTX");
        let target = format!(".target sm_{}", &arch[8..]);
        assert!(ptx.contains(&target), "{arch}: no `{target}` in the PTX");
        for k in KernelId::ALL {
            assert!(
                ptx.contains(&format!(".entry {}(", k.name())),
                "{arch}: kernel {} missing from the PTX",
                k.name()
            );
        }
        // Bit-reproducibility with the host model needs separately rounded multiply and add.
        assert!(
            !ptx.contains("fma."),
            "{arch}: the PTX contains a fused multiply-add"
        );
        // Warp shuffles and one block barrier, no atomics.
        assert!(ptx.contains("shfl.sync.down"), "{arch}: no warp shuffle");
        assert!(!ptx.contains("atom."), "{arch}: the PTX uses atomics");
        // The cache returns the same module.
        assert!(std::sync::Arc::ptr_eq(&m, &compile_for(arch).unwrap()));
    }
}

#[test]
fn every_kernel_compiles_to_machine_code_for_sm_80_and_90() {
    if !require_nvrtc() {
        return;
    }
    for arch in ["sm_80", "sm_90"] {
        let m = compile_for(arch).unwrap_or_else(|e| panic!("{e}"));
        let cubin = m.cubin().expect("sm_XY gives a CUBIN");
        assert_eq!(&cubin[..4], b"\x7fELF", "{arch}: not an ELF image");
        for k in KernelId::ALL {
            let name = k.name().as_bytes();
            assert!(
                cubin.windows(name.len()).any(|w| w == name),
                "{arch}: kernel {} missing from the CUBIN",
                k.name()
            );
        }
    }
}
