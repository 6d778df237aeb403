//! Kernels: compiling CUDA C for the current GPU, loading it (`cuModuleLoadData`),
//! caching the functions by (source, name), and launching them on a stream (0: the legacy
//! default stream, on which the engine's synchronous copies run).
//!
//! Modules stay loaded for the life of the process, as CUDA.jl and CuPy keep their
//! compiled kernels: a handle, once returned, is valid until exit. A module belongs to
//! one device's context, so the cache is per device: the same source loaded on two
//! devices gives two handles, and a handle launched on another device than its own is
//! refused (`CUDA_ERROR_INVALID_HANDLE` otherwise, or worse).

use super::gpu;
use super::nvrtc::{Target, nvrtc};
use crate::device::{Device, device_err};
use crate::error::{Error, Result};
use cudarc::driver::{result, sys};
use parking_lot::RwLock;
use rustc_hash::FxHashMap;
use std::ffi::{CString, c_void};

/// One loaded module: the functions looked up in it so far, by name, as handles.
struct Module {
    module: usize, // sys::CUmodule
    funcs: FxHashMap<String, u64>,
    /// Parameter count of each `.entry` of the module's PTX (see [`ptx_param_counts`]).
    entries: FxHashMap<String, usize>,
    /// The `.entry` functions of the module's PTX that execute `griddepcontrol.wait`
    /// (see [`ptx_grid_waits`]).
    waits: Vec<String>,
    /// The compute capability the module was loaded for (`10 * major + minor`).
    cc: i32,
}

/// A kernel a handle stands for.
struct Kernel {
    func: usize, // sys::CUfunction
    name: String,
    /// The ordinal of the device whose context holds the module.
    device: u32,
    /// Byte size of each parameter, when the driver can tell (see [`param_sizes`]).
    params: Option<Vec<u64>>,
    /// Whether launches may ask for programmatic dependent launch ([`pdl_capable`]).
    pdl: bool,
}

/// The process's kernels. Handles are 1 + the index into `kernels` (0 is never one).
#[derive(Default)]
struct Registry {
    /// Per device ordinal: modules by source.
    by_source: FxHashMap<u32, FxHashMap<String, Module>>,
    kernels: Vec<Kernel>,
}

static REGISTRY: RwLock<Option<Registry>> = RwLock::new(None);

/// The handle of `source`'s `extern "C" __global__` function `name`, compiling the
/// source with NVRTC for the current GPU (a CUBIN for its `sm_XY` when NVRTC supports
/// it, else PTX for the newest older architecture, compiled by the driver) and loading
/// it with `cuModuleLoadData` on first use. Later calls with the same (source, name)
/// return the same handle after a hash lookup. Errors: [`Error::NotSupported`] on the
/// host device or without libnvrtc, [`Error::Compile`] (NVRTC's log and the numbered
/// source), [`Error::InvalidValue`] when the module has no function `name` or a string
/// holds a NUL byte, [`Error::Device`] when the driver fails to load the module.
pub fn load(dev: &dyn Device, source: &str, name: &str) -> Result<u64> {
    let ord = dev.ordinal();
    if let Some(h) =
        REGISTRY.read().as_ref().and_then(|r| r.by_source.get(&ord)?.get(source)?.funcs.get(name).copied())
    {
        return Ok(h);
    }
    let cname =
        CString::new(name).map_err(|_| Error::InvalidValue("the kernel name contains a NUL byte".into()))?;
    gpu::bind(dev, "loading a kernel")?;
    let info = gpu::info(dev)?;
    // Compile outside the lock, so launches of other kernels on other threads do not wait
    // the ~100 ms of NVRTC. Two threads racing for a new source both compile; the loser
    // unloads its module and uses the winner's.
    let known = REGISTRY
        .read()
        .as_ref()
        .is_some_and(|r| r.by_source.get(&ord).is_some_and(|m| m.contains_key(source)));
    let fresh = if known { None } else { Some(compile_and_load(source, info.cc())?) };
    let mut guard = REGISTRY.write();
    let reg = guard.get_or_insert_with(Registry::default);
    let mods = reg.by_source.entry(ord).or_default();
    if let Some((module, entries, waits)) = fresh {
        if mods.contains_key(source) {
            // SAFETY: our own module, never handed out.
            let _ = unsafe { result::module::unload(module as sys::CUmodule) };
        } else {
            let cc = info.cc();
            mods.insert(
                source.to_owned(),
                Module { module, funcs: FxHashMap::default(), entries, waits, cc },
            );
        }
    }
    let m = mods.get_mut(source).expect("loaded above or by another thread");
    if let Some(&h) = m.funcs.get(name) {
        return Ok(h);
    }
    // SAFETY: `m.module` is a loaded module of the current context.
    let func = unsafe { result::module::get_function(m.module as sys::CUmodule, cname) }.map_err(|e| {
        if e.0 == sys::CUresult::CUDA_ERROR_NOT_FOUND {
            Error::InvalidValue(format!(
                "the kernel source defines no `extern \"C\" __global__` function named `{name}`"
            ))
        } else {
            device_err("cuModuleGetFunction", e)
        }
    })?;
    let params = param_sizes(func, m.entries.get(name).copied());
    let pdl = pdl_capable(m.cc, m.waits.iter().any(|w| w == name));
    reg.kernels.push(Kernel { func: func as usize, name: name.to_owned(), device: ord, params, pdl });
    let h = reg.kernels.len() as u64;
    m.funcs.insert(name.to_owned(), h);
    Ok(h)
}

