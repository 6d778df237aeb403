/* strided.cuh: the strided-copy kernels (julia/compute/broadcast/strided.jl, as
 * CuMem.STRIDED_COPY_SOURCE, which defines MAX_RANK, the most dimensions of a plan, before
 * this text). cumem_copy_w<bytes>_i<32|64> move words of 1, 2, 4, 8 or 16 bytes,
 * cumem_copy_conj<8|16>_i<32|64> conjugate complex Float32/Float64 elements; i32/i64 is
 * the width of the index arithmetic. Each thread handles elements i, i + (grid size), ...
 * of the column-major box p.dims (a grid-stride loop); offsets (in elements) come from
 * per-dimension strides or, where an index vector's device address is given, from that
 * vector (Int64, 1-based). Plan's layout is KernelPlan's in strided.jl. */
#include "common.cuh"

#ifndef MAX_RANK
#define MAX_RANK 10
#endif
struct Plan {
    long long n, rank;
    long long dims[MAX_RANK], dst_strides[MAX_RANK], src_strides[MAX_RANK];
    unsigned long long dst_idx[MAX_RANK], src_idx[MAX_RANK];
};
struct __align__(16) w16_t { unsigned long long a, b; };

struct Plain { template <typename W> __device__ static W op(W v) { return v; } };
struct Conj { template <typename W> __device__ static W op(W v) { v.y = -v.y; return v; } };

template <typename W, typename I, typename Op>
__device__ __forceinline__ void strided_copy(W *dst, const W *src, const Plan &p) {
    const I n = (I)p.n;
    const int rank = (int)p.rank;
    for (I i = cumem_thread_index<I>(); i < n; i += cumem_grid_threads<I>()) {
        I r = i, doff = 0, soff = 0;
        for (int d = 0; d < rank; d++) {
            const I len = (I)p.dims[d];
            const I q = r / len;
            const I c = r - q * len;
            r = q;
            const I cd = p.dst_idx[d] ? (I)(((const long long *)p.dst_idx[d])[c] - 1) : c;
            const I cs = p.src_idx[d] ? (I)(((const long long *)p.src_idx[d])[c] - 1) : c;
            doff += cd * (I)p.dst_strides[d];
            soff += cs * (I)p.src_strides[d];
        }
        dst[doff] = Op::op(src[soff]);
    }
}

#define COPY_KERNEL(NAME, W, I, OP) \
    extern "C" __global__ void NAME(W *dst, const W *src, Plan p) { CUMEM_PDL_ENTRY(); strided_copy<W, I, OP>(dst, src, p); }
COPY_KERNEL(cumem_copy_w1_i32, unsigned char, int, Plain)
COPY_KERNEL(cumem_copy_w1_i64, unsigned char, long long, Plain)
COPY_KERNEL(cumem_copy_w2_i32, unsigned short, int, Plain)
COPY_KERNEL(cumem_copy_w2_i64, unsigned short, long long, Plain)
COPY_KERNEL(cumem_copy_w4_i32, unsigned int, int, Plain)
COPY_KERNEL(cumem_copy_w4_i64, unsigned int, long long, Plain)
COPY_KERNEL(cumem_copy_w8_i32, unsigned long long, int, Plain)
COPY_KERNEL(cumem_copy_w8_i64, unsigned long long, long long, Plain)
COPY_KERNEL(cumem_copy_w16_i32, w16_t, int, Plain)
COPY_KERNEL(cumem_copy_w16_i64, w16_t, long long, Plain)
COPY_KERNEL(cumem_copy_conj8_i32, float2, int, Conj)
COPY_KERNEL(cumem_copy_conj8_i64, float2, long long, Conj)
COPY_KERNEL(cumem_copy_conj16_i32, double2, int, Conj)
COPY_KERNEL(cumem_copy_conj16_i64, double2, long long, Conj)
