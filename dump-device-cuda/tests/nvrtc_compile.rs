//! CI without a GPU: NVRTC compiles every statistics kernel for compute_80 and compute_90.
//!
//! NVRTC comes from `OPDUMP_NVRTC_LIB_DIR` (the directory `ci/fetch-nvrtc.sh` prints) or the
//! loader path. Without it the test prints SKIP and passes, unless `OPDUMP_REQUIRE_NVRTC=1`.

use dump_device_cuda::{KernelId, compile_for, nvrtc_present, preload_nvrtc};

fn nvrtc_available() -> bool {
    let dir = std::env::var_os("OPDUMP_NVRTC_LIB_DIR");
    let reason = match &dir {
        Some(d) => match preload_nvrtc(std::path::Path::new(d)) {
            Ok(()) => return true,
            Err(e) => format!("OPDUMP_NVRTC_LIB_DIR is set but unusable: {e}"),
        },
        None if nvrtc_present() => return true,
        None => "NVRTC not on the loader path and OPDUMP_NVRTC_LIB_DIR is unset \
                 (run dump-device-cuda/ci/fetch-nvrtc.sh)"
            .to_string(),
    };
    if std::env::var("OPDUMP_REQUIRE_NVRTC").as_deref() == Ok("1") {
        panic!("OPDUMP_REQUIRE_NVRTC=1 but {reason}");
    }
    eprintln!("SKIP nvrtc_compile: {reason}");
    false
}

#[test]
fn every_kernel_compiles_for_compute_80_and_90() {
    if !nvrtc_available() {
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
    if !nvrtc_available() {
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
