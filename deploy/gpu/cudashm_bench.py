"""16 MiB FP32 identity through CUDA shared memory vs binary HTTP, c1, on a
KIND_GPU and a KIND_CPU copy of the model; one run, side by side."""
import base64, http.client, json, sys, time
import numpy as np
import cupy as cp

host, port = sys.argv[1].split(":")
N, W = 30, 3
nbytes = 4 << 22
rt = cp.cuda.runtime
conn = http.client.HTTPConnection(host, int(port), timeout=60)


def call(method, path, body=b"", headers=None):
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    return r.status, r.getheaders(), r.read()


src = np.random.default_rng(1).random(1 << 22, dtype=np.float32)
in_ptr, out_ptr = rt.malloc(nbytes), rt.malloc(nbytes)
rt.memcpy(in_ptr, src.ctypes.data, nbytes, 1)
for name, ptr in (("bin", in_ptr), ("bout", out_ptr)):
    st, _, b = call("POST", "/v2/cudasharedmemory/region/%s/register" % name, json.dumps(
        {"raw_handle": {"b64": base64.b64encode(bytes(rt.ipcGetMemHandle(ptr))).decode()}, "device_id": 0, "byte_size": nbytes}))
    assert st == 200, b

shm_body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1 << 22], "datatype": "FP32",
                                   "parameters": {"shared_memory_region": "bin", "shared_memory_byte_size": nbytes}}],
                       "outputs": [{"name": "OUTPUT0", "parameters": {"shared_memory_region": "bout", "shared_memory_byte_size": nbytes}}]})
hdr = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1 << 22], "datatype": "FP32", "parameters": {"binary_data_size": nbytes}}],
                  "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
bin_body = hdr + src.tobytes()
bin_headers = {"Inference-Header-Content-Length": str(len(hdr)), "Content-Type": "application/octet-stream"}


def run(model, body, headers):
    for _ in range(W):
        st, _, b = call("POST", "/v2/models/%s/infer" % model, body, headers)
        assert st == 200, b[:300]
    t = time.perf_counter()
    for _ in range(N):
        call("POST", "/v2/models/%s/infer" % model, body, headers)
    return N / (time.perf_counter() - t)


fails = 0
for model in sys.argv[2:]:
    rt.memset(out_ptr, 0, nbytes)
    shm = run(model, shm_body, {})
    got = np.empty(1 << 22, dtype=np.float32)
    rt.memcpy(got.ctypes.data, out_ptr, nbytes, 2)
    ok = np.array_equal(got, src)
    fails += 0 if ok else 1
    binary = run(model, bin_body, bin_headers)
    print("%s %s: CUDA shm %.1f infer/s, binary HTTP %.1f infer/s, ratio %.2f" % (
        "PASS" if ok else "FAIL (output differs)", model, shm, binary, shm / binary), flush=True)
call("POST", "/v2/cudasharedmemory/unregister")
rt.free(in_ptr)
rt.free(out_ptr)
sys.exit(1 if fails else 0)
