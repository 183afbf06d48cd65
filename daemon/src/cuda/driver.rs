//! The few CUDA driver calls gevod makes, through cudarc's dynamically
//! loaded bindings, each checked and turned into a [`CudaError`] naming the
//! call. Everything `unsafe` about the driver lives here.

use super::toolkit::Cubin;
use super::CudaError;
use cudarc::driver::{result, sys};
use gevo_model::device::{DeviceInfo, DeviceSelector};
use std::ffi::{c_void, CString};
use std::time::{Duration, Instant};

fn check<T>(call: &'static str, r: Result<T, result::DriverError>) -> Result<T, CudaError> {
    r.map_err(|e| CudaError::Driver {
        call,
        name: error_name(e),
    })
}

fn error_name(e: result::DriverError) -> String {
    e.error_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("CUDA error {}", e.0 as u32))
}

/// Loads libcuda and initializes it: [`CudaError::NoDriver`] where there is
/// no driver to load.
pub fn init() -> Result<(), CudaError> {
    // SAFETY: only tries to dlopen the library.
    if !unsafe { sys::is_culib_present() } {
        return Err(CudaError::NoDriver);
    }
    match result::init() {
        // The driver library without a GPU (a build machine with the CUDA
        // packages installed): no device, as when the library is missing.
        Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => Err(CudaError::NoDevice {
            wanted: "any".into(),
            count: 0,
        }),
        r => check("cuInit", r),
    }
}

/// Finds the selected device and reads what results are recorded with.
pub fn probe(selector: &DeviceSelector) -> Result<DeviceInfo, CudaError> {
    init().map_err(|e| match e {
        CudaError::NoDevice { count, .. } => CudaError::NoDevice {
            wanted: selector.to_string(),
            count,
        },
        e => e,
    })?;
    let count = check("cuDeviceGetCount", result::device::get_count())?.max(0) as usize;
    let mut devices = Vec::with_capacity(count);
    for ordinal in 0..count {
        devices.push(describe(ordinal)?);
    }
    let found = devices.iter().find(|d| match selector {
        DeviceSelector::Ordinal(o) => d.ordinal == *o,
        DeviceSelector::Uuid(u) => d.uuid.eq_ignore_ascii_case(u),
    });
    found.cloned().ok_or_else(|| CudaError::NoDevice {
        wanted: selector.to_string(),
        count,
    })
}

