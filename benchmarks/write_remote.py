"""Saving to S3: streamed ``save_file("s3://...")`` against saving locally and copying with
fsspec (``fs.put``), on moto's S3 server on loopback.

    python benchmarks/write_remote.py              # 512 MiB (8 x 64 MiB tensors), 3 samples
    python benchmarks/write_remote.py --quick      # 64 MiB, 1 sample (seconds)

moto runs as its own process, so its CPU and memory are not the writer's.  Every sample is a
fresh worker process; the ways alternate sample by sample.  For each way it reports the median
wall time, the throughput (file bytes / wall time), and the peak RSS growth of the worker
during the save: ``VmHWM`` after the save minus ``VmRSS`` just before it (the peak is reset
through ``/proc/self/clear_refs`` once the tensors exist).  Ways:

* ``stream``: ``save_file(tensors, "s3://...")``, tensors in memory (growth = what the save adds);
* ``stream-lazy``: the same through ``write_file`` with each tensor made only when it is written
  (growth = the tensor being written plus the upload's buffers; the issue's bound is the largest
  tensor + 64 MiB);
* ``local+put``: ``save_file`` to a local temp file, then ``fs.put`` it to S3 (s3fs's own
  concurrent multipart upload), the temp file removed after;
* ``local``: ``save_file`` to a local file only (the floor: no upload).

Loopback moto is much slower per byte than real S3 and spends CPU on the same machine, so the
throughputs compare the ways with each other, not with a real network.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(os.path.dirname(HERE), "src")
MiB = 1 << 20
WAYS = ("stream", "stream-lazy", "local+put", "local")


def _status(key: str) -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
        fh.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)


def worker(way: str, endpoint: str, bucket: str, tensors: int, tensor_mib: int) -> dict[str, Any]:
    import numpy as np
    import s3fs

    from pysafetensors.format.dtypes import by_code
    from pysafetensors.numpy import save_file
    from pysafetensors.writer import WriteItem, write_file

    opts = {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint}}
    fs = s3fs.S3FileSystem(**opts)
    fs.ls(bucket)  # session and connection made before measuring
    n = tensor_mib * MiB // 4
    url = f"s3://{bucket}/{way}.safetensors"
    arrays: dict[str, Any] = {}
    if way != "stream-lazy":
        for i in range(tensors):
            a = np.empty(n, np.float32)
            a.fill(float(i))  # in place: no temporary as large as the tensor
            arrays[f"t{i}"] = a
    tmpdir = tempfile.mkdtemp(prefix="pst-bench-")
    local = os.path.join(tmpdir, "m.safetensors")
    _reset_peak()
    before = _status("VmRSS")
    t0 = time.perf_counter()
    if way == "stream":
        save_file(arrays, url, storage_options=opts)
    elif way == "stream-lazy":
        def make(i: int) -> Any:
            return lambda: np.full(n, float(i), np.float32)

        write_file([WriteItem(f"t{i}", by_code("F32"), (n,), make(i)) for i in range(tensors)], url,
                   storage_options=opts)
    elif way == "local+put":
        save_file(arrays, local)
        fs.put(local, url)
        os.unlink(local)
    else:
        save_file(arrays, local)
    seconds = time.perf_counter() - t0
    peak = _status("VmHWM")
    shutil.rmtree(tmpdir, ignore_errors=True)
    size = tensors * tensor_mib * MiB
    if way != "local":
        fs.invalidate_cache(f"{bucket}/{way}.safetensors")
        stored = int(fs.info(f"{bucket}/{way}.safetensors")["size"])
        assert stored > size, (stored, size)
        fs.rm(f"{bucket}/{way}.safetensors")
    return {"seconds": seconds, "growth": peak - before, "size": size}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(endpoint: str, deadline: float) -> None:
    import urllib.request

    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="64 MiB, one sample")
    p.add_argument("-n", "--samples", type=int, default=None)
    p.add_argument("--tensors", type=int, default=None)
    p.add_argument("--tensor-mib", type=int, default=64)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--endpoint", help=argparse.SUPPRESS)
    p.add_argument("--bucket", help=argparse.SUPPRESS)
    args = p.parse_args()
    tensors = args.tensors or (1 if args.quick else 8)
    if args.worker:
        print(json.dumps(worker(args.worker, args.endpoint, args.bucket, tensors, args.tensor_mib)))
        return
    samples = args.samples or (1 if args.quick else 3)
    port = _free_port()
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "PYTHONPATH": SRC}
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    endpoint = f"http://127.0.0.1:{port}"
    results: dict[str, list[dict[str, Any]]] = {w: [] for w in WAYS}
    try:
        _wait(endpoint, time.monotonic() + 60)
        import boto3

        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                     aws_secret_access_key="testing").create_bucket(Bucket="pst-bench")
        for _ in range(samples):
            for way in WAYS:
                out = subprocess.run(
                    [sys.executable, __file__, "--worker", way, "--endpoint", endpoint, "--bucket", "pst-bench",
                     "--tensors", str(tensors), "--tensor-mib", str(args.tensor_mib)],
                    capture_output=True, text=True, env=env, check=True, timeout=1800,
                )
                results[way].append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        server.terminate()
        server.wait(timeout=30)
    size = tensors * args.tensor_mib * MiB
    print(f"file: {size // MiB} MiB ({tensors} x {args.tensor_mib} MiB float32 tensors), {samples} sample(s), "
          f"moto S3 on loopback (own process); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'way':<12} {'median s':>9} {'MiB/s':>7} {'peak RSS growth MiB (max)':>26}")
    for way in WAYS:
        secs = statistics.median(r["seconds"] for r in results[way])
        growth = max(r["growth"] for r in results[way]) / MiB
        print(f"{way:<12} {secs:>9.2f} {size / MiB / secs:>7.1f} {growth:>26.1f}")
    lazy = max(r["growth"] for r in results["stream-lazy"]) / MiB
    bound = args.tensor_mib + 64
    print(f"stream-lazy peak growth {lazy:.1f} MiB vs bound (largest tensor + 64 MiB) {bound} MiB: "
          f"{'within' if lazy <= bound else 'OVER'}")


if __name__ == "__main__":
    main()
