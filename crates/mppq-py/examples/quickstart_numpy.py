# The same job without PyTorch: any iterable of NumPy arrays (run from the repository root).
import glob
import numpy as np
import mppq_rs

batches = (np.load(f)["input"] for f in sorted(glob.glob("testdata/tiny_cnn_calib/*.npz")))
result = mppq_rs.quantize("testdata/tiny_cnn.onnx", batches)
result.save("out-python")
print(result.summary)