fn describe(ordinal: usize) -> Result<DeviceInfo, CudaError> {
    let dev = check("cuDeviceGet", result::device::get(ordinal as i32))?;
    let attribute = |a| {
        // SAFETY: `dev` is a valid device handle.
        check("cuDeviceGetAttribute", unsafe {
            result::device::get_attribute(dev, a)
        })
    };
    use sys::CUdevice_attribute::*;
    let major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let l2 = attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?;
    let uuid = check("cuDeviceGetUuid", result::device::get_uuid(dev))?;
    let mut version = 0;
    // SAFETY: writes one int.
    check("cuDriverGetVersion", unsafe {
        sys::cuDriverGetVersion(&mut version).result()
    })?;
    Ok(DeviceInfo {
        ordinal,
        uuid: format_uuid(&uuid.bytes.map(|b| b as u8)),
        name: check("cuDeviceGetName", result::device::get_name(dev))?,
        compute_capability: (major as u32, minor as u32),
        driver_version: format!("{}.{}", version / 1000, version % 1000 / 10),
        l2_bytes: l2.max(0) as u64,
    })
}

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as nvidia-smi prints it.
pub fn format_uuid(b: &[u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The device's primary context, current on this thread while held.
pub struct Context {
    device: sys::CUdevice,
}

impl Context {
    pub fn new(ordinal: usize) -> Result<Self, CudaError> {
        init()?;
        let device = check("cuDeviceGet", result::device::get(ordinal as i32))?;
        // SAFETY: a valid device; the context is released on drop.
        unsafe {
            let ctx = check(
                "cuDevicePrimaryCtxRetain",
                result::primary_ctx::retain(device),
            )?;
            check("cuCtxSetCurrent", result::ctx::set_current(ctx))?;
        }
        Ok(Context { device })
    }
}

impl Context {
    /// The device memory free now, and the device's total (bytes).
    pub fn memory(&self) -> Result<(usize, usize), CudaError> {
        check("cuMemGetInfo", result::mem_get_info())
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: retained in `new`.
        let _ = unsafe { result::primary_ctx::release(self.device) };
    }
}

/// Device memory, freed on drop.
pub struct DeviceBuffer {
    pub ptr: sys::CUdeviceptr,
    pub len: usize,
}

impl DeviceBuffer {
    pub fn new(len: usize) -> Result<Self, CudaError> {
        // SAFETY: a plain allocation (at least one byte, so the pointer is real).
        let ptr = check("cuMemAlloc", unsafe { result::malloc_sync(len.max(1)) })?;
        Ok(DeviceBuffer { ptr, len })
    }

    pub fn upload(&self, data: &[u8]) -> Result<(), CudaError> {
        assert!(data.len() <= self.len);
        // SAFETY: the buffer holds at least `data.len()` bytes.
        check("cuMemcpyHtoD", unsafe {
            result::memcpy_htod_sync(self.ptr, data)
        })
    }

    pub fn download(&self, into: &mut [u8]) -> Result<(), CudaError> {
        assert!(into.len() <= self.len);
        // SAFETY: the buffer holds at least `into.len()` bytes.
        check("cuMemcpyDtoH", unsafe {
            result::memcpy_dtoh_sync(into, self.ptr)
        })
    }

    /// Copies all of `from` into this buffer (on the default stream).
    pub fn copy_from(&self, from: &DeviceBuffer) -> Result<(), CudaError> {
        let n = self.len.min(from.len);
        // SAFETY: both buffers hold `n` bytes.
        check("cuMemcpyDtoDAsync", unsafe {
            result::memcpy_dtod_async(self.ptr, from.ptr, n, result::stream::null())
        })
    }

    /// Sets every byte (on the default stream).
    pub fn fill(&self, byte: u8) -> Result<(), CudaError> {
        // SAFETY: the buffer holds `len` bytes.
        check("cuMemsetD8Async", unsafe {
            result::memset_d8_async(self.ptr, byte, self.len, result::stream::null())
        })
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new`, freed once.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// A module's global variable on the device, alive while its [`Kernel`] is:
/// read and written in 64-bit words.
pub struct Symbol {
    pub ptr: sys::CUdeviceptr,
    pub len: usize,
}

impl Symbol {
    /// Writes `words` at its start (synchronously: ordered before later
    /// launches on the default stream).
    pub fn write(&self, words: &[u64]) -> Result<(), CudaError> {
        assert!(std::mem::size_of_val(words) <= self.len);
        // SAFETY: the symbol holds at least as many bytes (asserted).
        check("cuMemcpyHtoD", unsafe {
            result::memcpy_htod_sync(self.ptr, words)
        })
    }

    /// Reads its first `into.len()` words (after what the default stream
    /// queued before).
    pub fn read(&self, into: &mut [u64]) -> Result<(), CudaError> {
        assert!(std::mem::size_of_val(into) <= self.len);
        // SAFETY: the symbol holds at least as many bytes (asserted).
        check("cuMemcpyDtoH", unsafe {
            result::memcpy_dtoh_sync(into, self.ptr)
        })
    }
}

/// A loaded PTX module and its kernels (a pipeline's, in the spec's order).
pub struct Kernel {
    module: sys::CUmodule,
    functions: Vec<sys::CUfunction>,
}

/// Bytes kept of the JIT compiler's error log.
const JIT_LOG_BYTES: usize = 8192;

impl Kernel {
    /// JIT-compiles `ptx` for the current context; a rejected module gives
    /// [`CudaError::InvalidPtx`] with the JIT's log.
    pub fn load(ptx: &str, names: &[String]) -> Result<Self, CudaError> {
        let image = CString::new(ptx).map_err(|_| CudaError::InvalidPtx {
            log: "the PTX contains a NUL byte".into(),
        })?;
        // SAFETY: a NUL-terminated PTX image, alive for the call.
        unsafe { Kernel::load_image(image.as_ptr() as *const c_void, names) }
    }

    /// Loads machine code that ptxas made for this context's GPU (no JIT).
    pub fn load_cubin(cubin: &Cubin, names: &[String]) -> Result<Self, CudaError> {
        if !cubin.0.starts_with(b"\x7fELF") {
            return Err(CudaError::InvalidPtx {
                log: "the cubin is not an ELF image".into(),
            });
        }
        // SAFETY: an ELF image (its headers give its size), alive for the call.
        unsafe { Kernel::load_image(cubin.0.as_ptr() as *const c_void, names) }
    }

    /// # Safety
    /// `image` points to a NUL-terminated PTX text or a complete cubin.
    unsafe fn load_image(image: *const c_void, names: &[String]) -> Result<Self, CudaError> {
        let mut log = vec![0u8; JIT_LOG_BYTES];
        let mut options = [
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        // The driver reads the size option's value from the pointer's bits.
        let mut values = [
            log.as_mut_ptr() as *mut c_void,
            JIT_LOG_BYTES as *mut c_void,
        ];
        let mut module = std::ptr::null_mut();
        // SAFETY: the image is the caller's; two options with matching
        // values; the log buffer outlives the call.
        let loaded = unsafe {
            sys::cuModuleLoadDataEx(
                &mut module,
                image,
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
            .result()
        };
        if let Err(e) = loaded {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..end]).trim().to_string();
            return Err(CudaError::InvalidPtx {
                log: if text.is_empty() { error_name(e) } else { text },
            });
        }
        let mut functions = Vec::with_capacity(names.len());
        for name in names {
            let cname = CString::new(name.as_str()).expect("kernel names have no NUL");
            // SAFETY: a module just loaded.
            match unsafe { result::module::get_function(module, cname) } {
                Ok(function) => functions.push(function),
                Err(e) => {
                    // SAFETY: unloaded once, here.
                    let _ = unsafe { result::module::unload(module) };
                    return Err(CudaError::InvalidPtx {
                        log: format!("no kernel {name} in the module ({})", error_name(e)),
                    });
                }
            }
        }
        Ok(Kernel { module, functions })
    }

    /// The module's global variable `name` (none when the module has no
    /// such symbol).
    pub fn global(&self, name: &str) -> Option<Symbol> {
        let cname = CString::new(name).ok()?;
        // SAFETY: the module is loaded (until `Drop`).
        let (ptr, len) = unsafe { result::module::get_global(self.module, cname) }.ok()?;
        Some(Symbol { ptr, len })
    }

    /// Queues one launch of kernel `k` on the default stream. `args` holds
    /// each parameter's value in the low bytes of a u64 (pointers, scalars).
    pub fn launch(
        &self,
        k: usize,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        args: &mut [u64],
    ) -> Result<(), CudaError> {
        let mut params: Vec<*mut c_void> = args
            .iter_mut()
            .map(|a| a as *mut u64 as *mut c_void)
            .collect();
        // SAFETY: one pointer per kernel parameter, each to at least as many
        // bytes as the parameter (little-endian low bytes), alive for the call
        // (the driver copies parameters when the launch is queued).
        check("cuLaunchKernel", unsafe {
            result::launch_kernel(
                self.functions[k],
                (grid[0], grid[1], grid[2]),
                (block[0], block[1], block[2]),
                shared_bytes,
                result::stream::null(),
                &mut params,
            )
        })
    }
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // SAFETY: loaded in `load`, unloaded once.
        let _ = unsafe { result::module::unload(self.module) };
    }
}

/// A timing event.
pub struct Event(sys::CUevent);

impl Event {
    pub fn new() -> Result<Self, CudaError> {
        check(
            "cuEventCreate",
            result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT),
        )
        .map(Event)
    }

    /// Records the event on the default stream.
    pub fn record(&self) -> Result<(), CudaError> {
        // SAFETY: a live event.
        check("cuEventRecord", unsafe {
            result::event::record(self.0, result::stream::null())
        })
    }

    /// Waits until the work before the event is done, or `limit` passes:
    /// a kernel cannot be stopped, so a timeout leaves it running and the
    /// caller must give up the context (exit the process).
    pub fn wait(&self, limit: Duration) -> Result<(), CudaError> {
        let start = Instant::now();
        loop {
            // SAFETY: a live event.
            match unsafe { result::event::query(self.0) } {
                Ok(()) => return Ok(()),
                Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_READY => {}
                Err(e) => return check("cuEventQuery", Err(e)),
            }
            if start.elapsed() > limit {
                return Err(CudaError::Timeout { limit });
            }
            std::thread::sleep(Duration::from_micros(20));
        }
    }

    /// Nanoseconds from `self` to `end`, both completed.
    pub fn nanos_until(&self, end: &Event) -> Result<f64, CudaError> {
        // SAFETY: two live, completed events.
        check("cuEventElapsedTime", unsafe {
            result::event::elapsed(self.0, end.0)
        })
        .map(|ms| f64::from(ms) * 1e6)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once.
        let _ = unsafe { result::event::destroy(self.0) };
    }
}

/// Every GPU the driver shows, in ordinal order.
pub fn probe_all() -> Result<Vec<DeviceInfo>, CudaError> {
    let mut found = Vec::new();
    for ordinal in 0.. {
        match probe(&DeviceSelector::Ordinal(ordinal)) {
            Ok(d) => found.push(d),
            Err(CudaError::NoDevice { .. }) => break,
            Err(e) if found.is_empty() => return Err(e),
            Err(_) => break,
        }
    }
    Ok(found)
}