/// Compiles `source` for a GPU of compute capability `cc` and loads it into the
/// current context; returns the `CUmodule`, the parameter count of each kernel (from the
/// PTX, [`ptx_param_counts`]) and the kernels that execute `griddepcontrol.wait`
/// ([`ptx_grid_waits`]).
fn compile_and_load(source: &str, cc: i32) -> Result<(usize, FxHashMap<String, usize>, Vec<String>)> {
    let nv = nvrtc()?;
    let target = nv.target_for(cc)?;
    let out = nv.compile_cached(source, &target.arch())?;
    let entries = ptx_param_counts(&out.ptx);
    let waits = ptx_grid_waits(&out.ptx);
    let image: Vec<u8> = match (target, out.cubin) {
        (Target::Real(_), Some(cubin)) => cubin,
        _ => {
            let mut ptx = out.ptx.into_bytes();
            ptx.push(0);
            ptx
        }
    };
    // SAFETY: `image` is a CUBIN or NUL-terminated PTX produced by NVRTC.
    let module = unsafe { result::module::load_data(image.as_ptr() as *const c_void) }.map_err(|e| {
        Error::Device(format!(
            "cuModuleLoadData of the kernel compiled by NVRTC {}.{} for {} failed: {e}{}",
            nv.version().0,
            nv.version().1,
            target.arch(),
            if e.0 == sys::CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION {
                " (the driver is older than NVRTC: update the driver or use an older libnvrtc, \
                 CUMEM_NVRTC_LIBRARY)"
            } else {
                ""
            }
        ))
    })?;
    Ok((module as usize, entries, waits))
}

/// The number of parameters of each `.entry NAME( .param ..., .param ... )` of a PTX
/// text, by name. PTX declares every kernel parameter as one `.param` in the entry's
/// parenthesised list, so this is the count `cuFuncGetParamInfo` accepts indices below.
fn ptx_param_counts(ptx: &str) -> FxHashMap<String, usize> {
    let mut out = FxHashMap::default();
    let mut rest = ptx;
    while let Some(i) = rest.find(".entry") {
        rest = &rest[i + ".entry".len()..];
        let Some(open) = rest.find('(') else { break };
        let name = rest[..open].trim();
        let Some(close) = rest[open..].find(')') else { break };
        let list = &rest[open + 1..open + close];
        out.insert(name.to_owned(), list.matches(".param").count());
        rest = &rest[open + close..];
    }
    out
}

