//! The C functions of linear algebra beyond gemm (`cumem_trsm_async`, `cumem_getrf_async`,
//! ...; src/ffi/linalg.rs) through the process-wide engine.
//!
//! On the host device (the default): bad input is `CUMEM_ERROR_INVALID_VALUE` (operands
//! outside live allocations, bad codes, null pointers, negative sizes), checked before
//! the device is asked, and valid input is `CUMEM_ERROR_NOT_SUPPORTED` naming the host
//! device (the Julia package computes through LAPACK there). With `CUMEM_TEST_CUDA=1` the
//! engine runs on CUDA device 0 and every function is run on small Float64 problems with
//! known answers (cuBLAS, cuSOLVER, their info codes, workspaces from the pool).

mod common;

use common::cuda;
use cumem::ffi::*;
use std::ffi::{CStr, c_void};
use std::sync::Once;

fn setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: runs before any test reads the environment through the engine.
        unsafe { std::env::set_var("CUMEM_DEVICE", if cuda() { "cuda" } else { "host" }) };
        assert_eq!(cumem_init(), CUMEM_SUCCESS, "{}", last_error());
    });
}

fn last_error() -> String {
    // SAFETY: cumem_last_error returns a valid NUL-terminated string.
    unsafe { CStr::from_ptr(cumem_last_error()) }.to_string_lossy().into_owned()
}

fn alloc(bytes: u64) -> u64 {
    let mut p = 0;
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { cumem_alloc(bytes, &mut p) }, CUMEM_SUCCESS, "{}", last_error());
    p
}

fn upload(v: &[f64]) -> u64 {
    let bytes = std::mem::size_of_val(v) as u64;
    let p = alloc(bytes.max(8));
    // SAFETY: `v` is readable for `bytes`.
    assert_eq!(unsafe { cumem_copy_htod(p, v.as_ptr() as *const c_void, bytes) }, CUMEM_SUCCESS);
    p
}

fn download<T: Copy + Default>(p: u64, n: usize) -> Vec<T> {
    let mut v = vec![T::default(); n];
    // SAFETY: `v` is writable for its size.
    let rc =
        unsafe { cumem_copy_dtoh(v.as_mut_ptr() as *mut c_void, p, std::mem::size_of_val(&v[..]) as u64) };
    assert_eq!(rc, CUMEM_SUCCESS, "{}", last_error());
    v
}

const F64: i32 = 1;

