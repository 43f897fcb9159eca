"""A compiled attention for the decode loop on x86 CPUs with AVX2 (``model.native_attention``, default on).

Why: a decode step with draft tokens gives each key/value head ``group x tokens`` queries
(SmolLM2: 3 x 5), so its attention is a small matrix product per row and head, thousands a step.
torch's CPU flash kernel runs each as BLAS calls on blocks of 512 columns and computes the scores
of every row out to the longest row's width (the padding masked afterwards): on an 8-row gsm8k
step it reaches ~40 GFLOP/s. ``native/decode_attention.c`` does the same softmax in one pass over
each row's own columns only (online softmax over blocks of 32 columns), both products tiled in
registers like a GEMM micro-kernel and the key/value blocks prefetched: 2.56x faster on that step
(43.1 against 110.4 ms for 30 layers; ``benchmarks/decode_attention.py``), ~75% of the machine's
fp32 matrix-product speed. A row's prompt prefill (one row, plainly causal) goes through it too, in
chunks of 64 queries: 9.2-9.5 against sdpa's 11.0-12.7 ms per layer for 850 tokens. A prefill is
compute-bound, so on a CPU with AVX-512 the same source builds with 16-float vectors and wider
score tiles (its 32 vector registers hold 8 x 2 accumulators): a 1,100-token prefill layer in
8.6-8.8 against 10.2-10.4 ms (the previous AVX2-only source), the same floats (each score and
output sums in the same order; ``avx512=False`` builds the AVX2 variant there, which the tests
compare it with). Decode steps stream their key/values from
memory and gain nothing either way.

The kernel is built on first use with the system C compiler (``cc -O3 -march=native -fopenmp``,
about a second) into ``~/.cache/evalflow/kernels/`` (``$XDG_CACHE_HOME``), named by a hash of
the source, the flags, the head size, the compiler's version and the CPU's flags, and loaded
with ctypes; its OpenMP runtime is the one torch already loaded (the same ``libgomp.so.1``), so
both share one thread pool. Without a compiler, on another CPU, or when a build fails, decoding
uses torch's kernel (logged once): the answers are the same up to float summation order.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from evalflow.cache.fingerprint import fingerprint
from evalflow.cache.store import user_cache_dir

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("native") / "decode_attention.c"
MAX_QUERIES = 64  # queries per chunk of a row and head (the kernel's MAX_Q; a prefill's run in many chunks)
FLAGS = ("-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-shared", "-fPIC", f"-DMAX_Q={MAX_QUERIES}")


@dataclass(frozen=True)
class Kernel:
    """The compiled attention of one build, called as a function; ``vector_width``: floats per
    vector (16: the AVX-512 build, 8: AVX2), which the tests compare the builds by."""

    fn: Any  # the library's evalflow_decode_attention (a ctypes function, argument types set)
    vector_width: int

    def __call__(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, visible: torch.Tensor, scale: float
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Softmax attention of ``query`` ``[rows, heads, n, dim]`` over ``key``/``value``
        ``[rows, heads, columns, dim]``, query ``i`` of row ``r`` seeing columns
        ``[0, visible[r, i])``: (weighted values ``[rows, heads, n, dim]``, log-sum-exp
        ``[rows, heads, n, 1]``); None for inputs the kernel does not take (not fp32 on the CPU)."""
        tensors = (query, key, value)
        if any(t.dtype != torch.float32 or t.device.type != "cpu" or t.stride(-1) != 1 for t in tensors):
            return None
        rows, heads, n, dim = query.shape
        visible = visible.to(torch.int64).contiguous()
        out = torch.empty((rows, heads, n, dim), dtype=torch.float32)
        lse = torch.empty((rows, heads, n, 1), dtype=torch.float32)
        q_strides, k_strides, v_strides = ((ctypes.c_int64 * 3)(*t.stride()[:3]) for t in tensors)
        self.fn(
            query.data_ptr(),
            q_strides,
            key.data_ptr(),
            k_strides,
            value.data_ptr(),
            v_strides,
            visible.data_ptr(),
            rows,
            heads,
            n,
            scale,
            out.data_ptr(),
            lse.data_ptr(),
            torch.get_num_threads(),
        )
        return out, lse


def cpu_supports() -> bool:
    """x86-64 with AVX2 and FMA (the kernel's instructions), read from ``/proc/cpuinfo``."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        flags = _cpu_flags()
    except OSError:
        return False
    return {"avx2", "fma"} <= flags


def _cpu_flags() -> set[str]:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def has_avx512() -> bool:
    """Whether the CPU has AVX-512F, where the kernel builds with 16-float vectors (unless told not to)."""
    try:
        return "avx512f" in _cpu_flags()
    except OSError:
        return False


@functools.cache
def kernel(head_dim: int, avx512: bool = True) -> Kernel | None:
    """The compiled kernel for this head size, built once per machine; None where it cannot run
    (the reason logged once), so the caller uses torch's kernel. ``avx512=False``: the AVX2 build
    even on a CPU with AVX-512 (to compare the two)."""
    reason = _unsupported(head_dim)
    if reason is None:
        try:
            return _bind(ctypes.CDLL(str(_build(head_dim, () if avx512 else ("-mno-avx512f",)))))
        except (OSError, subprocess.SubprocessError) as exc:
            reason = f"building it failed ({exc})"
    log.info("decode attention: torch's kernel (the native one does not apply: %s)", reason)
    return None


def _unsupported(head_dim: int) -> str | None:
    if head_dim % 8 or not 8 <= head_dim <= 256:
        return f"head size {head_dim} is not a multiple of 8 up to 256"
    if not cpu_supports():
        return "the CPU is not x86-64 with AVX2 and FMA"
    if _compiler() is None:
        return "no C compiler (cc, gcc or $CC) on PATH"
    return None


def _compiler() -> str | None:
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


def _build(head_dim: int, extra_flags: tuple[str, ...] = ()) -> Path:
    """The shared library's path, compiling it unless this exact build exists; written to a
    temporary name and renamed, so concurrent builds (Ray replicas) never load a partial file."""
    compiler = str(_compiler())
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60).stdout
    flags = (*FLAGS, *extra_flags)
    key = fingerprint([SOURCE.read_text(encoding="utf-8"), flags, head_dim, version, sorted(_cpu_flags())])
    target = user_cache_dir() / "kernels" / f"decode_attention_{head_dim}_{key[:16]}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=target.parent, suffix=".so.partial")
    os.close(fd)
    try:
        done = subprocess.run(
            [compiler, *flags, f"-DHEAD_DIM={head_dim}", "-o", partial, str(SOURCE)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode:
            raise subprocess.SubprocessError(f"{compiler} exited {done.returncode}: {done.stderr.strip()[-500:]}")
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target


def _bind(lib: ctypes.CDLL) -> Kernel:
    fn = lib.evalflow_decode_attention
    ptr, i64 = ctypes.c_void_p, ctypes.c_int64
    fn.argtypes = [ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, i64, ctypes.c_float, ptr, ptr, ctypes.c_int]
    fn.restype = None
    width = lib.evalflow_vector_width
    width.argtypes, width.restype = [], ctypes.c_int
    return Kernel(fn, int(width()))
