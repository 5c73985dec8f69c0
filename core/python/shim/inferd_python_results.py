# Checks of what a model's execute returned (inferd_python_worker.py).

import triton_python_backend_utils as pb_utils


def check(result, requests, blobs, decoupled, instance):
    """The wire form of execute's result, checked as Triton's stub checks
    it (triton-inference-server/python_backend src/pb_stub.cc)."""
    if decoupled:
        if result is not None:
            raise pb_utils.TritonModelException(
                "Python model '" + instance + "' is using the decoupled mode and the execute function must return None.")
        return [None] * len(requests)
    if result is None:
        return [None] * len(requests)  # the server answers any request left open
    if not isinstance(result, list):
        raise pb_utils.TritonModelException(
            "Expected a list in the execute return, found type '" + str(type(result)) + "'.")
    if len(result) != len(requests):
        raise pb_utils.TritonModelException(
            "Number of InferenceResponse objects do not match the number of InferenceRequest objects. "
            "InferenceRequest(s) size is:" + str(len(requests)) + ", and InferenceResponse(s) size is:" + str(len(result)) + "\n")
    out = []
    for req, resp in zip(requests, result):
        if resp is None:
            out.append(None)
            continue
        if req._release_flags == pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
            raise pb_utils.TritonModelException(
                "Expected a None object in the execute function return list for reschduled request, found type '" + str(type(resp)) + "'.")
        if not isinstance(resp, pb_utils.InferenceResponse):
            raise pb_utils.TritonModelException(
                "Expected an 'InferenceResponse' object in the execute function return list, found type '" + str(type(resp)) + "'.")
        if req._responded:
            raise pb_utils.TritonModelException(
                "Unable to send response. Non-decoupled model cannot send more than one response.")
        out.append(pb_utils._response_wire(resp, req._requested, blobs))
    return out