#[test]
fn bad_input_is_invalid_value_on_every_device() {
    setup();
    let a = alloc(16 * 8); // a 4×4 Float64 matrix
    let mut info = 0;
    let one = 1.0f64;
    let p1 = &one as *const f64 as *const c_void;
    // SAFETY: valid pointers throughout (the operands are device addresses, checked).
    unsafe {
        // a 5×5 matrix does not fit a 4×4 allocation
        assert_eq!(cumem_getrf_async(0, F64, 5, 5, a, 5, a, &mut info), CUMEM_ERROR_INVALID_VALUE);
        assert!(last_error().contains("getrf") && last_error().contains("A"), "{}", last_error());
        // leading dimension below the rows, negative sizes, bad codes, unknown dtype
        assert_eq!(cumem_potrf_async(0, F64, 1, 4, a, 3, &mut info), CUMEM_ERROR_INVALID_VALUE);
        assert_eq!(cumem_potrf_async(0, F64, 1, -1, a, 4, &mut info), CUMEM_ERROR_INVALID_VALUE);
        assert_eq!(cumem_potrf_async(0, F64, 2, 4, a, 4, &mut info), CUMEM_ERROR_INVALID_VALUE);
        assert_eq!(cumem_potrf_async(0, 9, 1, 4, a, 4, &mut info), CUMEM_ERROR_INVALID_VALUE);
        assert_eq!(cumem_potrf_async(0, 4, 1, 4, a, 4, &mut info), CUMEM_ERROR_INVALID_VALUE); // Float16
        assert!(last_error().contains("Float16"), "{}", last_error());
        // a null info pointer, a null alpha
        assert_eq!(cumem_potrf_async(0, F64, 1, 4, a, 4, std::ptr::null_mut()), CUMEM_ERROR_INVALID_VALUE);
        assert_eq!(
            cumem_trsm_async(0, F64, 0, 1, 0, 0, 4, 4, std::ptr::null(), a, 4, a, 4),
            CUMEM_ERROR_INVALID_VALUE
        );
        // ipiv / tau / S outside the allocation
        assert_eq!(cumem_getrf_async(0, F64, 4, 4, a, 4, a + 15 * 8, &mut info), CUMEM_ERROR_INVALID_VALUE);
        assert_eq!(cumem_geqrf_async(0, F64, 4, 4, a, 4, 0x10, &mut info), CUMEM_ERROR_INVALID_VALUE);
        assert_eq!(
            cumem_gesvd_async(0, F64, 1, 0, 4, 4, a, 4, a + 14 * 8, 0, 4, 0, 4, &mut info),
            CUMEM_ERROR_INVALID_VALUE
        );
        // gesvd (not Jacobi) needs m ≥ n; orgqr needs m ≥ n ≥ k
        assert_eq!(
            cumem_gesvd_async(0, F64, 0, 0, 2, 4, a, 2, a, 0, 2, 0, 2, &mut info),
            CUMEM_ERROR_INVALID_VALUE
        );
        assert_eq!(cumem_orgqr_async(0, F64, 2, 4, 2, a, 2, a, &mut info), CUMEM_ERROR_INVALID_VALUE);
        // a trsm whose B does not fit; a symm whose C does not
        assert_eq!(cumem_trsm_async(0, F64, 0, 1, 0, 0, 4, 5, p1, a, 4, a, 4), CUMEM_ERROR_INVALID_VALUE);
        assert_eq!(
            cumem_symm_async(0, F64, 0, 0, 1, 4, 4, p1, a, 4, a, 4, p1, a + 8, 4),
            CUMEM_ERROR_INVALID_VALUE
        );
        // batched: the last matrix outside; C's matrices overlapping
        assert_eq!(
            cumem_gemm_strided_batched_async(0, F64, 0, 0, 2, 2, 2, 5, p1, a, 2, 4, a, 2, 4, p1, a, 2, 4),
            CUMEM_ERROR_INVALID_VALUE
        );
        assert_eq!(
            cumem_gemm_strided_batched_async(0, F64, 0, 0, 2, 2, 2, 2, p1, a, 2, 4, a, 2, 4, p1, a, 2, 1),
            CUMEM_ERROR_INVALID_VALUE
        );
        // an unknown stream
        assert_eq!(cumem_potrf_async(12345, F64, 1, 4, a, 4, &mut info), CUMEM_ERROR_INVALID_VALUE);
    }
    assert_eq!(cumem_free(a), CUMEM_SUCCESS);
}

#[test]
fn valid_input_on_the_host_device_is_not_supported() {
    setup();
    if cuda() {
        return;
    }
    let a = alloc(16 * 8);
    let ipiv = alloc(4 * 8);
    let mut info = -7;
    // SAFETY: valid operands and out-pointer.
    unsafe {
        assert_eq!(cumem_getrf_async(0, F64, 4, 4, a, 4, ipiv, &mut info), CUMEM_ERROR_NOT_SUPPORTED);
        let msg = last_error();
        assert!(msg.contains("host device") && msg.contains("getrf"), "{msg}");
        assert_eq!(info, -7, "info must not be written on failure");
        let one = 1.0f64;
        let p1 = &one as *const f64 as *const c_void;
        assert_eq!(cumem_trsm_async(0, F64, 0, 1, 0, 0, 4, 4, p1, a, 4, a, 4), CUMEM_ERROR_NOT_SUPPORTED);
        assert_eq!(cumem_syevd_async(0, F64, 1, 1, 4, a, 4, ipiv, &mut info), CUMEM_ERROR_NOT_SUPPORTED);
    }
    assert_eq!(cumem_free(a), CUMEM_SUCCESS);
    assert_eq!(cumem_free(ipiv), CUMEM_SUCCESS);
}

// ---- on a GPU (CUMEM_TEST_CUDA=1) ----

fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-9 * (1.0 + y.abs()))
}