/// The names of the `.entry` functions of a PTX text whose body executes
/// `griddepcontrol.wait` (PTX ISA 7.8, sm_90; CUDA C's `cudaGridDependencySynchronize`,
/// CuMem's `CUMEM_PDL_ENTRY()` of julia/cuda/common.cuh, emitted for sm_90 and later only).
/// A body is the text between the entry's `{` and its matching `}`; NVRTC inlines the
/// device functions a kernel calls (a wait in a non-inlined `.func` is not seen, and the
/// kernel is launched without PDL: slower, never wrong).
fn ptx_grid_waits(ptx: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = ptx;
    while let Some(i) = rest.find(".entry") {
        rest = &rest[i + ".entry".len()..];
        let Some(open) = rest.find('(') else { break };
        let name = rest[..open].trim().to_owned();
        let Some(start) = rest.find('{') else { break };
        let mut depth = 0usize;
        let mut end = rest.len();
        for (k, c) in rest[start..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = start + k;
                        break;
                    }
                }
                _ => {}
            }
        }
        if rest[start..end].contains("griddepcontrol.wait") {
            out.push(name);
        }
        rest = &rest[end..];
    }
    out
}

/// Programmatic dependent launch (PDL) state: 0 not yet read, 1 on, 2 off.
static PDL: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Whether `CUMEM_PDL` turns PDL off (`0`, `off`, `false` or `no`, any case).
fn pdl_env_off() -> bool {
    std::env::var("CUMEM_PDL")
        .is_ok_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "0" | "off" | "false" | "no"))
}

/// Whether kernels are launched with programmatic dependent launch where they can be
/// ([`pdl_capable`]): on unless `CUMEM_PDL=0` (or `off`, `false`, `no`), or [`set_pdl`]
/// turned it off. Read from the environment on first use.
pub fn pdl_enabled() -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    match PDL.load(Relaxed) {
        1 => true,
        2 => false,
        _ => {
            let v = if pdl_env_off() { 2 } else { 1 };
            let _ = PDL.compare_exchange(0, v, Relaxed, Relaxed);
            PDL.load(Relaxed) == 1
        }
    }
}

/// Turns programmatic dependent launch on or off for the kernels launched from now on
/// (the benchmarks' switch; a graph keeps the edges it was captured with). The
/// environment wins: with `CUMEM_PDL=0` it stays off. Returns whether it was on.
pub fn set_pdl(on: bool) -> bool {
    let was = pdl_enabled();
    let v = if on && !pdl_env_off() { 1 } else { 2 };
    PDL.store(v, std::sync::atomic::Ordering::Relaxed);
    was
}

/// Whether a kernel compiled for compute capability `cc` (`10 * major + minor`) whose
/// code executes `griddepcontrol.wait` (`waits`) may be launched with
/// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`: sm_90 and later, where the
/// wait makes it safe (it holds the kernel until the kernels it depends on have completed
/// and their writes are visible), and a driver of CUDA 12.3 or later, which also captures
/// such launches into graphs (as programmatic edges). A kernel without the wait (a user's
/// CUDA C, the engine's own spin kernel) is launched as before: PDL would let it read
/// what its predecessor has not yet written.
fn pdl_capable(cc: i32, waits: bool) -> bool {
    waits && cc >= 90 && driver_version() >= 12030
}

/// The driver's CUDA version (`cuDriverGetVersion`, e.g. 13000), 0 when it cannot tell.
fn driver_version() -> i32 {
    static V: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    *V.get_or_init(|| {
        let mut v = 0;
        // SAFETY: a valid out-pointer; callable before any context exists.
        match unsafe { sys::cuDriverGetVersion(&mut v) }.result() {
            Ok(()) => v,
            Err(_) => 0,
        }
    })
}

/// `cuFuncGetParamInfo(func, index, *offset, *size)`: drivers of CUDA 12.4 and later.
type ParamInfo = unsafe extern "C" fn(sys::CUfunction, usize, *mut usize, *mut usize) -> sys::CUresult;

/// `cuFuncGetParamCount(func, *count)`: drivers of CUDA 12.9 and later.
type ParamCount = unsafe extern "C" fn(sys::CUfunction, *mut usize) -> sys::CUresult;

