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
}

/// A kernel a handle stands for.
struct Kernel {
    func: usize, // sys::CUfunction
    name: String,
    /// The ordinal of the device whose context holds the module.
    device: u32,
    /// Byte size of each parameter, when the driver can tell (see [`param_sizes`]).
    params: Option<Vec<u64>>,
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
    if let Some((module, entries)) = fresh {
        if mods.contains_key(source) {
            // SAFETY: our own module, never handed out.
            let _ = unsafe { result::module::unload(module as sys::CUmodule) };
        } else {
            mods.insert(source.to_owned(), Module { module, funcs: FxHashMap::default(), entries });
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
    reg.kernels.push(Kernel { func: func as usize, name: name.to_owned(), device: ord, params });
    let h = reg.kernels.len() as u64;
    m.funcs.insert(name.to_owned(), h);
    Ok(h)
}

/// Compiles `source` for a GPU of compute capability `cc` and loads it into the
/// current context; returns the `CUmodule` and the parameter count of each kernel
/// (from the PTX, [`ptx_param_counts`]).
fn compile_and_load(source: &str, cc: i32) -> Result<(usize, FxHashMap<String, usize>)> {
    let nv = nvrtc()?;
    let target = nv.target_for(cc)?;
    let out = nv.compile_cached(source, &target.arch())?;
    let entries = ptx_param_counts(&out.ptx);
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
    Ok((module as usize, entries))
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
    let reg = REGISTRY.read();
    match reg.as_ref().and_then(|r| r.kernels.get((h as usize).wrapping_sub(1))) {
        Some(k) if k.device == device => Ok(k.func as sys::CUfunction),
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
/// else a handle of `Device::stream_create`) (`cuLaunchKernel`); returns without waiting. `args` is `cuLaunchKernel`'s `kernelParams`: one pointer per
/// kernel parameter to its value (null only for a kernel without parameters). Errors:
/// [`Error::InvalidValue`] for an unknown handle, a handle loaded on another device, a
/// zero dimension, or a geometry the driver refuses (too many threads per block or too much shared memory),
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
    let func = function(h, dev.ordinal())?;
    let Launch { grid, block, shared_bytes } = geometry;
    if [grid.0, grid.1, grid.2, block.0, block.1, block.2].contains(&0) {
        return Err(Error::InvalidValue(format!(
            "kernel launch with a zero dimension: grid {grid:?}, block {block:?}"
        )));
    }
    gpu::activate(dev, "launching a kernel")?;
    let raw = dev.stream_raw(stream)? as sys::CUstream;
    // SAFETY: `func` is a loaded function; the caller vouches for `args`. Stream NULL is
    // the legacy default stream (cudarc loads cuLaunchKernel, not the _ptsz variant).
    let r = unsafe {
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
    .result();
    r.map_err(|e| {
        let name = kernel(h).map(|k| k.1).unwrap_or_default();
        let msg = format!("cuLaunchKernel of `{name}` (grid {grid:?}, block {block:?}, {shared_bytes} bytes shared) failed: {e}");
        match e.0 {
            sys::CUresult::CUDA_ERROR_INVALID_VALUE | sys::CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES => {
                Error::InvalidValue(msg)
            }
            _ => Error::Device(msg),
        }
    })
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
    use super::ptx_param_counts;

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