#[test]
fn cuda_lu_cholesky_qr_eigen() {
    setup();
    if !cuda() {
        eprintln!("cuda_lu_cholesky_qr_eigen: skipped (set CUMEM_TEST_CUDA=1 on a GPU)");
        return;
    }
    let n = 3usize;
    // column-major SPD matrix and a right-hand side with the solution x = [1, 2, 3]
    let spd = [4.0, 1.0, 0.0, 1.0, 3.0, 1.0, 0.0, 1.0, 2.0];
    let x = [1.0, 2.0, 3.0];
    let b: Vec<f64> = (0..n).map(|i| (0..n).map(|j| spd[i + j * n] * x[j]).sum()).collect();
    let mut info = -1;
    // SAFETY: operands of the stated sizes, valid out-pointers.
    unsafe {
        // LU
        let a = upload(&spd);
        let ipiv = alloc(n as u64 * 8);
        let rhs = upload(&b);
        assert_eq!(cumem_getrf_async(0, F64, 3, 3, a, 3, ipiv, &mut info), CUMEM_SUCCESS, "{}", last_error());
        assert_eq!(info, 0);
        assert_eq!(
            cumem_getrs_async(0, F64, 0, 3, 1, a, 3, ipiv, rhs, 3, &mut info),
            CUMEM_SUCCESS,
            "{}",
            last_error()
        );
        assert!(close(&download::<f64>(rhs, 3), &x));
        // Cholesky
        let c = upload(&spd);
        let rhs = upload(&b);
        assert_eq!(cumem_potrf_async(0, F64, 1, 3, c, 3, &mut info), CUMEM_SUCCESS, "{}", last_error());
        assert_eq!(info, 0);
        assert_eq!(
            cumem_potrs_async(0, F64, 1, 3, 1, c, 3, rhs, 3, &mut info),
            CUMEM_SUCCESS,
            "{}",
            last_error()
        );
        assert!(close(&download::<f64>(rhs, 3), &x));
        // not positive definite at the second minor; singular LU at the second pivot
        let bad = upload(&[1.0, 2.0, 0.0, 2.0, 1.0, 0.0, 0.0, 0.0, 1.0]);
        assert_eq!(cumem_potrf_async(0, F64, 1, 3, bad, 3, &mut info), CUMEM_SUCCESS);
        assert_eq!(info, 2);
        // [1 2 0; 2 4 0; 0 0 1]: every step of the elimination is exact (multiplier 1/2),
        // so U[2,2] is exactly 0 with or without fused multiply-adds and info is LAPACK's 2.
        // (The earlier [1 2 0; 2 4 0; 3 6 1] pivots on 3: 4 - (2/3)·6 is 0 in separate
        // rounding (LAPACK on the host: info 2) but 2.2e-16 with an FMA, as on the GPU, whose
        // first exactly zero pivot is then U[3,3]: info 3. Both are right for their rounding.)
        let sing = upload(&[1.0, 2.0, 0.0, 2.0, 4.0, 0.0, 0.0, 0.0, 1.0]);
        let ipiv2 = alloc(24);
        assert_eq!(cumem_getrf_async(0, F64, 3, 3, sing, 3, ipiv2, &mut info), CUMEM_SUCCESS);
        assert_eq!(info, 2);
        // QR: Q has orthonormal columns and Q R = A
        let q = upload(&spd);
        let tau = alloc(24);
        assert_eq!(cumem_geqrf_async(0, F64, 3, 3, q, 3, tau, &mut info), CUMEM_SUCCESS, "{}", last_error());
        let r = download::<f64>(q, 9);
        assert_eq!(
            cumem_orgqr_async(0, F64, 3, 3, 3, q, 3, tau, &mut info),
            CUMEM_SUCCESS,
            "{}",
            last_error()
        );
        let qm = download::<f64>(q, 9);
        for i in 0..3 {
            for j in 0..3 {
                let qr: f64 = (0..=j).map(|k| qm[i + k * 3] * r[k + j * 3]).sum();
                assert!((qr - spd[i + j * 3]).abs() < 1e-9, "QR != A at ({i},{j})");
            }
        }
        // ormqr: Q' A = R
        let a2 = upload(&spd);
        let q2 = upload(&spd);
        let tau2 = alloc(24);
        assert_eq!(cumem_geqrf_async(0, F64, 3, 3, q2, 3, tau2, &mut info), CUMEM_SUCCESS);
        assert_eq!(
            cumem_ormqr_async(0, F64, 0, 1, 3, 3, 3, q2, 3, tau2, a2, 3, &mut info),
            CUMEM_SUCCESS,
            "{}",
            last_error()
        );
        let qta = download::<f64>(a2, 9);
        assert!((qta[0] - r[0]).abs() < 1e-9 && qta[1].abs() < 1e-9);
        // the eigenvalues of the SPD matrix (the SVD drivers: the cuda_svd_* tests below)
        let e = upload(&spd);
        let w = alloc(24);
        assert_eq!(cumem_syevd_async(0, F64, 1, 1, 3, e, 3, w, &mut info), CUMEM_SUCCESS, "{}", last_error());
        let ev = download::<f64>(w, 3);
        let trace: f64 = ev.iter().sum();
        assert!((trace - 9.0).abs() < 1e-9 && ev[0] < ev[1] && ev[1] < ev[2], "{ev:?}");
    }
}