/// The driver's `cuFuncGetParamInfo` and, where it has it, `cuFuncGetParamCount`; `None`
/// without the first. Looked up here rather than through cudarc, whose bindings at the
/// CUDA 12.0 level lack them.
fn param_info_fn() -> Option<(ParamInfo, Option<ParamCount>)> {
    static F: std::sync::OnceLock<Option<(libloading::Library, ParamInfo, Option<ParamCount>)>> =
        std::sync::OnceLock::new();
    F.get_or_init(|| {
        // SAFETY: libcuda is already loaded by the device; this takes another reference.
        let lib = ["libcuda.so.1", "libcuda.so"]
            .iter()
            .find_map(|n| unsafe { libloading::Library::new(*n) }.ok())?;
        // SAFETY: the signatures of cuda.h.
        let f: ParamInfo = unsafe { lib.get::<ParamInfo>("cuFuncGetParamInfo") }.ok().map(|s| *s)?;
        let c: Option<ParamCount> = unsafe { lib.get::<ParamCount>("cuFuncGetParamCount") }.ok().map(|s| *s);
        Some((lib, f, c))
    })
    .as_ref()
    .map(|(_, f, c)| (*f, *c))
}

/// The byte size of each of `func`'s parameters, in order; `None` when the driver
/// cannot tell (older than CUDA 12.4). It asks `cuFuncGetParamInfo` for exactly as many
/// parameters as `cuFuncGetParamCount` (CUDA 12.9) or else the PTX (`ptx_count`) says,
/// so no call fails (a failing driver call is a report of compute-sanitizer's memcheck);
/// without either it asks until the driver answers CUDA_ERROR_INVALID_VALUE past the
/// last one.
fn param_sizes(func: sys::CUfunction, ptx_count: Option<usize>) -> Option<Vec<u64>> {
    let (f, count) = param_info_fn()?;
    let n = match count {
        None => ptx_count,
        Some(c) => {
            let mut n = 0usize;
            // SAFETY: `func` is a loaded function; a valid out-pointer.
            match unsafe { c(func, &mut n) } {
                sys::CUresult::CUDA_SUCCESS => Some(n),
                _ => return None,
            }
        }
    };
    let mut sizes = Vec::new();
    while n.is_none_or(|n| sizes.len() < n) {
        let (mut off, mut size) = (0usize, 0usize);
        // SAFETY: `func` is a loaded function; valid out-pointers. Past the last
        // parameter the driver answers CUDA_ERROR_INVALID_VALUE.
        match unsafe { f(func, sizes.len(), &mut off, &mut size) } {
            sys::CUresult::CUDA_SUCCESS => sizes.push(size as u64),
            sys::CUresult::CUDA_ERROR_INVALID_VALUE if n.is_none() => return Some(sizes),
            _ => return None,
        }
    }
    Some(sizes)
}

/// The byte sizes of kernel `h`'s parameters, in order, or `None` when the driver cannot
/// tell (drivers older than CUDA 12.4 lack `cuFuncGetParamInfo`). Errors:
/// [`Error::InvalidValue`] for an unknown handle.
pub fn params(h: u64) -> Result<Option<Vec<u64>>> {
    let reg = REGISTRY.read();
    match reg.as_ref().and_then(|r| r.kernels.get((h as usize).wrapping_sub(1))) {
        Some(k) => Ok(k.params.clone()),
        None => Err(Error::InvalidValue(format!("{h:#x} is not a kernel handle from cumem_kernel_load"))),
    }
}

/// The function and name of handle `h`. Errors: [`Error::InvalidValue`] for a handle
/// that [`load`] never returned.
fn kernel(h: u64) -> Result<(sys::CUfunction, String)> {
    let reg = REGISTRY.read();
    let k = reg.as_ref().and_then(|r| r.kernels.get((h as usize).wrapping_sub(1))).ok_or_else(|| {
        Error::InvalidValue(format!("{h:#x} is not a kernel handle from cumem_kernel_load"))
    })?;
    Ok((k.func as sys::CUfunction, k.name.clone()))
}

