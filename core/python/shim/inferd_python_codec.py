# The JSON codec of the worker's frame headers (inferd_python_worker.py).

import json

# One encoder and decoder for every header: json.dumps with arguments builds
# an encoder per call, and json.loads of bytes sniffs their encoding. The
# encoder is json's C one, made once (JSONEncoder.encode makes it anew for
# each call, about half its cost for a small header); headers are trees, so
# it keeps no markers for cycles. The decoder is json's scanner without
# JSONDecoder.decode's whitespace matching: the server writes headers
# compactly.
def _unencodable(o):
    raise TypeError("Object of type " + o.__class__.__name__ + " is not JSON serializable")


_c_encoder = None
if json.encoder.c_make_encoder is not None:
    _c_encoder = json.encoder.c_make_encoder(
        None, _unencodable, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True)


def _encode(obj):
    if _c_encoder is None:
        return json.JSONEncoder(separators=(",", ":")).encode(obj)
    return "".join(_c_encoder(obj, 0))


_scan = json.scanner.make_scanner(json.JSONDecoder())


def _decode(text):
    try:
        obj, end = _scan(text, 0)
    except StopIteration:
        end = -1
    if end != len(text):
        return json.loads(text)  # whitespace, more after it, or no JSON: json's verdict
    return obj