#[test]
fn cuda_triangular_symmetric_batched() {
    setup();
    if !cuda() {
        eprintln!("cuda_triangular_symmetric_batched: skipped (set CUMEM_TEST_CUDA=1 on a GPU)");
        return;
    }
    let up = [2.0, 0.0, 1.0, 4.0]; // column-major [2 1; 0 4]
    let one = 1.0f64;
    let zero = 0.0f64;
    let (p1, p0) = (&one as *const f64 as *const c_void, &zero as *const f64 as *const c_void);
    // SAFETY: operands of the stated sizes.
    unsafe {
        let a = upload(&up);
        // trmv (one column, alpha 1) and trmm (two columns)
        let x = upload(&[1.0, 1.0]);
        assert_eq!(
            cumem_trmm_async(0, F64, 0, 1, 0, 0, 2, 1, p1, a, 2, x, 2),
            CUMEM_SUCCESS,
            "{}",
            last_error()
        );
        assert!(close(&download::<f64>(x, 2), &[3.0, 4.0]));
        let xb = upload(&[1.0, 1.0, 2.0, 0.0]);
        assert_eq!(cumem_trmm_async(0, F64, 0, 1, 1, 0, 2, 2, p1, a, 2, xb, 2), CUMEM_SUCCESS); // A' * B
        assert!(close(&download::<f64>(xb, 4), &[2.0, 5.0, 4.0, 2.0]));
        // trsv / trsm undo them
        assert_eq!(cumem_trsm_async(0, F64, 0, 1, 0, 0, 2, 1, p1, a, 2, x, 2), CUMEM_SUCCESS);
        assert!(close(&download::<f64>(x, 2), &[1.0, 1.0]));
        assert_eq!(cumem_trsm_async(0, F64, 0, 1, 1, 0, 2, 2, p1, a, 2, xb, 2), CUMEM_SUCCESS);
        assert!(close(&download::<f64>(xb, 4), &[1.0, 1.0, 2.0, 0.0]));
        // symv: only the upper triangle [2 1; 1 4] is read
        let s = upload(&[2.0, 99.0, 1.0, 4.0]);
        let (v, y) = (upload(&[1.0, 2.0]), alloc(16));
        assert_eq!(
            cumem_symm_async(0, F64, 0, 0, 1, 2, 1, p1, s, 2, v, 2, p0, y, 2),
            CUMEM_SUCCESS,
            "{}",
            last_error()
        );
        assert!(close(&download::<f64>(y, 2), &[4.0, 9.0]));
        // batched: two 2×2 products, the second B shared (stride 0)
        let am = upload(&[1.0, 0.0, 0.0, 1.0, 2.0, 0.0, 0.0, 2.0]);
        let bm = upload(&[1.0, 2.0, 3.0, 4.0]);
        let cm = alloc(64);
        assert_eq!(
            cumem_gemm_strided_batched_async(0, F64, 0, 0, 2, 2, 2, 2, p1, am, 2, 4, bm, 2, 0, p0, cm, 2, 4),
            CUMEM_SUCCESS,
            "{}",
            last_error()
        );
        assert!(close(&download::<f64>(cm, 8), &[1.0, 2.0, 3.0, 4.0, 2.0, 4.0, 6.0, 8.0]));
    }
}

// ---- the SVD drivers one case a test (the GPU script runs each in its own process, so
// a fault in one leaves the others' contexts clean) ----