/// The function of handle `h` without copying its name (the launch path), checking that
/// it was loaded on device `device`.
fn function(h: u64, device: u32) -> Result<sys::CUfunction> {
    launchable(h, device).map(|(f, _)| f)
}

/// [`function`] and whether the kernel may be launched with PDL ([`pdl_capable`]).
fn launchable(h: u64, device: u32) -> Result<(sys::CUfunction, bool)> {
    let reg = REGISTRY.read();
    match reg.as_ref().and_then(|r| r.kernels.get((h as usize).wrapping_sub(1))) {
        Some(k) if k.device == device => Ok((k.func as sys::CUfunction, k.pdl)),
        Some(k) => Err(Error::InvalidValue(format!(
            "kernel `{}` (handle {h}) was loaded on device {} but the current device is {device}: \
             load it again with device {device} current",
            k.name, k.device
        ))),
        None => Err(Error::InvalidValue(format!("{h:#x} is not a kernel handle from cumem_kernel_load"))),
    }
}

/// Launch geometry: blocks per grid and threads per block in x, y, z, and dynamic
/// shared memory in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Launch {
    /// Blocks in x, y, z (each ≥ 1).
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z (each ≥ 1, product ≤ the device's maximum).
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, bytes.
    pub shared_bytes: u32,
}

/// Queues kernel `h` with `geometry` on stream `stream` (0: the legacy default stream;
/// else a handle of `Device::stream_create`); returns without waiting. `args` is
/// `cuLaunchKernel`'s `kernelParams`: one pointer per kernel parameter to its value (null
/// only for a kernel without parameters).
///
/// A kernel that executes `griddepcontrol.wait` on an sm_90+ GPU (every kernel CuMem
/// generates or ships begins with it: `CUMEM_PDL_ENTRY()` of julia/cuda/common.cuh) is
/// launched with programmatic dependent launch (`cuLaunchKernelEx` with
/// `CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION` = 1; CUDA Programming Guide,
/// "Programmatic Dependent Launch and Synchronization"): its launch may overlap the end of
/// the kernel before it on the stream, and under stream capture its edges from kernel
/// nodes become programmatic edges. `CUMEM_PDL=0` or [`set_pdl`] turns this off (then
/// `cuLaunchKernel`, as for every other kernel). Errors: [`Error::InvalidValue`] for an
/// unknown handle, a handle loaded on another device, a zero dimension, or a geometry the
/// driver refuses (too many threads per block or too much shared memory),
/// [`Error::NotSupported`] on the host device, [`Error::Device`] when the launch fails
/// otherwise (a fault of an earlier kernel included).
///
/// # Safety
/// `args` must point to as many valid argument pointers as the kernel has parameters,
/// each to a value of the parameter's type; device pointers among them must be valid
/// for what the kernel does with them.
pub unsafe fn launch(
    dev: &dyn Device,
    h: u64,
    stream: u64,
    geometry: Launch,
    args: *mut *mut c_void,
) -> Result<()> {
    let (func, pdl) = launchable(h, dev.ordinal())?;
    let Launch { grid, block, shared_bytes } = geometry;
    if [grid.0, grid.1, grid.2, block.0, block.1, block.2].contains(&0) {
        return Err(Error::InvalidValue(format!(
            "kernel launch with a zero dimension: grid {grid:?}, block {block:?}"
        )));
    }
    gpu::activate(dev, "launching a kernel")?;
    let raw = dev.stream_raw(stream)? as sys::CUstream;
    let pdl = pdl && pdl_enabled();
    let r = if pdl {
        // SAFETY: a zeroed plain-data attribute (the union's other members unused).
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: grid.0,
            gridDimY: grid.1,
            gridDimZ: grid.2,
            blockDimX: block.0,
            blockDimY: block.1,
            blockDimZ: block.2,
            sharedMemBytes: shared_bytes,
            hStream: raw,
            attrs: &mut attr,
            numAttrs: 1,
        };
        // SAFETY: as below; `config` and `attr` outlive the call (drivers of CUDA 11.8
        // and later have cuLaunchKernelEx; `pdl` needs 12.3).
        unsafe { sys::cuLaunchKernelEx(&config, func, args, std::ptr::null_mut()) }
    } else {
        // SAFETY: `func` is a loaded function; the caller vouches for `args`. Stream NULL is
        // the legacy default stream (cudarc loads cuLaunchKernel, not the _ptsz variant).
        unsafe {
            sys::cuLaunchKernel(
                func,
                grid.0,
                grid.1,
                grid.2,
                block.0,
                block.1,
                block.2,
                shared_bytes,
                raw,
                args,
                std::ptr::null_mut(),
            )
        }
    }
    .result();
    r.map_err(|e| {
        let name = kernel(h).map(|k| k.1).unwrap_or_default();
        let call =
            if pdl { "cuLaunchKernelEx (programmatic stream serialization)" } else { "cuLaunchKernel" };
        let msg = format!(
            "{call} of `{name}` (grid {grid:?}, block {block:?}, {shared_bytes} bytes shared) failed: {e}"
        );
        match e.0 {
            sys::CUresult::CUDA_ERROR_INVALID_VALUE | sys::CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES => {
                Error::InvalidValue(msg)
            }
            _ => Error::Device(msg),
        }
    })
}

