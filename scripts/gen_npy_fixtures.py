#!/usr/bin/env python3
"""Write the small .npy fixtures used by tests/test_npy.c (run from the repository root:
python3 scripts/gen_npy_fixtures.py). Files go to tests/fixtures/npy/. The values are
simple enough that the C test states them literally."""
import os

import numpy as np
from numpy.lib import format as npf

OUT = os.path.join("tests", "fixtures", "npy")


def write(name, arr, version=None):
    with open(os.path.join(OUT, name), "wb") as f:
        npf.write_array(f, arr, version=version, allow_pickle=True)


def main():
    os.makedirs(OUT, exist_ok=True)
    # one file per header version, with the supported dtypes spread over them
    write("v1_f4.npy", (np.arange(6, dtype="<f4").reshape(2, 3) * 0.5 - 1), version=(1, 0))
    write("v2_f8.npy", np.array([1.5, -2.25, 1e300], dtype="<f8"), version=(2, 0))
    write("v3_i4.npy", np.array([[1, -2], [3, 2147483647]], dtype="<i4"), version=(3, 0))
    write("v1_i8.npy", np.array([-(2 ** 62), 5], dtype="<i8"))
    write("v1_f2.npy", np.array([1.0, -2.0, 0.5, 65504.0, 2.0 ** -24], dtype="<f2"))
    write("v1_b1.npy", np.array([[True, False, True]]))
    write("v1_0d.npy", np.array(3.25, dtype="<f4"))
    write("v1_empty.npy", np.zeros((2, 0, 3), dtype="<f4"))
    # a 4-D array: element [a, b, c, d] = 1000a + 100b + 10c + d
    a = np.fromfunction(lambda a, b, c, d: 1000 * a + 100 * b + 10 * c + d, (2, 3, 4, 5))
    write("v2_f4_4d.npy", a.astype("<f4"), version=(2, 0))
    # rejected: big-endian, Fortran order, complex, structured, object, unsigned byte
    write("bad_be_f4.npy", np.array([1.0, 2.0], dtype=">f4"))
    write("bad_fortran.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
    write("bad_c8.npy", np.array([1 + 2j], dtype="<c8"))
    write("bad_struct.npy", np.zeros(2, dtype=[("a", "<f4"), ("b", "<i4")]))
    write("bad_object.npy", np.array([None, 1], dtype=object))
    write("bad_u1.npy", np.array([1, 2], dtype="|u1"))


if __name__ == "__main__":
    main()
