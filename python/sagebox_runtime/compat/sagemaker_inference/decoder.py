"""decode(obj, content_type) -> numpy array, as in sagemaker_inference.decoder.

Same decoders as sagebox's default input_fn: JSON and CSV give float64/int
arrays (no float32 conversion here, like the toolkit), NPY keeps its dtype and
refuses pickles, NPZ follows the default input_fn's rule (a scipy.sparse
archive is densified).
"""

from sagebox_runtime import content_types as _ct
from sagebox_runtime import defaults as _d
from sagebox_runtime.errors import UnsupportedFormatError

json_to_numpy = _d.decode_json
csv_to_numpy = _d.decode_csv
npy_to_numpy = _d.decode_npy
npz_to_numpy = _d.decode_npz

_DECODERS = {_ct.JSON: json_to_numpy, _ct.CSV: csv_to_numpy, _ct.NPY: npy_to_numpy, _ct.NPZ: npz_to_numpy}


def decode(obj, content_type):
    fn = _DECODERS.get(_ct.media_type(content_type))
    if fn is None:
        raise UnsupportedFormatError(content_type)
    return fn(obj)