/// Whether `func` (a `CUfunction` as `u64`, e.g. of a captured kernel node) is a kernel
/// this module loaded that may be launched with programmatic dependent launch
/// ([`pdl_capable`]: it executes `griddepcontrol.wait`, sm_90+, CUDA 12.3+), PDL being on.
pub fn waits_for_grid(func: u64) -> bool {
    pdl_enabled()
        && REGISTRY.read().as_ref().is_some_and(|r| r.kernels.iter().any(|k| k.pdl && k.func as u64 == func))
}

/// Whether kernel `h` is launched with programmatic dependent launch now: it executes
/// `griddepcontrol.wait`, the GPU is sm_90 or later with a driver of CUDA 12.3 or later,
/// and PDL is on ([`pdl_enabled`]). Errors: [`Error::InvalidValue`] for an unknown handle.
pub fn uses_pdl(h: u64) -> Result<bool> {
    let reg = REGISTRY.read();
    match reg.as_ref().and_then(|r| r.kernels.get((h as usize).wrapping_sub(1))) {
        Some(k) => Ok(k.pdl && pdl_enabled()),
        None => Err(Error::InvalidValue(format!("{h:#x} is not a kernel handle from cumem_kernel_load"))),
    }
}

/// The block size that maximises occupancy for kernel `h` without dynamic shared
/// memory (`cuOccupancyMaxPotentialBlockSize`). Errors: [`Error::InvalidValue`] for an
/// unknown handle, [`Error::NotSupported`] on the host device, [`Error::Device`].
pub fn block_size(dev: &dyn Device, h: u64) -> Result<i32> {
    let func = function(h, dev.ordinal())?;
    gpu::bind(dev, "sizing a kernel")?;
    let (mut grid, mut block) = (0, 0);
    // SAFETY: `func` is a loaded function; valid out-pointers; no smem callback.
    unsafe { sys::cuOccupancyMaxPotentialBlockSize(&mut grid, &mut block, func, None, 0, 0) }
        .result()
        .map_err(|e| device_err("cuOccupancyMaxPotentialBlockSize", e))?;
    Ok(block)
}

