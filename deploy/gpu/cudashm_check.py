"""CUDA shared memory against a running inferd, for deploy/gpu/check.sh: a
client process holding device memory (cupy's raw cudaMalloc, not its pool:
an IPC handle names a whole allocation) registers regions over HTTP, infers
on each add/sub model named with inputs and outputs in them, and checks the
refusals in Triton's words. Prints PASS/FAIL lines; exit status 1 on any FAIL.

    python3 cudashm_check.py http://localhost:8000 simple simple_gpu
"""
import base64, json, sys, urllib.request, urllib.error
import numpy as np
import cupy as cp

url = sys.argv[1]
fails = 0


def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def check(what, ok, detail=""):
    global fails
    print(("PASS " if ok else "FAIL ") + what + ("" if ok else ": " + str(detail)[:300]), flush=True)
    fails += 0 if ok else 1


rt = cp.cuda.runtime
N = 16
in_ptr = rt.malloc(2 * N * 4)
out_ptr = rt.malloc(2 * N * 4)
a = np.arange(N, dtype=np.int32)
b = np.full(N, 3, dtype=np.int32)
host_in = np.concatenate([a, b])
rt.memcpy(in_ptr, host_in.ctypes.data, host_in.nbytes, 1)  # host to device
rt.memset(out_ptr, 0, 2 * N * 4)
h_in = base64.b64encode(bytes(rt.ipcGetMemHandle(in_ptr))).decode()
h_out = base64.b64encode(bytes(rt.ipcGetMemHandle(out_ptr))).decode()

code, meta = call("GET", "/v2")
check("server metadata lists cuda_shared_memory", "cuda_shared_memory" in meta.get("extensions", []), meta)
call("POST", "/v2/cudasharedmemory/unregister")
code, r = call("POST", "/v2/cudasharedmemory/region/in/register",
               {"raw_handle": {"b64": h_in}, "device_id": 0, "byte_size": 2 * N * 4})
check("register input region", code == 200, (code, r))
code, r = call("POST", "/v2/cudasharedmemory/region/out/register",
               {"raw_handle": {"b64": h_out}, "device_id": 0, "byte_size": 2 * N * 4})
check("register output region", code == 200, (code, r))
code, r = call("POST", "/v2/cudasharedmemory/region/in/register",
               {"raw_handle": {"b64": h_in}, "device_id": 0, "byte_size": 2 * N * 4})
check("duplicate name refused", code == 400 and "already in manager" in r.get("error", ""), (code, r))
code, r = call("POST", "/v2/cudasharedmemory/region/big/register",
               {"raw_handle": {"b64": h_in}, "device_id": 0, "byte_size": 1 << 30})
check("byte_size past the allocation refused", code == 400 and r.get("error") == "failed to register shared memory region 'big': invalid args", (code, r))
code, r = call("POST", "/v2/cudasharedmemory/region/junk/register",
               {"raw_handle": {"b64": base64.b64encode(b"\xab" * 64).decode()}, "device_id": 0, "byte_size": 16})
check("garbage handle refused", code == 400 and "invalid args" in r.get("error", ""), (code, r))
code, r = call("GET", "/v2/cudasharedmemory/status")
names = sorted(x.get("name") for x in r) if isinstance(r, list) else r
check("status lists in and out", code == 200 and names == ["in", "out"], (code, r))

for model in sys.argv[2:]:
    rt.memset(out_ptr, 0, 2 * N * 4)
    body = {"inputs": [
        {"name": "INPUT0", "shape": [1, N], "datatype": "INT32",
         "parameters": {"shared_memory_region": "in", "shared_memory_byte_size": N * 4}},
        {"name": "INPUT1", "shape": [1, N], "datatype": "INT32",
         "parameters": {"shared_memory_region": "in", "shared_memory_offset": N * 4, "shared_memory_byte_size": N * 4}}],
        "outputs": [
        {"name": "OUTPUT0", "parameters": {"shared_memory_region": "out", "shared_memory_byte_size": N * 4}},
        {"name": "OUTPUT1", "parameters": {"shared_memory_region": "out", "shared_memory_offset": N * 4, "shared_memory_byte_size": N * 4}}]}
    code, r = call("POST", "/v2/models/%s/infer" % model, body)
    host_out = np.zeros(2 * N, dtype=np.int32)
    rt.memcpy(host_out.ctypes.data, out_ptr, host_out.nbytes, 2)  # device to host
    ok = code == 200 and (host_out[:N] == a + b).all() and (host_out[N:] == a - b).all() \
        and all("data" not in o for o in r.get("outputs", []))
    check("%s: inputs and outputs in CUDA regions" % model, ok, (code, r, host_out.tolist()))

code, r = call("POST", "/v2/cudasharedmemory/region/in/unregister")
check("unregister in", code == 200, (code, r))
code, r = call("POST", "/v2/cudasharedmemory/unregister")
code2, r2 = call("GET", "/v2/cudasharedmemory/status")
check("unregister all leaves none", code == 200 and r2 == [], (code, r, r2))
rt.free(in_ptr)
rt.free(out_ptr)
print("cudashm check: %d failed" % fails)
sys.exit(1 if fails else 0)
