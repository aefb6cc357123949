"""Errors, NumPy <-> attn_tensor conversion and threads (internal helpers of the package)."""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple, Type

import numpy as np

from ._ffi import ffi, lib

# ---------------------------------------------------------------- errors


class AttnError(Exception):
    """Base class of the errors raised when libattn rejects a call.

    Attributes:
        status: the library's negative attn_status code (e.g. -2 for a shape error).
        message: the library's message (attn_last_error()).
    Every subclass also derives from the matching built-in exception (ValueError,
    TypeError, OSError, MemoryError, NotImplementedError), so ``except ValueError`` works.
    """

    def __init__(self, message: str, status: int = 0):
        super().__init__(message)
        self.status = status
        self.message = message


class InvalidArgumentError(AttnError, ValueError):
    """ATTN_E_INVALID: an invalid argument or option value."""


class ShapeError(AttnError, ValueError):
    """ATTN_E_SHAPE: tensor shapes do not fit together."""


class DTypeError(AttnError, TypeError):
    """ATTN_E_DTYPE: an unsupported or mismatched dtype."""


class AttnMemoryError(AttnError, MemoryError):
    """ATTN_E_NOMEM: an allocation failed."""


class AttnIOError(AttnError, OSError):
    """ATTN_E_IO: a file could not be opened, read or written."""


class FormatError(AttnError, ValueError):
    """ATTN_E_FORMAT: malformed file contents or text (JSON, safetensors, invalid UTF-8)."""


class RangeError(AttnError, ValueError):
    """ATTN_E_RANGE: a value out of range (NaN/inf input, token id, position)."""


class UnsupportedError(AttnError, NotImplementedError):
    """ATTN_E_UNSUPPORTED: a valid request this build, model or CPU cannot serve."""


_BY_STATUS: Dict[int, Type[AttnError]] = {
    -1: InvalidArgumentError, -2: ShapeError, -3: DTypeError, -4: AttnMemoryError,
    -5: AttnIOError, -6: FormatError, -7: RangeError, -8: UnsupportedError,
}


def raise_for(rc: int) -> None:
    """Raise the exception for a negative status `rc` with this thread's attn_last_error()."""
    if rc >= 0:
        return
    msg = ffi.string(lib.attn_last_error()).decode("utf-8", "replace")
    if not msg:
        msg = ffi.string(lib.attn_status_str(rc)).decode("ascii", "replace")
    raise _BY_STATUS.get(rc, AttnError)(msg, rc)


# ---------------------------------------------------------------- arrays

F32, F16, BF16, BOOL, I32, I64 = 0, 1, 2, 3, 4, 5
_CODES = {np.dtype(np.float32): F32, np.dtype(np.float16): F16, np.dtype(np.bool_): BOOL,
          np.dtype(np.int32): I32, np.dtype(np.int64): I64}


def dtype_code(dt: np.dtype) -> Optional[int]:
    """libattn's attn_dtype for a NumPy dtype (bfloat16 is ml_dtypes' dtype), else None."""
    code = _CODES.get(dt)
    if code is None and dt.name == "bfloat16" and dt.itemsize == 2:
        code = BF16
    return code


def as_array(x: Any, name: str, fn: str) -> np.ndarray:
    """x as an ndarray (without copying an ndarray; torch tensors and other array-likes go
    through np.asarray)."""
    if isinstance(x, np.ndarray):
        return x
    if x is None:
        raise TypeError(f"{fn}: {name} must be an array, got None")
    try:
        return np.asarray(x)
    except Exception as e:  # pragma: no cover - depends on the object
        raise TypeError(f"{fn}: {name} cannot be converted to a NumPy array: {e}") from e


def as_f32(x: Any, name: str, fn: str) -> np.ndarray:
    """x as a float32 ndarray; any other dtype is a TypeError (no silent down-casts)."""
    a = as_array(x, name, fn)
    if a.dtype.kind == "f" and a.dtype.itemsize == 4 and not a.dtype.isnative:
        a = a.astype(np.float32)  # byte-swapped float32 (e.g. ">f4" from a file): same values
    if a.dtype != np.float32:
        raise TypeError(f"{fn}: {name} must be float32, got {a.dtype}"
                        f" (convert it with {name}.astype(np.float32))")
    return a


def as_float(x: Any, name: str, fn: str) -> np.ndarray:
    """x as a float32, float16 or bfloat16 (ml_dtypes) ndarray; other dtypes are a TypeError."""
    a = as_array(x, name, fn)
    if a.dtype.kind == "f" and a.dtype.itemsize in (2, 4) and not a.dtype.isnative:
        a = a.astype(a.dtype.newbyteorder("="))
    if a.dtype not in (np.float32, np.float16) and a.dtype.name != "bfloat16":
        raise TypeError(f"{fn}: {name} must be float32 (or float16 / bfloat16), got {a.dtype}"
                        f" (convert it with {name}.astype(np.float32))")
    return a