/// The launch shape that maximises occupancy for kernel `h` with `shmem` bytes of dynamic
/// shared memory per block and at most `max_threads` threads per block (0: no limit):
/// `(blocks, threads)`, the smallest grid that fills the GPU at that block size
/// (`cuOccupancyMaxPotentialBlockSize`, as CUDA.jl's `launch_configuration`). On the host
/// device (no kernels to size): `(1, max_threads)`, or `(1, 1024)` without a limit.
/// Errors: [`Error::InvalidValue`] for an unknown handle or a negative limit,
/// [`Error::Device`].
pub fn occupancy(dev: &dyn Device, h: u64, shmem: usize, max_threads: i32) -> Result<(i32, i32)> {
    if max_threads < 0 {
        return Err(Error::InvalidValue(format!("max_threads must be 0 or more, got {max_threads}")));
    }
    if dev.is_host() {
        return Ok((1, if max_threads == 0 { 1024 } else { max_threads }));
    }
    let func = function(h, dev.ordinal())?;
    gpu::bind(dev, "sizing a kernel")?;
    let (mut grid, mut block) = (0, 0);
    // SAFETY: `func` is a loaded function; valid out-pointers; no smem callback.
    unsafe { sys::cuOccupancyMaxPotentialBlockSize(&mut grid, &mut block, func, None, shmem, max_threads) }
        .result()
        .map_err(|e| device_err("cuOccupancyMaxPotentialBlockSize", e))?;
    Ok((grid, block))
}

/// The driver's `CUfunction_attribute` for its number (0 to 9), or
/// [`Error::InvalidValue`].
fn func_attribute(attr: i32) -> Result<sys::CUfunction_attribute> {
    use sys::CUfunction_attribute as A;
    Ok(match attr {
        0 => A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
        1 => A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
        2 => A::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,
        3 => A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,
        4 => A::CU_FUNC_ATTRIBUTE_NUM_REGS,
        5 => A::CU_FUNC_ATTRIBUTE_PTX_VERSION,
        6 => A::CU_FUNC_ATTRIBUTE_BINARY_VERSION,
        7 => A::CU_FUNC_ATTRIBUTE_CACHE_MODE_CA,
        8 => A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        9 => A::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
        _ => return Err(Error::InvalidValue(format!("{attr} is not a CUfunction_attribute (0 to 9)"))),
    })
}

/// Attribute `attr` of kernel `h` (`cuFuncGetAttribute`; `attr` is the driver's
/// `CUfunction_attribute` number: 0 max threads per block, 1 static shared bytes, 2
/// constant bytes, 3 local bytes per thread, 4 registers per thread, 5 PTX version ×10,
/// 6 binary version ×10, 8 max dynamic shared bytes, ...). Errors:
/// [`Error::NotSupported`] on the host device, [`Error::InvalidValue`] for an unknown
/// handle or attribute, [`Error::Device`].
pub fn attribute(dev: &dyn Device, h: u64, attr: i32) -> Result<i32> {
    if dev.is_host() {
        return Err(Error::NotSupported("kernel attributes on the host device".into()));
    }
    let a = func_attribute(attr)?;
    let func = function(h, dev.ordinal())?;
    gpu::bind(dev, "reading a kernel attribute")?;
    let mut v = 0;
    // SAFETY: `func` is a loaded function; a valid out-pointer.
    unsafe { sys::cuFuncGetAttribute(&mut v, a, func) }
        .result()
        .map_err(|e| device_err("cuFuncGetAttribute", e))?;
    Ok(v)
}

/// Sets attribute `attr` of kernel `h` to `value` (`cuFuncSetAttribute`; settable: 8
/// max dynamic shared bytes, which a launch with more than 48 KiB of dynamic shared
/// memory needs, and 9 the preferred shared memory carveout in percent). Errors:
/// [`Error::NotSupported`] on the host device, [`Error::InvalidValue`] for an unknown
/// handle or attribute, or a value the driver refuses (e.g. more shared memory than
/// the GPU has), [`Error::Device`].
pub fn set_attribute(dev: &dyn Device, h: u64, attr: i32, value: i32) -> Result<()> {
    if dev.is_host() {
        return Err(Error::NotSupported("kernel attributes on the host device".into()));
    }
    let a = func_attribute(attr)?;
    let func = function(h, dev.ordinal())?;
    gpu::bind(dev, "setting a kernel attribute")?;
    // SAFETY: `func` is a loaded function.
    unsafe { sys::cuFuncSetAttribute(func, a, value) }.result().map_err(|e| {
        let msg = format!("cuFuncSetAttribute({attr}, {value}) failed: {e}");
        if e.0 == sys::CUresult::CUDA_ERROR_INVALID_VALUE {
            Error::InvalidValue(msg)
        } else {
            Error::Device(msg)
        }
    })
}