/// A fixed `m × n` column-major test matrix with distinct singular values.
fn svd_matrix(m: usize, n: usize) -> Vec<f64> {
    (0..m * n).map(|i| ((i * 7 + 3) % 11) as f64 / 11.0 + if i % (m + 1) == 0 { 1.0 } else { 0.0 }).collect()
}

/// Runs `cumem_gesvd` (`jacobi` 1: gesvdj, 0: gesvd) on [`svd_matrix`] for each shape and
/// checks: Σσ² = ‖A‖²_F, σ descending; with vectors, U Σ Vᴴ = A.
fn svd_case(jacobi: i32, vectors: i32, shapes: &[(usize, usize)]) {
    setup();
    if !cuda() {
        eprintln!("svd case: skipped (set CUMEM_TEST_CUDA=1 on a GPU)");
        return;
    }
    for &(m, n) in shapes {
        let k = m.min(n);
        let a = svd_matrix(m, n);
        let frob: f64 = a.iter().map(|x| x * x).sum();
        let d = upload(&a);
        let s = alloc(k as u64 * 8);
        let (ur, uc) = match vectors {
            0 => (0, 0),
            1 => (m, k),
            _ => (m, m),
        };
        // V (jacobi) is n × (k or n); Vᴴ (gesvd) is (k or n) × n
        let (vr, vc) = match (vectors, jacobi) {
            (0, _) => (0, 0),
            (1, 1) => (n, k),
            (1, _) => (k, n),
            _ => (n, n),
        };
        let (u, v) =
            if vectors > 0 { (alloc((ur * uc) as u64 * 8), alloc((vr * vc) as u64 * 8)) } else { (0, 0) };
        let mut info = -1;
        // SAFETY: operands of the stated sizes, valid out-pointer.
        let rc = unsafe {
            cumem_gesvd_async(
                0,
                F64,
                jacobi,
                vectors,
                m as i64,
                n as i64,
                d,
                m as i64,
                s,
                u,
                ur.max(1) as i64,
                v,
                vr.max(1) as i64,
                &mut info,
            )
        };
        assert_eq!(rc, CUMEM_SUCCESS, "{m}×{n} jacobi {jacobi} vectors {vectors}: {}", last_error());
        assert_eq!(info, 0, "{m}×{n}");
        let sv = download::<f64>(s, k);
        let sum: f64 = sv.iter().map(|x| x * x).sum();
        assert!((sum - frob).abs() < 1e-9 * frob, "{m}×{n}: Σσ² {sum} vs ‖A‖² {frob}");
        assert!(sv.windows(2).all(|w| w[0] >= w[1]), "{m}×{n}: not descending {sv:?}");
        if vectors > 0 {
            let (um, vm) = (download::<f64>(u, ur * uc), download::<f64>(v, vr * vc));
            for i in 0..m {
                for j in 0..n {
                    let x: f64 = (0..k)
                        .map(|l| {
                            let vjl = if jacobi == 1 { vm[j + l * vr] } else { vm[l + j * vr] };
                            um[i + l * ur] * sv[l] * vjl
                        })
                        .sum();
                    assert!((x - a[i + j * m]).abs() < 1e-9, "{m}×{n}: U Σ Vᴴ differs at ({i},{j})");
                }
            }
            assert_eq!(cumem_free(u), CUMEM_SUCCESS);
            assert_eq!(cumem_free(v), CUMEM_SUCCESS);
        }
        assert_eq!(cumem_free(d), CUMEM_SUCCESS);
        assert_eq!(cumem_free(s), CUMEM_SUCCESS);
    }
}

const SHAPES: &[(usize, usize)] = &[(7, 4), (5, 5), (3, 6), (64, 40)];
const TALL: &[(usize, usize)] = &[(7, 4), (5, 5), (64, 40)];

#[test]
fn cuda_svd_jacobi_values() {
    svd_case(1, 0, SHAPES);
}
#[test]
fn cuda_svd_jacobi_thin() {
    svd_case(1, 1, SHAPES);
}
#[test]
fn cuda_svd_jacobi_full() {
    svd_case(1, 2, SHAPES);
}
#[test]
fn cuda_svd_qr_values() {
    svd_case(0, 0, TALL);
}
#[test]
fn cuda_svd_qr_thin() {
    svd_case(0, 1, TALL);
}
#[test]
fn cuda_svd_qr_full() {
    svd_case(0, 2, TALL);
}
