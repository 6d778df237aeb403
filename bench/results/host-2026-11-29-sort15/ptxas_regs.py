# usage: CUMEM_NVRTC_LIBRARY=.../libnvrtc.so.13 python3 ptxas_regs.py DIR
# Compiles each DIR/*.cu (sources.jl's) with NVRTC for sm_90 with ptxas -v and prints, for the
# onesweep kernel, its registers and spill bytes (stores, loads) and stack frame, one line each.
import ctypes, glob, os, re, sys
lib = ctypes.CDLL(os.environ['CUMEM_NVRTC_LIBRARY'])
def compile_log(src):
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), src, b'k.cu', 0, None, None) == 0
    opts = [b'-arch=sm_90', b'-std=c++17', b'--fmad=false', b'--ptxas-options=-v']
    rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    n = ctypes.c_size_t(); lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    buf = ctypes.create_string_buffer(n.value); lib.nvrtcGetProgramLog(prog, buf)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return rc, buf.value.decode(errors='replace')
print('case regs spill_stores spill_loads stack')
for f in sorted(glob.glob(os.path.join(sys.argv[1], '*.cu'))):
    rc, log = compile_log(open(f, 'rb').read())
    name = os.path.basename(f)[:-3]
    if rc != 0:
        print(name, 'compile error'); continue
    lines = log.splitlines()
    for k, l in enumerate(lines):
        if 'Compiling entry function' in l and 'cumem_sort_onesweep' in l:
            blk = ' '.join(lines[k:k + 4])
            m = re.search(r'(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads', blk)
            print(name, re.search(r'Used (\d+) registers', blk).group(1), m.group(2), m.group(3), m.group(1), flush=True)