/// The number of distinct kernels loaded so far (handles handed out).
pub fn loaded_kernels() -> usize {
    REGISTRY.read().as_ref().map_or(0, |r| r.kernels.len())
}

/// The CUDA C of [`sleep`]'s kernel: one thread spinning on the global nanosecond timer
/// (`%globaltimer`, sm_70 and later).
const SPIN_SOURCE: &str = r#"
extern "C" __global__ void cumem_spin(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"#;

/// Queues on `stream` an operation that takes at least `ns` nanoseconds and touches no
/// memory: the deliberately slow kernel of the ordering tests. On a GPU a one-thread
/// kernel spinning on `%globaltimer` (compiled with NVRTC on first use); on the host
/// device a sleep on the stream's worker thread. Errors: [`Error::InvalidValue`] for an
/// unknown stream, [`Error::NotSupported`] on a GPU without libnvrtc.
pub fn sleep(dev: &dyn Device, stream: u64, ns: u64) -> Result<()> {
    if dev.is_host() {
        return dev.stream_sleep(stream, ns);
    }
    let h = load(dev, SPIN_SOURCE, "cumem_spin")?;
    let mut arg = ns;
    let mut args = [&mut arg as *mut u64 as *mut c_void];
    let geometry = Launch { grid: (1, 1, 1), block: (1, 1, 1), shared_bytes: 0 };
    // SAFETY: one `unsigned long long` parameter, passed by pointer to its value.
    unsafe { launch(dev, h, stream, geometry, args.as_mut_ptr()) }
}

#[cfg(test)]
mod tests {
    use super::{pdl_capable, ptx_grid_waits, ptx_param_counts};

    #[test]
    fn ptx_entries_that_wait_for_their_grid_dependencies() {
        // k_wait: the wait inside an inline-asm scope; k_plain: none; k_late: after a
        // nested scope; the .func's wait belongs to no entry.
        let ptx = "\n.visible .func helper()\n{\n\tgriddepcontrol.wait;\n\tret;\n}\n\
                   .visible .entry k_wait(\n\t.param .u64 p\n)\n.maxntid 256, 1, 1\n{\n\t// begin inline asm\n\t{\n\tgriddepcontrol.wait;\n\t}\n\tgriddepcontrol.launch_dependents;\n\tret;\n}\n\
                   .visible .entry k_plain()\n{\n\t{ mov.u32 %r1, 0; }\n\tret;\n}\n\
                   .visible .entry k_late(.param .u32 q)\n{\n\t{ bra $L1; }\n$L1:\n\tgriddepcontrol.wait;\n\tret;\n}\n";
        assert_eq!(ptx_grid_waits(ptx), vec!["k_wait".to_owned(), "k_late".to_owned()]);
        assert!(ptx_grid_waits("no entries here").is_empty());
        assert!(ptx_grid_waits(".entry k_open( {").is_empty());
        // PDL only for kernels that wait, on sm_90 and later (the driver version is the
        // machine's: 0 without libcuda, so nothing is capable there)
        assert!(!pdl_capable(90, false));
        assert!(!pdl_capable(89, true));
    }

    #[test]
    fn ptx_entries_and_their_parameter_counts() {
        let ptx = "\n.version 8.0\n.target sm_90\n.visible .entry k_two(\n\t.param .u64 k_two_param_0,\n\t.param .align 8 .b8 k_two_param_1[16]\n)\n{\n\tret;\n}\n.visible .entry k_none()\n{\n\tret;\n}\n.entry k_one(.param .u32 p)\n{ ret; }\n";
        let m = ptx_param_counts(ptx);
        assert_eq!(m.get("k_two"), Some(&2));
        assert_eq!(m.get("k_none"), Some(&0));
        assert_eq!(m.get("k_one"), Some(&1));
        assert_eq!(m.len(), 3);
        assert!(ptx_param_counts("no entries here").is_empty());
    }
}