def usable(a: np.ndarray) -> np.ndarray:
    """a itself when libattn can read it through its strides (aligned, native byte order,
    non-negative strides that are whole elements), else a C-contiguous copy."""
    isz = a.itemsize
    if (a.flags.aligned and a.dtype.isnative
            and all(s >= 0 and s % isz == 0 for s in a.strides)):
        return a
    return np.ascontiguousarray(a)


_T_TENSOR = ffi.typeof("attn_tensor *")
_T_VOIDP = ffi.typeof("void *")


class Tensor:
    """An attn_tensor view of a NumPy array. Keeps the array alive as long as the view."""

    __slots__ = ("array", "ptr")

    def __init__(self, a: np.ndarray):
        code = dtype_code(a.dtype)
        if code is None:
            raise TypeError(f"attn: dtype {a.dtype} is not supported here")
        if a.ndim > 8:
            raise ValueError(f"attn: at most 8 dimensions, got {a.ndim}")
        fl = a.flags
        if fl.c_contiguous and fl.aligned:  # the common case: no dict from __array_interface__
            data = ffi.from_buffer(a)  # char[] pointing at a's first byte (converts to void *)
        else:
            a = usable(a)
            data = ffi.cast(_T_VOIDP, a.__array_interface__["data"][0])
        isz = a.itemsize
        self.ptr = ffi.new(_T_TENSOR, [data, code, a.ndim, a.shape, [s // isz for s in a.strides]])
        self.array = a


def tensor(a: Optional[np.ndarray]) -> Tuple[Any, Optional[Tensor]]:
    """(attn_tensor * or NULL, keep-alive object) for an optional array."""
    if a is None:
        return ffi.NULL, None
    t = Tensor(a)
    return t.ptr, t


# ---------------------------------------------------------------- threads and version


def set_num_threads(n: int) -> int:
    """Set the number of OpenMP threads attn's kernels use (n <= 0: one per core).

    Returns the count now in effect. attn keeps OpenBLAS single-threaded and splits its
    GEMMs across these threads, so one thread pool is busy at a time. Raises RangeError for
    n > 4096 (ATTN_MAX_THREADS; the count in effect is unchanged).
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"set_num_threads: n must be an int, got {type(n).__name__}")
    rc = int(lib.attn_set_num_threads(int(max(min(n, 1 << 30), -1))))
    raise_for(rc)
    return rc


def get_num_threads() -> int:
    """The number of threads attn's kernels use (one per core until set)."""
    return int(lib.attn_get_num_threads())


def version() -> str:
    """libattn's version string, "MAJOR.MINOR.PATCH"."""
    return ffi.string(lib.attn_version()).decode("ascii")


def check_int(value: Any, name: str, fn: str, minimum: Optional[int] = None) -> int:
    """value as a Python int (bool refused), optionally >= minimum; else TypeError/ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{fn}: {name} must be an int, got {type(value).__name__}")
    v = int(value)
    if minimum is not None and v < minimum:
        raise ValueError(f"{fn}: {name} must be >= {minimum}, got {v}")
    if v >= 1 << 62:
        raise ValueError(f"{fn}: {name} is too large ({v})")
    return v


def check_bool(value: Any, name: str, fn: str) -> bool:
    """value as a Python bool (bool or numpy.bool_ only: 2, 'no' and None are not flags, as
    they would all be truthy or falsy by accident); else TypeError."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{fn}: {name} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def check_float(value: Any, name: str, fn: str) -> float:
    """value as a finite Python float; else TypeError/ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{fn}: {name} must be a number, got {type(value).__name__}")
    v = float(value)
    if not np.isfinite(v):
        raise ValueError(f"{fn}: {name} must be finite, got {v}")
    return v


def load_model(model_dir: Any, owner: str, ctype: str, load: Any, free: Any) -> Any:
    """Open a model directory with a libattn loader ``load(ctype **out, const char *path)``
    and return the handle, released by ``free`` when it is garbage-collected.

    Raises ValueError "OWNER: model_dir contains a NUL character", else what raise_for
    maps the loader's status to (OSError for a missing file, ValueError, MemoryError ...).
    """
    path = os.fsencode(os.fspath(model_dir))
    if b"\x00" in path:
        raise ValueError(f"{owner}: model_dir contains a NUL character")
    pp = ffi.new(ctype + " **")
    raise_for(load(pp, path))
    return ffi.gc(pp[0], free)
