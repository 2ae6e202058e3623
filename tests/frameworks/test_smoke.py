import numpy as np

import pysafetensors.numpy as pnp


def test_round_trip_numpy(tmp_file: str) -> None:
    x = {"a": np.arange(6, dtype=np.float32).reshape(2, 3)}
    pnp.save_file(x, tmp_file)
    assert np.array_equal(pnp.load_file(tmp_file)["a"], x["a"])
